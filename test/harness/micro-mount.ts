/**
 * A mount as a NATS micro service in Go, Python or Rust is by default, built on
 * `@nats-io/services`: it reads and answers JSON without a Content-Type, errors the micro way
 * (`Nats-Service-Error-Code`/`Nats-Service-Error` headers, the body whatever it likes), knows no
 * `$introspect` and no `Matrix-Deadline`. Endpoints `echo` and `fail`, under `<mount>.`.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { type Service, type ServiceMsg, Svcm } from '@nats-io/services';
import { serviceName } from '../../src/bus/subjects.js';

/** Starts the micro mount; `stop()` it after. */
export async function startJsonMicroMount(nc: NatsConnection, mount: string): Promise<Service> {
  const service = await new Svcm(nc).add({
    name: serviceName(mount),
    version: '1.0.0',
    description: 'a JSON micro service, as Go writes them',
  });
  const group = service.addGroup(mount);
  group.addEndpoint('echo', (err, msg) => {
    if (err !== null) return;
    const body = readJson(msg);
    if (body !== undefined) msg.respond(JSON.stringify({ echo: body }));
  });
  group.addEndpoint('fail', (err, msg) => {
    if (err === null) msg.respondError(400, 'bad widget', JSON.stringify({ widget: 'w-1' }));
  });
  await nc.flush();
  return service;
}

/** The request's JSON body (empty is `{}`), or undefined after answering 400 as micro services do. */
function readJson(msg: ServiceMsg): unknown {
  if (msg.data.length === 0) return {};
  try {
    return msg.json();
  } catch {
    msg.respondError(400, 'request body is not JSON');
    return undefined;
  }
}
