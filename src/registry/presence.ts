/**
 * Which mounts have a live instance, from NATS services discovery by name: each mount answers
 * `$SRV.PING.<its service name>` (PROTOCOL section 1), a subject only its own NATS user hears
 * under deploy/nats.conf, so no other mount user can make it look live. Snapshots are of the
 * mounts asked about, cached and refreshed when older than `maxAgeMs` or asked about other
 * mounts; concurrent refreshes share one ping.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { pingServices } from '../bus/discovery.js';

/** The live mounts at one moment. */
export interface PresenceSnapshot {
  /** Increments with every refresh; part of the resolve cache key. */
  version: number;
  isLive(mount: string): boolean;
}

/** Cached liveness of mounts. */
export class Presence {
  private snapshot: (PresenceSnapshot & { at: number; of: readonly string[] }) | undefined;
  private refreshing: { of: readonly string[]; done: Promise<PresenceSnapshot> } | undefined;
  private version = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly maxAgeMs = 2_000,
    private readonly waitMs = 150,
  ) {}

  /**
   * A snapshot of `mounts` (the same array while they stay the same, as `Registry.targets` gives
   * it), no older than `maxAgeMs`.
   */
  current(mounts: readonly string[]): Promise<PresenceSnapshot> {
    const held = this.snapshot;
    if (held !== undefined && held.of === mounts && Date.now() - held.at < this.maxAgeMs) return Promise.resolve(held);
    if (this.refreshing?.of === mounts) return this.refreshing.done;
    const done = this.refresh(mounts).finally(() => {
      if (this.refreshing?.done === done) this.refreshing = undefined;
    });
    this.refreshing = { of: mounts, done };
    return done;
  }

  private async refresh(mounts: readonly string[]): Promise<PresenceSnapshot> {
    const live =
      mounts.length > PRESENCE_BOUNDS.maxEntries ? undefined : await pingServices(this.nc, mounts, this.waitMs);
    const snapshot = { version: ++this.version, at: Date.now(), of: mounts, isLive: kept(live) };
    this.snapshot = snapshot;
    return snapshot;
  }
}

/** Most mounts a snapshot pings by name: 10,000. */
export const PRESENCE_BOUNDS = { maxEntries: 10_000 } as const;

/**
 * The liveness test of a ping's answers. Past `PRESENCE_BOUNDS` (more mounts than it pings) the
 * snapshot calls every mount live: `onlyAvailable` then leaves no tool out, which is what it does
 * when presence is unknown. A mount it was not asked about is not live.
 */
function kept(live: Set<string> | undefined): (mount: string) => boolean {
  if (live === undefined) return () => true;
  return (mount: string) => live.has(mount);
}
