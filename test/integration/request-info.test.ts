/**
 * What nats-server attests about a request's sender, on which a grant bound to its NATS user
 * (`nats.user`, docs/protocol.md 3.1) relies to hold for requests as well as replies. A
 * request's reply subject is the sender's to choose; `Nats-Request-Info` on a message that
 * crosses a service import with `share: true` is the server's: it names the authenticated user,
 * also for a publish that names another user's inbox as its reply subject. A server with the fix
 * for CVE-2026-33223 (the harness's, the newest or the oldest supported) drops every value a
 * client set; one without it (2.12.5, as 2.9.10) drops only the first, so a client's second value
 * arrives (why the service reads only the last line, and refuses user-bound grants on such a
 * server). Inside the service's own account nothing is attested.
 */
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { headers, type Msg, type NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectBus } from '../../src/bus/connect.js';
import { eventually } from '../harness/eventually.js';
import { natsServerBin, type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { NatsVersion, natsTool } from '../harness/nats-tools.js';

const REQUEST_INFO = 'Nats-Request-Info';
const CONF = `
accounts {
  SVC { users: [ { user: service, password: s } ], exports: [ { service: "system.>" } ] }
  AGENTS {
    users: [
      { user: agent, password: a, permissions: { publish: ["system.>"], subscribe: ["_INBOX_agent.>"] } }
      { user: agent-2, password: b, permissions: { publish: ["system.>"], subscribe: ["_INBOX_agent-2.>"] } }
    ]
    imports: [ { service: { account: SVC, subject: "system.>" }, share: true } ]
  }
}
`;

/** The users each value of a message's `Nats-Request-Info` names, in order. */
function attested(msg: Msg): string[] {
  return (msg.headers?.values(REQUEST_INFO) ?? []).map((v) => (JSON.parse(v) as { user?: string }).user ?? '');
}

/** Each server the file runs on, and what reaches the service of two values a client set. */
const servers = [
  { name: 'the harness’s server (fixed)', bin: () => natsServerBin(), twoForged: ['agent-2'] },
  {
    name: `${NatsVersion.affected} (affected)`,
    bin: () => natsTool('server', NatsVersion.affected),
    twoForged: ['agent', 'agent-2'],
  },
];

describe.each(servers)('Nats-Request-Info across a service import with share: true, on $name', ({ bin, twoForged }) => {
  let server: ProcessNats;
  let service: NatsConnection;
  let agent: NatsConnection;
  let other: NatsConnection;
  const seen = new Map<string, Msg>();

  beforeAll(async () => {
    const conf = join(tmpdir(), `request-info-${process.pid}.conf`);
    writeFileSync(conf, CONF);
    server = await startNatsProcess(['-c', conf], { bin: bin() });
    service = await connectBus({ servers: server.url, user: 'service', pass: 's' });
    service.subscribe('system.>', { callback: (_err, msg) => void seen.set(msg.subject, msg) });
    await service.flush();
    agent = await connectBus({ servers: server.url, user: 'agent', pass: 'a', inboxPrefix: '_INBOX_agent' });
    other = await connectBus({ servers: server.url, user: 'agent-2', pass: 'b', inboxPrefix: '_INBOX_agent-2' });
  });
  afterAll(async () => {
    await Promise.all([service?.close(), agent?.close(), other?.close()]);
    await server?.stop();
  });

  /** Publishes as `nc` with `forged` values of the header preset, and returns what the service received. */
  async function received(nc: NatsConnection, subject: string, forged: string[], reply?: string): Promise<Msg> {
    const h = headers();
    for (const user of forged) h.append(REQUEST_INFO, JSON.stringify({ acc: 'AGENTS', user }));
    nc.publish(subject, 'x', { headers: h, reply });
    await nc.flush();
    return eventually(() => seen.get(subject) ?? expect.fail(`${subject} not received`));
  }

  it('names the authenticated sender, also of a blind request with another user’s reply subject', async () => {
    expect(attested(await received(agent, 'system.honest', []))).toEqual(['agent']);
    const blind = await received(other, 'system.blind', [], '_INBOX_agent.x');
    expect(attested(blind)).toEqual(['agent-2']);
    // The import rewrites the reply subject: an inbox check cannot be made on this side of it.
    expect(blind.reply).toMatch(/^_R_\./);
  });

  it('keeps no value a client set as the last: the server drops what it strips and appends its own', async () => {
    expect(attested(await received(other, 'system.one', ['agent']))).toEqual(['agent-2']);
    expect(attested(await received(other, 'system.two', ['agent', 'agent']))).toEqual(twoForged);
  });

  it('attests nothing inside the service’s own account: what the sender set arrives', async () => {
    expect(attested(await received(service, 'system.inside', ['agent']))).toEqual(['agent']);
  });
});
