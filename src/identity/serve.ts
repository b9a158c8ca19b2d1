/** The identity gate `serve` runs with, from `MATRIX_TRUSTED_ISSUERS` / `--trust`. */
import { IdentityGate, parseIssuers } from './gate.js';

/** The gate for these trusted issuers; exits 2 with one line when one is not a public nkey. */
export function identityGate(trust: string | undefined): IdentityGate {
  try {
    return IdentityGate.forIssuers(parseIssuers(trust));
  } catch (err) {
    process.stderr.write(`--trust / MATRIX_TRUSTED_ISSUERS: ${(err as Error).message}\n`);
    process.exit(2);
  }
}
