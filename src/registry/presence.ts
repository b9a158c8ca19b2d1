/**
 * Which mounts have a live instance, from NATS services discovery (`$SRV.PING`): every
 * mount answers it (PROTOCOL section 1). Snapshots are cached and refreshed when older
 * than `maxAgeMs`; concurrent refreshes share one ping.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { pingServices } from '../bus/discovery.js';
import { serviceName } from '../bus/subjects.js';

/** The live mounts at one moment. */
export interface PresenceSnapshot {
  /** Increments with every refresh; part of the resolve cache key. */
  version: number;
  isLive(mount: string): boolean;
}

/** Cached liveness of mounts. */
export class Presence {
  private snapshot: (PresenceSnapshot & { at: number }) | undefined;
  private refreshing: Promise<PresenceSnapshot> | undefined;
  private version = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly maxAgeMs = 2_000,
    private readonly waitMs = 150,
  ) {}

  /** A snapshot no older than `maxAgeMs`. */
  current(): Promise<PresenceSnapshot> {
    if (this.snapshot !== undefined && Date.now() - this.snapshot.at < this.maxAgeMs) return Promise.resolve(this.snapshot);
    return (this.refreshing ??= this.refresh().finally(() => (this.refreshing = undefined)));
  }

  private async refresh(): Promise<PresenceSnapshot> {
    const live = await pingServices(this.nc, this.waitMs);
    const snapshot = { version: ++this.version, at: Date.now(), isLive: (mount: string) => live.has(serviceName(mount)) };
    this.snapshot = snapshot;
    return snapshot;
  }
}
