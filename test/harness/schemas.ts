/** Input schemas built to cost Ajv most, for tests of what compiling them stalls. */
import type { MatrixToolProjection } from '../../src/registry/types.js';

/** An input schema of objects within objects, just under `chars` characters of JSON: what costs Ajv most per character. */
export function heavySchema(salt: string, chars: number): MatrixToolProjection['inputSchema'] {
  const properties: Record<string, unknown> = {};
  for (let i = 0; ; i++) {
    const field = {
      type: 'object',
      properties: { a: { type: 'string', maxLength: 40 }, b: { type: 'integer', minimum: 0 } },
      required: ['a'],
    };
    properties[`${salt}_${i}`] = field;
    if (JSON.stringify({ type: 'object', properties }).length > chars) {
      delete properties[`${salt}_${i}`];
      return { type: 'object', properties };
    }
  }
}

/** The `p` quantile of sorted values. */
export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? Number.NaN;
}
