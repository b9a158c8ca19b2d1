/**
 * Which shard of the trace-id index lists a trace id: a keyed hash, so a caller who picks trace
 * ids cannot aim a flood of them at the shard of somebody else's trace.
 */
import { randomBytes } from 'node:crypto';
import { TRACE_ID } from '../bus/headers.js';

/** Shards of the index: a lookup reads one, a flush writes at most one message to each. */
const SHARD_BITS = 8;
export const SHARDS = 2 ** SHARD_BITS;

/** Is this a trace id as W3C writes them (32 lowercase hex digits)? */
export function isTraceId(id: string): boolean {
  return TRACE_ID.test(id);
}

/**
 * Which shard lists a trace id: the trace id's four 32-bit words, each multiplied by a random
 * odd word of the trail's key and folded in through murmur3's finaliser (an avalanche: every
 * input bit moves every output bit). Plain multiply-shift kept the structure of ids that differ
 * only in their last digits: under some keys 2,000 of them met half the shards. Without the key,
 * where a chosen trace id lands is a guess; with it (every instance reads it from the index
 * stream's description), the same everywhere. Not a cryptographic hash: a tenth of SHA-256's cost.
 */
export class Shards {
  private readonly multipliers: number[];

  /** `key`: 32 lowercase hex digits, or '' for none (an index stream whose description names no key). */
  private constructor(readonly key: string) {
    const words = key === '' ? '0'.repeat(32) : key;
    this.multipliers = [0, 8, 16, 24].map((at) => Number.parseInt(words.slice(at, at + 8), 16) | 1);
  }

  /** A new random key. */
  static create(): Shards {
    return new Shards(randomBytes(16).toString('hex'));
  }

  /** The key an index stream's description names (`shard key <32 hex>`); none: a fixed one. */
  static fromDescription(description: string | undefined): Shards {
    return new Shards(/shard key ([0-9a-f]{32})/.exec(description ?? '')?.[1] ?? '');
  }

  /** The description an index stream is created with. */
  describe(stream: string): string {
    return `Trace-id index of the audit trail ${stream} (shard key ${this.key})`;
  }

  /** The shard of a trace id (32 lowercase hex digits: callers check `isTraceId` first). */
  of(traceId: string): number {
    return this.ofAt(Buffer.from(traceId, 'latin1'), 0);
  }

  /** The shard of the trace id whose 32 lowercase hex digits are at `at` of `bytes`. */
  ofAt(bytes: Uint8Array, at: number): number {
    return this.hashAt(bytes, at) >>> (32 - SHARD_BITS);
  }

  /**
   * The whole 32-bit keyed hash of the trace id at `at` of `bytes`, whose top bits are its shard:
   * what the indexer also keys its pending entries by (with a key of its own), so that no caller
   * who picks trace ids can make them meet in one chain.
   */
  hashAt(bytes: Uint8Array, at: number): number {
    const [a, b, c, d] = this.multipliers as [number, number, number, number];
    let h = fmix32(Math.imul(a, hexWord(bytes, at)));
    h = fmix32(h ^ Math.imul(b, hexWord(bytes, at + 8)));
    h = fmix32(h ^ Math.imul(c, hexWord(bytes, at + 16)));
    h = fmix32(h ^ Math.imul(d, hexWord(bytes, at + 24)));
    return h;
  }
}

/**
 * The 32-bit word of the 8 lowercase hex digits at `at`, read from their bytes (no slice to
 * parse: the indexer shards every trace of every call); its low 32 bits as `imul` takes them.
 */
function hexWord(bytes: Uint8Array, at: number): number {
  let word = 0;
  for (let i = at; i < at + 8; i++) {
    const c = bytes[i] as number;
    word = (word << 4) | (c <= 0x39 ? c - 0x30 : c - 0x57);
  }
  return word;
}

/** murmur3's 32-bit finaliser: a bijection in which every input bit flips each output bit about half the time. */
function fmix32(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}
