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
    const snapshot = { version: ++this.version, at: Date.now(), isLive: kept(live) };
    this.snapshot = snapshot;
    return snapshot;
  }
}

/** Most service names a snapshot keeps, and most characters of them: 10,000 and 1 MiB. */
export const PRESENCE_BOUNDS = { maxEntries: 10_000, maxBytes: 1024 * 1024 } as const;

/**
 * The liveness test of a ping's answers. Past `PRESENCE_BOUNDS` (a bus flooded with answers
 * to `$SRV.PING`) the snapshot keeps nothing and calls every mount live: `onlyAvailable` then
 * leaves no tool out, which is what it does when presence is unknown.
 */
function kept(live: Set<string>): (mount: string) => boolean {
  let chars = 0;
  for (const name of live) chars += name.length;
  if (live.size > PRESENCE_BOUNDS.maxEntries || chars > PRESENCE_BOUNDS.maxBytes) return () => true;
  return (mount: string) => live.has(serviceName(mount));
}
