/** The parameters an adapter offers a framework: the strict-mode form where the schema allows and strict is wanted. */
import { toStrictSchema } from '../registry/strict.js';
import type { JsonSchemaObject } from '../registry/types.js';

/** A tool's parameters and whether they are strict. */
export interface OfferedParameters {
  schema: JsonSchemaObject;
  strict: boolean;
}

/** `schema` made strict when `strict` is asked and it can be without changing its meaning, else as it is. */
export function strictParameters(schema: JsonSchemaObject, strict: boolean): OfferedParameters {
  if (!strict) return { schema, strict: false };
  const made = toStrictSchema(schema);
  return made.strict ? { schema: made.schema, strict: true } : { schema, strict: false };
}
