// A flooding agent in its own process (so its sending costs the measuring process nothing):
// `lanes` lanes, each sending one body on one subject as soon as its last was answered, at most
// `perSecond` a second each, until told to stop (SIGTERM); then prints how many it sent.
// Arguments: a JSON object {servers, user, pass, inboxPrefix, subject, bodyFile, headers, lanes, perSecond,
// badGrants?}. With `badGrants: {iss, chars, entries}`, each request carries a grant of its own, `chars`
// long, naming `iss` and signed by no one (bad-grants.ts).
import { readFileSync } from 'node:fs';
import { headers as natsHeaders } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import { badGrants } from './bad-grants.ts';

const spec = JSON.parse(process.argv[2]);
const nc = await connect({ servers: spec.servers, user: spec.user, pass: spec.pass, inboxPrefix: spec.inboxPrefix });
const body = readFileSync(spec.bodyFile);
let flooding = true;
let sent = 0;
process.on('SIGTERM', () => {
  flooding = false;
});

const badGrant = spec.badGrants
  ? badGrants(spec.badGrants.iss, spec.badGrants.chars, spec.badGrants.entries)
  : undefined;

const lane = async () => {
  while (flooding) {
    const next = performance.now() + 1000 / spec.perSecond;
    const h = natsHeaders();
    for (const [k, v] of Object.entries(spec.headers ?? {})) h.set(k, v);
    if (badGrant !== undefined) h.set('Matrix-Grant', badGrant());
    await nc.request(spec.subject, body, { timeout: 60_000, headers: h }).catch(() => undefined);
    sent++;
    const wait = next - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
};
process.stdout.write(`flooding${badGrant === undefined ? '' : ` with grants of ${badGrant().length} characters`}\n`);
await Promise.all(Array.from({ length: spec.lanes }, lane));
process.stdout.write(`sent ${sent}\n`);
await nc.close();
