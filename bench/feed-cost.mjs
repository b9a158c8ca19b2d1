// What nats-server spends to hand the audit trail's batches to an indexer, by the way it is
// handed (issue 25). Each mode is a nats-server of its own (-js, file storage, on 127.0.0.1) with
// a stream capturing `t.events`, batches of KB KiB (default 300: 1,024 call events) published at
// RATE a second for SECONDS, and one reader connection:
//   store       nobody reads (what storing alone costs)
//   consumer    a durable pull consumer, each batch acknowledged (what the trace-id indexer uses)
//   push-noack  a durable push consumer, no acknowledgements
//   core        a plain subscription to `t.events` (the published message, not the stored one)
//   republish   the stream republishes each stored batch to `t.feed`, a plain subscription reads it
// Modes take turns, round by round; each line is nats-server's CPU (from /proc) per batch and per
// call (a batch being 1,024 calls of 300 bytes). MEM=1 makes the stream memory-backed. Run from
// the repository (it imports its nats.js): node bench/feed-cost.mjs [rate=24] [seconds=8] [rounds=3] [modes]
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';

const [rate = 24, seconds = 8, rounds = 3] = process.argv.slice(2, 5).map(Number);
const modes = (process.argv[5] ?? 'store,consumer,push-noack,core,republish').split(',');
const kb = Number(process.env.KB ?? 300);
const TICKS = 100;
const cpuUs = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(f[11]) + Number(f[12])) / TICKS) * 1e6;
};
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const payload = Buffer.alloc(kb * 1024);
for (let i = 0; i < payload.length; i++) payload[i] = (i * 7919) & 0xff;

/** Starts the reader of `mode`; returns how many batches it got so far, and how to stop it. */
async function reader(mode, jsm, rc) {
  let got = 0;
  const count = () => got;
  if (mode === 'consumer' || mode === 'push-noack') {
    const push = mode === 'push-noack';
    await jsm.consumers.add('T', {
      durable_name: 'i',
      deliver_policy: DeliverPolicy.All,
      ack_policy: push ? AckPolicy.None : AckPolicy.Explicit,
      ...(push ? { deliver_subject: 'deliver.i' } : { max_ack_pending: 2048 }),
    });
    if (push) rc.subscribe('deliver.i', { callback: () => got++ });
    else {
      const messages = await (await jetstream(rc).consumers.get('T', 'i')).consume({ max_messages: 256 });
      void (async () => {
        for await (const m of messages) {
          got++;
          m.ack();
        }
      })();
      return { count, stop: () => messages.stop() };
    }
  } else if (mode === 'core') rc.subscribe('t.events', { callback: () => got++ });
  else if (mode === 'republish') rc.subscribe('t.feed', { callback: () => got++ });
  return { count, stop: () => {} };
}

async function measure(mode, port) {
  const dir = mkdtempSync(join(tmpdir(), 'feed-cost-'));
  const server = spawn('nats-server', ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', dir], { stdio: 'ignore' });
  await sleep(700);
  const nc = await connect({ servers: `127.0.0.1:${port}` });
  const rc = await connect({ servers: `127.0.0.1:${port}` });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({
    name: 'T',
    subjects: ['t.events'],
    max_bytes: 1024 ** 3,
    ...(process.env.MEM ? { storage: 'memory' } : {}),
    ...(mode === 'republish' ? { republish: { src: 't.events', dest: 't.feed' } } : {}),
  });
  const read = await reader(mode, jsm, rc);
  await rc.flush();
  const before = cpuUs(server.pid);
  const batches = rate * seconds;
  for (let i = 0; i < batches; i++) {
    nc.publish('t.events', payload);
    await sleep(1000 / rate);
  }
  await nc.flush();
  const until = Date.now() + 10_000;
  while (mode !== 'store' && read.count() < batches && Date.now() < until) await sleep(50);
  await sleep(500);
  const us = cpuUs(server.pid) - before;
  read.stop();
  await rc.close();
  await nc.close();
  server.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
  const calls = (batches * 1024 * kb) / 300;
  return {
    mode,
    kb,
    batches,
    got: read.count(),
    perBatchUs: Math.round(us / batches),
    perCallUs: +(us / calls).toFixed(2),
  };
}

let port = 14300 + (process.pid % 50) * 10;
for (let round = 0; round < rounds; round++)
  for (const mode of modes) console.log(JSON.stringify({ round, ...(await measure(mode, port++)) }));
