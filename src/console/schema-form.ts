/**
 * A form from a tool's input schema, and the arguments back from the form. The console does
 * not validate: what the operator typed goes to the dispatcher as faithfully as a model's
 * call would (a number field holding `abc` is sent as the text `abc`), so the error shown is
 * the dispatcher's own, the one a model would read.
 */
import type { JsonSchemaObject } from '../registry/types.js';
import { html, type SafeHtml } from './html.js';

/** Field-name prefix of the arguments. */
const ARG = 'arg.';
/** Field of all the arguments as JSON text (overrides the fields). */
export const ARGS_JSON = 'argsJson';

type FieldKind = 'enum' | 'string' | 'number' | 'boolean' | 'json';

interface PropertySchema {
  type?: string | string[];
  enum?: unknown[];
  description?: string;
  default?: unknown;
}

function kindOf(p: PropertySchema): FieldKind {
  if (Array.isArray(p.enum) && p.enum.length > 0 && p.enum.every((v) => v === null || typeof v !== 'object'))
    return 'enum';
  const type = Array.isArray(p.type) ? p.type.find((t) => t !== 'null') : p.type;
  if (type === 'string') return 'string';
  if (type === 'integer' || type === 'number') return 'number';
  if (type === 'boolean') return 'boolean';
  return 'json';
}

function propertiesOf(schema: JsonSchemaObject): Array<[string, PropertySchema]> {
  const props = (schema as { properties?: Record<string, PropertySchema> }).properties;
  return props !== null && typeof props === 'object'
    ? Object.entries(props).filter(([, p]) => p !== null && typeof p === 'object')
    : [];
}

/** The fields of a schema's top-level properties, filled from `values`, then the JSON override. */
export function argumentFields(schema: JsonSchemaObject, values: URLSearchParams): SafeHtml {
  const listed = (schema as { required?: unknown }).required;
  const required = new Set(Array.isArray(listed) ? listed.filter((r): r is string => typeof r === 'string') : []);
  const fields = propertiesOf(schema).map(([name, p]) =>
    field(name, p, required.has(name), values.get(ARG + name) ?? ''),
  );
  const none = fields.length === 0;
  return html`${fields}
    <label>${none ? 'arguments' : 'or all arguments'} <span class="hint">${none ? 'a JSON object' : 'as a JSON object (overrides the fields above)'}</span>
    <textarea name="${ARGS_JSON}" rows="${none ? 6 : 3}">${values.get(ARGS_JSON) ?? ''}</textarea></label>`;
}

function field(name: string, p: PropertySchema, required: boolean, value: string): SafeHtml {
  const label = html`<span class="mono">${name}</span>${required ? html` <span class="badge warn">required</span>` : ''} <span class="hint">${typeLabel(p)}${p.description ? ` — ${p.description}` : ''}</span>`;
  const fieldName = ARG + name;
  switch (kindOf(p)) {
    case 'enum':
      return html`<label>${label}<select name="${fieldName}"><option value="">(absent)</option>${(p.enum ?? []).map(
        (v) => {
          const encoded = JSON.stringify(v);
          return html`<option value="${encoded}" ${encoded === value ? html`selected` : ''}>${String(v)}</option>`;
        },
      )}</select></label>`;
    case 'boolean':
      return html`<label>${label}<select name="${fieldName}">${['', 'true', 'false'].map((v) => html`<option value="${v}" ${v === value ? html`selected` : ''}>${v || '(absent)'}</option>`)}</select></label>`;
    case 'json':
      return html`<label>${label}<textarea name="${fieldName}" rows="3">${value}</textarea></label>`;
    default:
      return html`<label>${label}<input name="${fieldName}" value="${value}" autocomplete="off" ${kindOf(p) === 'number' ? html`inputmode="decimal"` : ''}></label>`;
  }
}

function typeLabel(p: PropertySchema): string {
  if (kindOf(p) === 'enum') return 'one of the listed';
  const type = Array.isArray(p.type) ? p.type.join(' | ') : p.type;
  return type ?? 'JSON';
}

const NUMBER = /^-?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;

/**
 * The arguments the form describes: the JSON override as its text when given (the dispatcher
 * parses it, as it parses a model's), else each non-empty field converted by its schema type.
 */
export function argumentsFrom(schema: JsonSchemaObject, values: URLSearchParams): Record<string, unknown> | string {
  const text = values.get(ARGS_JSON)?.trim();
  if (text) return text;
  const args: Record<string, unknown> = {};
  for (const [name, p] of propertiesOf(schema)) {
    const raw = values.get(ARG + name);
    if (raw === null || raw.trim() === '') continue;
    args[name] = convert(kindOf(p), raw);
  }
  return args;
}

function convert(kind: FieldKind, raw: string): unknown {
  switch (kind) {
    case 'string':
      return raw;
    case 'number':
      return NUMBER.test(raw.trim()) ? Number(raw) : raw;
    case 'boolean':
      return raw === 'true' ? true : raw === 'false' ? false : raw;
    default:
      try {
        return JSON.parse(raw);
      } catch {
        return raw; // not JSON: sent as the text it is, so the schema says what it should be
      }
  }
}
