/**
 * `check <mount>`: the conformance check of one mount against the bus protocol
 * (`bus/conformance.ts`), printed; exits 1 on a miss.
 */
import type { Command } from 'commander';
import type { BusClient } from '../bus/client.js';
import { Encoding } from '../bus/codec.js';
import { checkConformance } from '../bus/conformance.js';
import { serviceName } from '../bus/subjects.js';
import { withConnection } from './config.js';
import { ExitCode, jsonFlag, type Output, table, UsageError } from './output.js';
import { verbAction } from './run.js';

/** Declares `check <mount>` with the connection flags. */
export function addCheckCommand(program: Command): void {
  withConnection(program.command('check'))
    .description('check that a mount (yours, in any language) follows the bus protocol; exit 1 on a miss')
    .argument('<mount>', 'the mount, e.g. app.weather')
    .option(
      '--op <op>',
      'the op the encoding, error and deadline checks call, `echo` or `$echo` (it runs twice: pick one that changes nothing)',
      '$introspect',
    )
    .option(
      '--encoding <msgpack|json>',
      "how the mount's tools send requests (their projection's encoding): json needs no MessagePack",
      'msgpack',
    )
    .option('-a, --args <json>', 'its request body, a JSON object', '{}')
    .option('--timeout <ms>', 'longest wait for each answer', '2000')
    .option('--json', 'print the outcomes as JSON')
    .action(verbAction(checkMount, 'mount'));
}

/** What `check` takes. */
export interface CheckArgs {
  mount: string;
  op?: string;
  args?: string;
  timeout?: string;
  /** `msgpack` (default) or `json`. */
  encoding?: string;
  json?: boolean;
}

/** `check <mount>`: prints each check and exits 0 when every one holds, 1 otherwise. */
export async function checkMount(client: BusClient, flags: CheckArgs, out: Output): Promise<number> {
  const { mount } = flags;
  const args = jsonFlag('--args', flags.args ?? '{}');
  if (args === null || typeof args !== 'object' || Array.isArray(args))
    throw new UsageError('--args must be a JSON object');
  const encoding = flags.encoding ?? Encoding.MsgPack;
  if (encoding !== Encoding.MsgPack && encoding !== Encoding.Json)
    throw new UsageError('--encoding must be msgpack or json');
  const outcomes = await checkConformance(client.nc, mount, {
    op: flags.op,
    args: args as Record<string, unknown>,
    timeoutMs: Number(flags.timeout) || 2_000,
    encoding,
  });
  const held = outcomes.filter((o) => o.ok).length;
  if (flags.json)
    out.print(JSON.stringify({ mount, service: serviceName(mount), ok: held === outcomes.length, outcomes }, null, 2));
  else {
    const rows = outcomes.map((o) => [o.ok ? 'ok' : 'MISS', o.check, o.detail]);
    out.print(`${mount} (service ${serviceName(mount)})\n${table(['', 'CHECK', 'WHAT IT SAW'], rows)}`);
    out.print(
      `${held} of ${outcomes.length} hold${held === outcomes.length ? '' : `; ${outcomes.length - held} missed`}`,
    );
  }
  return held === outcomes.length ? ExitCode.Ok : ExitCode.Failed;
}
