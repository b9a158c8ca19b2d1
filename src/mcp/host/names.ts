/**
 * Names of an MCP server's tools on the bus (PROTOCOL 12): the op that carries a tool (a
 * lossless encoding of its MCP name in the op alphabet `$` + `[A-Za-z][A-Za-z0-9_]*`), and the
 * name an LLM sees (`<prefix><tool>` within `^[a-zA-Z0-9_-]{1,64}$`, deterministically).
 */
import { createHash } from 'node:crypto';

/** Every tool op starts with this: no tool op is ever `$introspect`, `$accept` or `$cancel`. */
const TOOL_OP_PREFIX = '$t';
/** A tool op whose encoding is too long: `$h` + the name's digest, looked up by the host. */
const DIGEST_OP_PREFIX = '$h';
/** Longest op (contracts/common.json `opName`). */
const MAX_OP_LENGTH = 64;
/** Longest LLM-visible tool name. */
const MAX_TOOL_NAME_LENGTH = 64;
/** Hex characters of a digest suffix or a digest op. */
const DIGEST_CHARS = 8;

/**
 * The op of an MCP tool: `$t` then the name with letters and digits as they are, `_` as `__`,
 * and every other UTF-8 byte as `_` + two lowercase hex digits. Decodes back exactly
 * (`toolOfOp`). A name whose encoding would pass 64 characters gets `$h` + 32 hex digits of its
 * SHA-256 instead: still one op per name, but only the host that knows the name reads it back.
 */
export function opOfTool(tool: string): string {
  let encoded = TOOL_OP_PREFIX;
  for (const byte of Buffer.from(tool, 'utf8')) {
    const c = String.fromCharCode(byte);
    if (/[A-Za-z0-9]/.test(c)) encoded += c;
    else if (c === '_') encoded += '__';
    else encoded += `_${byte.toString(16).padStart(2, '0')}`;
  }
  if (encoded.length <= MAX_OP_LENGTH) return encoded;
  return DIGEST_OP_PREFIX + digestHex(tool).slice(0, 32);
}

/** The MCP name an `$t…` op encodes, or undefined for an op that is no such encoding. */
export function toolOfOp(op: string): string | undefined {
  if (!op.startsWith(TOOL_OP_PREFIX)) return undefined;
  const bytes: number[] = [];
  const s = op.slice(TOOL_OP_PREFIX.length);
  for (let i = 0; i < s.length; i++) {
    const c = s[i] as string;
    if (c !== '_') {
      if (!/[A-Za-z0-9]/.test(c)) return undefined;
      bytes.push(c.charCodeAt(0));
      continue;
    }
    if (s[i + 1] === '_') {
      bytes.push(0x5f);
      i++;
      continue;
    }
    const hex = s.slice(i + 1, i + 3);
    if (!/^[0-9a-f]{2}$/.test(hex)) return undefined;
    bytes.push(Number.parseInt(hex, 16));
    i += 2;
  }
  const text = Buffer.from(bytes).toString('utf8');
  // Bytes that are no UTF-8 decode with replacement characters: not an encoding of a name.
  return Buffer.from(text, 'utf8').equals(Buffer.from(bytes)) ? text : undefined;
}

/**
 * The LLM-visible name of an MCP tool: `prefix + tool` when that is within
 * `^[a-zA-Z0-9_-]{1,64}$`; otherwise every other character becomes `_`, and the name is cut to
 * leave room for `_` + 8 hex digits of the SHA-256 of `prefix + tool`, so two names that map
 * alike stay apart and the same name maps the same way every time.
 */
export function llmNameOf(prefix: string, tool: string): string {
  const whole = prefix + tool;
  if (/^[a-zA-Z0-9_-]{1,64}$/.test(whole)) return whole;
  const mapped = whole.replace(/[^a-zA-Z0-9_-]/g, '_');
  const suffix = `_${digestHex(whole).slice(0, DIGEST_CHARS)}`;
  return mapped.slice(0, MAX_TOOL_NAME_LENGTH - suffix.length) + suffix;
}

function digestHex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}
