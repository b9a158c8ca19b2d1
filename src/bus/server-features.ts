/**
 * What the connected server's JetStream can do, read from its API level (`$JS.API.INFO` →
 * `api.level`, NATS ADR-44), never from its version string: a server patched, forked or built
 * from a branch says what it implements there. Asked once per connection; the one place the
 * project decides which JetStream features it uses.
 */
import type { NatsConnection } from '@nats-io/nats-core';

/** JetStream API levels (ADR-44) of the features the project uses. */
export const ApiLevel = {
  /** Per-message TTL (`allow_msg_ttl`, header `Nats-TTL`) and limit markers (ADR-43, ADR-48): nats-server 2.11. */
  MessageTtl: 1,
} as const;

/** The connected server's JetStream, as far as the project uses it. */
export interface JetStreamFeatures {
  /** Its API level; 0 for a server that states none (before 2.11) or could not be asked. */
  apiLevel: number;
  /** Does it expire a message by its own `Nats-TTL` header (API level ≥ 1)? */
  messageTtl: boolean;
}

/** How long the one `$JS.API.INFO` request may take, in ms. */
const INFO_TIMEOUT_MS = 5_000;

const known = new WeakMap<NatsConnection, Promise<JetStreamFeatures>>();

/**
 * The JetStream features of the server `nc` is connected to, asked the first time and kept for
 * the connection's life. A server that cannot be asked counts as level 0: the project then
 * keeps to what every supported server has (sweepers instead of per-message TTL).
 */
export function jetStreamFeatures(nc: NatsConnection): Promise<JetStreamFeatures> {
  let features = known.get(nc);
  if (features === undefined) {
    features = nc.request('$JS.API.INFO', undefined, { timeout: INFO_TIMEOUT_MS }).then(
      (m) => featuresOf(apiLevelOf(m.data)),
      () => featuresOf(0),
    );
    known.set(nc, features);
  }
  return features;
}

/** The features of an API level. */
export function featuresOf(apiLevel: number): JetStreamFeatures {
  return { apiLevel, messageTtl: apiLevel >= ApiLevel.MessageTtl };
}

/** `api.level` of an `$JS.API.INFO` reply; 0 when it has none or is no reply of that shape. */
function apiLevelOf(data: Uint8Array): number {
  try {
    const level = (JSON.parse(new TextDecoder().decode(data)) as { api?: { level?: unknown } }).api?.level;
    return typeof level === 'number' && Number.isSafeInteger(level) && level > 0 ? level : 0;
  } catch {
    return 0;
  }
}
