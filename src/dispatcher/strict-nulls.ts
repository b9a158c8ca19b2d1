/**
 * OpenAI strict mode round-trips (see `registry/strict.ts`): strict rendering makes every
 * optional property required and nullable, so a strict model sends `{"mount": null}` where it
 * means "no mount". Such a null counts as absent before validation, and only such a null: the
 * property is optional in the tool's own schema, and its own schema does not accept null. A null
 * on a required property, or on one whose schema allows null, is left for validation to judge.
 */

/** `value` without the nulls strict rendering put where `schema` has optional properties; the same object when there are none. */
export function withoutStrictNulls(schema: unknown, value: unknown): unknown {
  if (value === null || typeof value !== 'object' || !isObjectSchema(schema)) return value;
  if (Array.isArray(value)) return itemsWithoutNulls(schema.items, value);
  const properties = schema.properties;
  if (properties === null || typeof properties !== 'object') return value;
  const required: unknown[] = Array.isArray(schema.required) ? schema.required : [];
  let out: Record<string, unknown> | undefined;
  for (const key of Object.keys(value)) {
    if (!Object.hasOwn(properties, key)) continue;
    const property = (properties as Record<string, unknown>)[key];
    const child = (value as Record<string, unknown>)[key];
    if (child === null) {
      if (required.includes(key) || acceptsNull(property)) continue;
      out ??= { ...value };
      delete out[key];
      continue;
    }
    const cleaned = withoutStrictNulls(property, child);
    if (cleaned !== child) {
      out ??= { ...value };
      out[key] = cleaned;
    }
  }
  return out ?? value;
}

/** Strict rendering follows `items` too: an array of objects may hold such nulls in each. */
function itemsWithoutNulls(items: unknown, value: unknown[]): unknown[] {
  if (!isObjectSchema(items)) return value;
  let out: unknown[] | undefined;
  value.forEach((item, i) => {
    const cleaned = withoutStrictNulls(items, item);
    if (cleaned !== item) (out ??= [...value])[i] = cleaned;
  });
  return out ?? value;
}

type SchemaNode = Record<string, unknown>;

/** A schema node that strict rendering descends into (an object, or an array of them). */
function isObjectSchema(schema: unknown): schema is SchemaNode {
  if (schema === null || typeof schema !== 'object') return false;
  const type = (schema as SchemaNode).type;
  return (
    type === 'object' ||
    type === 'array' ||
    (Array.isArray(type) && (type.includes('object') || type.includes('array')))
  );
}

/**
 * Whether a property's own schema takes null: by `const`, `enum` or `type`, or a branch of
 * `anyOf`/`oneOf` that does; a schema that constrains none of these takes anything. A `$ref`
 * is not followed: strict rendering made it nullable, so its null is one a strict model sent.
 */
export function acceptsNull(schema: unknown): boolean {
  if (typeof schema === 'boolean') return schema;
  if (schema === null || typeof schema !== 'object') return false;
  const s = schema as SchemaNode;
  if ('const' in s) return s.const === null;
  if (Array.isArray(s.enum)) return s.enum.includes(null);
  if (typeof s.type === 'string') return s.type === 'null';
  if (Array.isArray(s.type)) return s.type.includes('null');
  for (const branches of [s.anyOf, s.oneOf]) if (Array.isArray(branches)) return branches.some(acceptsNull);
  return s.$ref === undefined;
}
