/** The identity gate `serve` runs with, from `MATRIX_TRUSTED_ISSUERS` / `--trust`. */
import { IdentityGate, parseIssuers } from './gate.js';

/**
 * The gate for these trusted issuers; exits 2 with one line when one is not a public nkey, or
 * when the setting is given but names none (a typo must not turn trust off).
 */
export function identityGate(trust: string | undefined): IdentityGate {
  const issuers = parseIssuers(trust);
  try {
    if (trust !== undefined && trust.trim() !== '' && issuers.length === 0) throw new Error(`'${trust}' names no issuer`);
    return IdentityGate.forIssuers(issuers);
  } catch (err) {
    process.stderr.write(`--trust / MATRIX_TRUSTED_ISSUERS: ${(err as Error).message}\n`);
    process.exit(2);
  }
}
