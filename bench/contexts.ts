/** The registered contexts the benchmarks fill a registry with. */
import type { ToolContextSpec } from '../src/registry/types.js';

/** A context of `tools` tools on `app.<key>`, each with a small two-argument schema. */
export function contextWithTools(key: string, tools: number, description: string): ToolContextSpec {
  return {
    key,
    title: `Context ${key}`,
    description,
    matrixTools: Array.from({ length: tools }, (_, i) => ({
      name: `${key.replaceAll('-', '_')}_t${i}`,
      description: `tool ${i} of ${key}`,
      inputSchema: { type: 'object', properties: { a: { type: 'string' }, n: { type: 'integer', minimum: 0 } } },
      target: `app.${key}`,
      op: `$op${i}`,
    })),
    permissions: { approval: 'never' },
  };
}
