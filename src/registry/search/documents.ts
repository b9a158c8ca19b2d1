/**
 * What the search reads of a tool: its name split into words (`_`, `-`, camel case), its
 * description, and its arguments' names and descriptions. Terms are lower-cased, stripped of a
 * few English inflections and stop words, so "reads files" finds `read_file`.
 */
import type { MatrixToolProjection } from '../types.js';

/** One tool as the index holds it. */
export interface ToolDocument {
  /** The tool's name: unique within a session. */
  id: string;
  /** The name's words, space-separated. */
  name: string;
  description: string;
  /** Every argument's name (in words) and description, nested ones included. */
  args: string;
}

/** The fields indexed, in the order of their weight. */
export const DOCUMENT_FIELDS = ['name', 'description', 'args'] as const;

/** Deepest schema level whose properties are read. */
const MAX_SCHEMA_DEPTH = 3;
/** Most characters of argument text per tool: a schema of thousands of properties stays cheap to index. */
const MAX_ARGS_CHARS = 1_000;

/** The document of one tool. */
export function toolDocument(tool: MatrixToolProjection): ToolDocument {
  return {
    id: tool.name,
    name: nameWords(tool.name),
    description: tool.description,
    args: argumentText(tool.inputSchema, 0).slice(0, MAX_ARGS_CHARS),
  };
}

/** `getFileInfo`, `read_text-file` → `get file info`, `read text file`. */
export function nameWords(name: string): string {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .replace(/[_\-.]+/g, ' ')
    .trim();
}

/** The names (in words) and descriptions of a schema's properties, depth first. */
function argumentText(schema: unknown, depth: number): string {
  if (depth > MAX_SCHEMA_DEPTH || schema === null || typeof schema !== 'object') return '';
  const { properties, items } = schema as { properties?: unknown; items?: unknown };
  let text = '';
  if (properties !== null && typeof properties === 'object') {
    for (const [key, value] of Object.entries(properties as Record<string, unknown>)) {
      const description = (value as { description?: unknown } | null)?.description;
      text += ` ${nameWords(key)}`;
      if (typeof description === 'string') text += ` ${description}`;
      text += argumentText(value, depth + 1);
    }
  }
  if (items !== undefined) text += argumentText(items, depth + 1);
  return text;
}

/** Words too common in tool text to tell tools apart. */
const STOP_WORDS: ReadonlySet<string> = new Set(
  'a an and are as at be by can do does for from has have how i if in into is it its me my of on or so that the their them then there these this to use used uses using via was what when which will with you your'.split(
    ' ',
  ),
);

/** Splits text into words: on anything not a letter or digit, and at camel-case boundaries. */
export function tokenize(text: string): string[] {
  return nameWords(text).split(/[^\p{L}\p{N}]+/u);
}

/**
 * One word as a term: lower case, a plural or a verb ending taken off (`files` → `file`,
 * `creating` → `creat`, `created` → `creat`); null for a stop word or an empty one.
 */
export function processTerm(word: string): string | null {
  const term = word.toLowerCase();
  if (term.length === 0 || STOP_WORDS.has(term)) return null;
  return stem(term);
}

/** A light suffix stripper (not Porter's): enough to join a word's common forms. */
function stem(term: string): string {
  if (term.length <= 3) return term;
  if (term.endsWith('ies') && term.length > 4) return `${term.slice(0, -3)}y`;
  if (term.endsWith('ing') && term.length > 5) return dropFinalE(term.slice(0, -3));
  if (term.endsWith('ed') && term.length > 4) return dropFinalE(term.slice(0, -2));
  if (term.endsWith('es') && /(ss|sh|ch|x)es$/.test(term)) return term.slice(0, -2);
  if (term.endsWith('s') && !term.endsWith('ss') && !term.endsWith('us') && !term.endsWith('is'))
    return dropFinalE(term.slice(0, -1));
  return dropFinalE(term);
}

/** `create` and `creat(ing)` meet at `creat`. */
function dropFinalE(term: string): string {
  return term.length > 3 && term.endsWith('e') ? term.slice(0, -1) : term;
}
