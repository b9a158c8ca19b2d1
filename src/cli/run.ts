/**
 * Running a verb: connect once as the flags say, hand the verb a client and an output, report
 * what it throws, close. Verbs never touch the process; main.ts exits with the code they return.
 */
import type { Command } from 'commander';
import { BusClient } from '../bus/client.js';
import { connectBus } from '../bus/connect.js';
import { holderInbox, loadGrant, readGrantClaims } from '../identity/granted.js';
import type { GrantClaims } from '../identity/types.js';
import { connectConfig, connectionSource, type Flags } from './config.js';
import { ExitCode, type Output, processOutput, reportError } from './output.js';

/** A verb: does its work over `client`, writes to `out`, resolves with its exit code. */
export type Verb<A> = (client: BusClient, args: A, out: Output) => Promise<number>;

/** Any verb: commander hands a verb its args untyped, so the runner takes each verb's own type on trust. */
type AnyVerb = Verb<never>;

/**
 * The commander action of `verb`. Its args are the command's flags (the connection flags of the
 * program included) plus its positional arguments, named by `positional` in order. It sets
 * `process.exitCode`, which main.ts exits with.
 */
export function verbAction(verb: AnyVerb, ...positional: string[]): (...params: unknown[]) => Promise<void> {
  return actionOf(verb, positional, true);
}

/** The action of a verb whose `--grant` names a grant to act on, not the caller's (`revoke`). */
export function verbActionOnGrant(verb: AnyVerb): (...params: unknown[]) => Promise<void> {
  return actionOf(verb, [], false);
}

function actionOf(verb: AnyVerb, positional: string[], callersGrant: boolean): (...params: unknown[]) => Promise<void> {
  return async (...params) => {
    const cmd = params[params.length - 1] as Command;
    const args: Flags = { ...cmd.optsWithGlobals() };
    for (const [i, name] of positional.entries()) args[name] = params[i];
    process.exitCode = await runVerb(verb, args, processOutput, process.env, callersGrant);
  };
}

/**
 * Connects as `args` and `env` say, runs `verb`, drains; resolves with the exit code. With the
 * caller's grant (`--grant` / `MATRIX_GRANT`, unless `callersGrant` is false) bound to its
 * holder, the connection takes its replies on the grant's inbox prefix.
 */
export async function runVerb(
  verb: AnyVerb,
  args: Flags,
  out: Output,
  env: NodeJS.ProcessEnv = process.env,
  callersGrant = true,
): Promise<number> {
  const options = connectConfig(args, env);
  // A grant bound to its holder's inbox is answered only on that prefix: use that one. One bound
  // to its holder's user takes `_INBOX_<user>` (deploy/nats.conf's) unless a prefix was given.
  const claims = callersGrant ? grantClaims(args, env) : undefined;
  if (typeof claims?.nats?.inbox === 'string') options.inboxPrefix = claims.nats.inbox;
  else options.inboxPrefix ??= holderInbox(claims);
  let client: BusClient;
  try {
    client = new BusClient(await connectBus(options));
  } catch (err) {
    out.note(
      `error: cannot reach NATS at ${connectionSource(options, env)}: ${(err as Error).message} (start it, or pass --server / NATS_URL)`,
    );
    return ExitCode.Unreachable;
  }
  try {
    return await verb(client, args as never, out);
  } catch (err) {
    const code = reportError(err, out);
    // Nothing answered, or not in time: say which NATS was asked, as whom, and why that one.
    if (code === ExitCode.Unreachable) out.note(`  asked on NATS at ${connectionSource(options, env)}`);
    return code;
  } finally {
    client.close();
    await client.nc.drain().catch(() => {});
  }
}

/** The claims of the verb's grant (`--grant` / `MATRIX_GRANT`), unverified, when it has one and can be read. */
function grantClaims(args: Flags, env: NodeJS.ProcessEnv): Partial<GrantClaims> | undefined {
  const given = typeof args.grant === 'string' ? args.grant : env.MATRIX_GRANT;
  if (!given) return undefined;
  try {
    return readGrantClaims(loadGrant(given));
  } catch {
    // An unreadable grant is the verb's to report.
    return undefined;
  }
}

/**
 * How long after the first signal a repeat is taken for the same one, in ms. Under `npm start`, a
 * terminal's Ctrl-C reaches the service twice at once: from the terminal, and forwarded by npm.
 */
const REPEAT_WINDOW_MS = 2_000;

/**
 * Resolves with the first SIGINT or SIGTERM the process gets. A repeat within
 * {@link REPEAT_WINDOW_MS} is ignored (the same signal, forwarded); a later one ends the process
 * at once, as a second Ctrl-C is meant to.
 */
export function interrupted(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const repeat = () => undefined;
    const on = (signal: NodeJS.Signals) => {
      // The repeat listener goes on before `on` comes off: a moment without one is the default, death.
      process.on('SIGINT', repeat);
      process.on('SIGTERM', repeat);
      process.off('SIGINT', on);
      process.off('SIGTERM', on);
      setTimeout(() => {
        process.off('SIGINT', repeat);
        process.off('SIGTERM', repeat);
      }, REPEAT_WINDOW_MS).unref();
      resolve(signal);
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
  });
}
