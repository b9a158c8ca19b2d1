/**
 * For services on the bus that provide tools: register their contexts when they start,
 * withdraw them when they stop, and follow the registry's changes.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { BusClient } from '../bus/client.js';
import { MatrixError, UnavailableError } from '../bus/errors.js';
import { Mounts } from '../bus/subjects.js';
import type { RegisterReply, ToolContextSpec } from './types.js';

/** How a provider behaves. */
export interface ToolProviderOptions {
  /** How long `start()` keeps trying while no registry answers, in ms; default 30000. */
  startTimeoutMs?: number;
}

/** Registers a service's tool contexts for as long as it runs. */
export class ToolProvider {
  private readonly client: BusClient;
  private readonly registered = new Map<string, number>();

  constructor(
    nc: NatsConnection,
    private readonly specs: readonly ToolContextSpec[],
    private readonly options: ToolProviderOptions = {},
  ) {
    this.client = new BusClient(nc, { timeoutMs: 10_000 });
  }

  /** Registers every spec (overwriting its earlier version), waiting for a registry if none answers yet. */
  async start(): Promise<RegisterReply[]> {
    const until = Date.now() + (this.options.startTimeoutMs ?? 30_000);
    const replies: RegisterReply[] = [];
    for (const spec of this.specs) {
      for (let wait = 100; ; wait = Math.min(wait * 2, 2_000)) {
        try {
          const reply = await this.client.request<RegisterReply>(Mounts.Tools, '$register', { spec });
          this.registered.set(reply.key, reply.revision);
          replies.push(reply);
          break;
        } catch (err) {
          if (!(err instanceof UnavailableError) || Date.now() + wait > until) throw err;
          await new Promise((resolve) => setTimeout(resolve, wait));
        }
      }
    }
    return replies;
  }

  /** Withdraws what `start()` registered, unless someone changed it since. */
  async stop(): Promise<void> {
    for (const [key, revision] of this.registered) {
      try {
        await this.client.request(Mounts.Tools, '$unregister', { key, expectedRevision: revision });
      } catch (err) {
        // Changed or removed by someone else since: theirs now, not ours to withdraw.
        if (!(err instanceof MatrixError && (err.code === 'conflict' || err.code === 'not_found'))) throw err;
      }
      this.registered.delete(key);
    }
    this.client.close();
  }
}
