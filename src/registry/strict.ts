/**
 * OpenAI strict mode for function parameters: every object closed (`additionalProperties:
 * false`) with every property required (optional ones made nullable), and keywords strict
 * mode does not support removed. What is removed is reported; a schema that cannot be made
 * strict without changing its meaning (a free-form object) is left as is and not marked strict.
 */

const unsupported = new Set([
  'minLength',
  'maxLength',
  'patternProperties',
  'unevaluatedProperties',
  'propertyNames',
  'minProperties',
  'maxProperties',
  'unevaluatedItems',
  'contains',
  'minContains',
  'maxContains',
  'uniqueItems',
  'default',
  'examples',
  '$schema',
  'allOf',
  'oneOf',
  'not',
  'if',
  'then',
  'else',
  'dependentRequired',
  'dependentSchemas',
]);

/** The outcome of making one schema strict: the strict form keeps the schema's own top-level shape (its `type`). */
export type StrictResult<S extends Record<string, unknown> = Record<string, unknown>> =
  | { strict: true; schema: S; removed: string[] }
  | { strict: false; reason: string };

/** Makes a tool's parameters schema strict, or says why it cannot be. */
export function toStrictSchema<S extends Record<string, unknown>>(schema: S): StrictResult<S> {
  const removed: string[] = [];
  try {
    return { strict: true, schema: strictNode(schema, '', removed) as S, removed };
  } catch (err) {
    return { strict: false, reason: (err as Error).message };
  }
}

function strictNode(node: unknown, path: string, removed: string[]): unknown {
  if (node === null || typeof node !== 'object' || Array.isArray(node)) return node;
  const src = node as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(src)) {
    if (unsupported.has(k)) {
      removed.push(`${path}/${k}`);
      continue;
    }
    out[k] = v;
  }
  if (Array.isArray(out.anyOf)) out.anyOf = out.anyOf.map((s, i) => strictNode(s, `${path}/anyOf/${i}`, removed));
  if (out.items !== undefined) out.items = strictNode(out.items, `${path}/items`, removed);
  for (const defs of ['$defs', 'definitions'] as const) {
    if (out[defs] && typeof out[defs] === 'object') {
      out[defs] = Object.fromEntries(
        Object.entries(out[defs] as object).map(([k, s]) => [k, strictNode(s, `${path}/${defs}/${k}`, removed)]),
      );
    }
  }
  const isObject = out.type === 'object' || (Array.isArray(out.type) && out.type.includes('object'));
  if (!isObject) return out;
  const properties = (out.properties ?? {}) as Record<string, unknown>;
  if (Object.keys(properties).length === 0 && out.additionalProperties !== false) {
    throw new Error(`${path || '(root)'} is a free-form object, which strict mode cannot express`);
  }
  const required = new Set((out.required as string[] | undefined) ?? []);
  out.properties = Object.fromEntries(
    Object.entries(properties).map(([k, s]) => {
      const strict = strictNode(s, `${path}/properties/${k}`, removed);
      return [k, required.has(k) ? strict : nullable(strict)];
    }),
  );
  out.required = Object.keys(properties);
  out.additionalProperties = false;
  return out;
}

/** An optional property becomes a required one that may be null. */
function nullable(schema: unknown): unknown {
  if (schema === null || typeof schema !== 'object') return schema;
  const s = schema as Record<string, unknown>;
  if (typeof s.type === 'string')
    return { ...s, type: [s.type, 'null'], ...(Array.isArray(s.enum) ? { enum: [...s.enum, null] } : {}) };
  if (Array.isArray(s.type)) return s.type.includes('null') ? s : { ...s, type: [...s.type, 'null'] };
  return { anyOf: [s, { type: 'null' }] };
}
