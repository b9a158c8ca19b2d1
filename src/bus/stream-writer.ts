/**
 * Writes to JetStream subjects at the cost of a publish: one reply subscription for every
 * write's acknowledgement and one timer sweep for all deadlines. The JetStream client's publish
 * costs a request of its own per write (a timer, a promise, and an error object built on every
 * success to cancel it), which a steady stream of small writes (the audit index) pays in full.
 */

import { createInbox, type Msg, type NatsConnection, type Subscription } from '@nats-io/nats-core';
import { randomToken } from './client.js';
import { UnavailableError } from './errors.js';
import { guarded } from './subjects.js';

interface Pending {
  resolve(seq: number): void;
  reject(err: Error): void;
  deadline: number;
  subject: string;
}

/** Appends messages to stream subjects; each write resolves to the stream's sequence once stored. */
export class StreamWriter {
  private readonly inbox = `${createInbox()}.`;
  private readonly pending = new Map<string, Pending>();
  private sub: Subscription | undefined;
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly timeoutMs = 5_000,
  ) {}

  /**
   * Stores `data` on `subject`; `UnavailableError` if no stream takes it, it is refused, or not
   * acknowledged in time.
   */
  append(subject: string, data: Uint8Array): Promise<number> {
    // Random, not a counter: a write's reply subject tells nothing of the next one's.
    let token = randomToken();
    while (this.pending.has(token)) token = randomToken();
    return new Promise<number>((resolve, reject) => {
      this.pending.set(token, { resolve, reject, deadline: Date.now() + this.timeoutMs, subject });
      try {
        this.sub ??= this.nc.subscribe(`${this.inbox}*`, {
          callback: guarded((err, msg) => {
            if (err === null) this.onAck(msg);
          }),
        });
        this.nc.publish(subject, data, { reply: this.inbox + token });
      } catch (err) {
        this.pending.delete(token);
        reject(new UnavailableError(`cannot write to ${subject}: ${(err as Error).message}`, { cause: err }));
        return;
      }
      this.sweeper ??= setInterval(() => this.sweep(), 100).unref();
    });
  }

  /** Fails the writes still waiting and stops listening. */
  close(): void {
    for (const p of this.pending.values())
      p.reject(new UnavailableError(`writer closed before ${p.subject} was acknowledged`));
    this.pending.clear();
    this.sub?.unsubscribe();
    this.sub = undefined;
    clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  private onAck(msg: Msg): void {
    const token = msg.subject.slice(this.inbox.length);
    const p = this.pending.get(token);
    if (p === undefined) return;
    this.pending.delete(token);
    if (msg.data.length === 0) {
      p.reject(new UnavailableError(`no stream took ${p.subject} (status ${msg.headers?.code ?? 'none'})`));
      return;
    }
    let ack: { seq?: unknown; error?: { err_code?: number; description?: string } };
    try {
      ack = JSON.parse(Buffer.from(msg.data.buffer, msg.data.byteOffset, msg.data.length).toString());
    } catch {
      p.reject(new UnavailableError(`unreadable acknowledgement of ${p.subject}`));
      return;
    }
    if (typeof ack.seq === 'number' && ack.error === undefined) p.resolve(ack.seq);
    else
      p.reject(
        new UnavailableError(
          `JetStream refused ${p.subject}: ${ack.error?.description ?? 'no sequence in its acknowledgement'}`,
        ),
      );
  }

  private sweep(): void {
    const now = Date.now();
    for (const [token, p] of this.pending) {
      if (p.deadline > now) continue;
      this.pending.delete(token);
      p.reject(new UnavailableError(`JetStream did not acknowledge ${p.subject} within ${this.timeoutMs} ms`));
    }
    if (this.pending.size === 0) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }
}
