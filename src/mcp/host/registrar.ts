/**
 * Puts a server's context into the registry through `system.tools.$register`, as any service
 * that provides tools does, waiting for a registry while none answers. A spec equal to the one
 * last registered is not sent again.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { BusClient } from '../../bus/client.js';
import { UnavailableError } from '../../bus/errors.js';
import type { Logger } from '../../bus/log.js';
import { Mounts } from '../../bus/subjects.js';
import { digestOf } from '../../registry/canonical.js';
import type { RegisterReply, ToolContextSpec } from '../../registry/types.js';

/** Longest wait for a registry to answer, in ms. */
const REGISTRY_WAIT_MS = 30_000;

/** Registers the contexts of a host's servers. */
export class Registrar {
  private readonly client: BusClient;
  private readonly last = new Map<string, string>();

  constructor(
    nc: NatsConnection,
    private readonly logger: Logger,
  ) {
    this.client = new BusClient(nc, { timeoutMs: 10_000 });
  }

  /** Registers `spec` unless it is what was registered last; logs (never throws) a refusal. */
  async register(spec: ToolContextSpec): Promise<void> {
    const digest = digestOf(spec);
    if (this.last.get(spec.key) === digest) return;
    const until = Date.now() + REGISTRY_WAIT_MS;
    for (let wait = 100; ; wait = Math.min(wait * 2, 2_000)) {
      try {
        const reply = await this.client.request<RegisterReply>(Mounts.Tools, '$register', { spec });
        this.last.set(spec.key, digest);
        this.logger.info(
          `${spec.key} registered at revision ${reply.revision} (${spec.matrixTools?.length ?? 0} tools)`,
        );
        return;
      } catch (err) {
        if (err instanceof UnavailableError && Date.now() + wait < until) {
          await new Promise((resolve) => setTimeout(resolve, wait));
          continue;
        }
        this.logger.error(`${spec.key} not registered: ${(err as Error).message}`);
        return;
      }
    }
  }

  /** Ends the client's subscription. */
  close(): void {
    this.client.close();
  }
}
