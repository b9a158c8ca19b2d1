/**
 * `system.packages`: checks ToolContextSpecs exactly as `$register` would, listing every
 * violation. Target of the built-in `package_validate`.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { SchemaId } from '../bus/contracts.js';
import type { Violation } from '../bus/errors.js';
import { Mount } from '../bus/mount.js';
import { Mounts } from '../bus/subjects.js';
import type { ToolContextSpec } from '../registry/types.js';
import { forbiddenParts, specViolations } from '../registry/validate.js';

/** The verdict on one spec. */
export interface SpecVerdict {
  index: number;
  key?: string;
  valid: boolean;
  violations: Violation[];
}

/** Checks specs as `$register` would, with its one bounded compiler, plus keys repeated among them. */
export function validateSpecs(specs: readonly unknown[]): { valid: boolean; results: SpecVerdict[] } {
  const seen = new Map<string, number>();
  const results = specs.map((spec, index): SpecVerdict => {
    const violations = specViolations(spec, '');
    const key = typeof (spec as { key?: unknown })?.key === 'string' ? (spec as { key: string }).key : undefined;
    if (violations.length === 0) violations.push(...forbiddenParts(spec as ToolContextSpec));
    if (key !== undefined) {
      const first = seen.get(key);
      if (first !== undefined)
        violations.push({ path: '/key', message: `repeats the key of spec ${first}`, keyword: 'uniqueKey' });
      else seen.set(key, index);
    }
    const verdict: SpecVerdict = { index, valid: violations.length === 0, violations };
    if (key !== undefined) verdict.key = key;
    return verdict;
  });
  return { valid: results.every((r) => r.valid), results };
}

/** Largest `$validate` request, in bytes: a few specs, not a registry's worth. */
export const PACKAGES_MAX_REQUEST_BYTES = 128 * 1024;

/** Builds the `system.packages` mount. */
export function packagesMount(nc: NatsConnection): Mount {
  return new Mount(nc, {
    name: Mounts.Packages,
    version: '0.1.0',
    description: 'Validates tool context specs against the contracts.',
    // What an agent may ask to be compiled at once (each tool's schema has its own bound too).
    maxRequestBytes: PACKAGES_MAX_REQUEST_BYTES,
    ops: {
      $validate: {
        description: 'Checks one spec or several as $register would, listing every violation.',
        request: SchemaId.PackageValidateRequest,
        response: SchemaId.PackageValidateReply,
        handle: (request: { spec?: unknown; specs?: unknown[] }) =>
          validateSpecs([...(request.spec === undefined ? [] : [request.spec]), ...(request.specs ?? [])]),
      },
    },
  });
}
