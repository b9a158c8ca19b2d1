/**
 * Target mounts and approvers for dispatcher tests: plain NATS responders that count every
 * request they receive, so a test can prove that a refused call never reached its target.
 */
import { decode, encode } from '@msgpack/msgpack';
import { headers, type MsgHdrs, type NatsConnection, type Subscription } from '@nats-io/nats-core';
import { keepFailure } from './callbacks.js';

/** What a target saw of one request. */
export interface Seen {
  op: string;
  args: unknown;
  headers: Record<string, string>;
}

/** A handler's answer: a value, raw bytes to send as they are, an error to send back, or `silence` to never answer. */
export type Answer = unknown;
export const silence = Symbol('silence');
export class TargetError {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly message: string,
  ) {}
}

/** A running target mount. */
export interface Target {
  name: string;
  /** Requests received, by op. */
  count(op?: string): number;
  seen: Seen[];
  stop(): void;
}

/** Starts a target at `<name>.*` in a queue group, answering by `handlers[op]`. */
export async function startTarget(
  nc: NatsConnection,
  name: string,
  handlers: Record<string, (args: unknown, seen: Seen) => Answer | Promise<Answer>>,
): Promise<Target> {
  const seen: Seen[] = [];
  const sub: Subscription = nc.subscribe(`${name}.*`, {
    queue: name.replaceAll('.', '-'),
    callback: (_err, msg) => {
      const op = msg.subject.slice(name.length + 1);
      const entry: Seen = { op, args: msg.data.length > 0 ? decode(msg.data) : {}, headers: headerRecord(msg.headers) };
      seen.push(entry);
      const handler = handlers[op];
      // A handler that throws (an `expect` in it, say) fails the running test, and the caller gets a 500.
      const answered = new Promise<Answer>((resolve) =>
        resolve(handler === undefined ? new TargetError(404, 'not_found', `no op ${op}`) : handler(entry.args, entry)),
      );
      void answered
        .catch((err: unknown) => {
          keepFailure(err);
          return new TargetError(500, 'internal', `the test target's ${op} handler threw`);
        })
        .then((answer) => {
          if (answer === silence) return;
          if (answer instanceof TargetError) {
            const h = headers();
            h.set('Nats-Service-Error-Code', String(answer.status));
            h.set('Nats-Service-Error', answer.message);
            msg.respond(encode({ error: { code: answer.code, message: answer.message } }), { headers: h });
            return;
          }
          msg.respond(answer instanceof Uint8Array ? answer : encode(answer));
        });
    },
  });
  await nc.flush();
  return {
    name,
    seen,
    count: (op) => (op === undefined ? seen.length : seen.filter((s) => s.op === op).length),
    stop: () => sub.unsubscribe(),
  };
}

function headerRecord(h: MsgHdrs | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (h === undefined) return out;
  for (const [k, v] of h) out[k] = v[0] ?? '';
  return out;
}
