/**
 * The bench's grant rows on one stack: `serve`, as the CLI builds it, twice in one process. One
 * instance trusts the bench's grant issuer (account `trust`); the other trusts its callers
 * (account `gates`), who send the grant's principal and session as headers instead. Both read
 * the same contexts, keep every call in the indexed trail and share this process's heap, JIT and
 * event loop, so a row with a grant and its row without differ only by what a grant costs.
 *
 * Environment: `NATS_URL`, `MATRIX_TRUSTED_ISSUERS` (the issuer's public key), and what
 * `serveConfig` reads besides (the tools bucket, the audit share).
 */
import { serveConfig } from '../src/cli/config.js';
import { serve } from '../src/cli/serve.js';
import { Account, accountEnv } from './stack.js';

const url = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const issuers = process.env.MATRIX_TRUSTED_ISSUERS;
if (issuers === undefined) throw new Error('bench/gates.ts needs MATRIX_TRUSTED_ISSUERS');

/** `serve` as `matrix-tools serve` builds it from `env`, with no flags. */
const serveAs = (env: NodeJS.ProcessEnv) => serve(serveConfig({}, env));

const { MATRIX_TRUSTED_ISSUERS: _, ...untrusted } = process.env;
const handles = await Promise.all([
  serveAs({ ...process.env, ...accountEnv(url, Account.Trust) }),
  serveAs({ ...untrusted, ...accountEnv(url, Account.Gates) }),
]);
process.stderr.write('grant A/B ready (trusting the issuer in trust, callers in gates)\n');
process.on('SIGTERM', () => void Promise.all(handles.map((h) => h.stop('SIGTERM'))).then(() => process.exit(0)));
