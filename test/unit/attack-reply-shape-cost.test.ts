/**
 * Attack (issue 41, "Results": a hostile target's reply should cost the service what its bytes
 * cost, as a request does: src/bus/codec.ts decodeMap judges a request's shape from its bytes
 * "before any work ... a body built to be expensive is refused at the cost of reaching its first
 * excess"). Replies get no such bound: readReply (src/bus/read-reply.ts:31) decodes any reply
 * whole with decodeReply (src/bus/codec.ts:121), and the dispatcher then shapes it
 * (src/dispatcher/shape.ts). A reply of max_payload built of one-byte MessagePack values (1 M
 * nested arrays, 1 M empty maps) decodes into a million JavaScript objects: measured 0.5 s (deep)
 * and 0.24 s (maps) of the event loop per reply, against 16 ms for a 1 MB string reply, on the one
 * loop that serves every agent's calls; a deep one is then refused only when JSON.stringify
 * overflows the stack. The reply budget lets a target 16 such replies in flight (more once its
 * replies are taken to be small), so one hostile mount stalls every caller for seconds at a time.
 * What should hold: a reply is judged by its shape (depth, values) from its bytes before it is
 * decoded, so what it costs to read is within a small multiple of an honest reply of its size.
 * Compared in the same run (no absolute times): the median of 5 reads of each.
 */
import { describe, expect, it } from 'vitest';
import { decodeReply, encodeBody } from '../../src/bus/codec.js';
import { shapeReply } from '../../src/dispatcher/shape.js';

const N = 1_000_000;

/** What the dispatcher does with a reply's body: decode it, then shape it (a throw is a result too). */
function read(body: Uint8Array): void {
  let value: unknown;
  try {
    value = decodeReply(body, undefined);
  } catch {
    return;
  }
  try {
    shapeReply(value, 'json', { cap: 64 * 1024, summaryBudget: 2_000 });
  } catch {
    // unshowable: still a result
  }
}

function medianMs(body: Uint8Array): number {
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const started = performance.now();
    read(body);
    times.push(performance.now() - started);
  }
  return times.sort((a, b) => a - b)[2] as number;
}

/** An array32 of `n` copies of the one-byte value `byte`. */
function arrayOf(byte: number, n: number): Uint8Array {
  const out = new Uint8Array(5 + n);
  out[0] = 0xdd;
  new DataView(out.buffer).setUint32(1, n);
  out.fill(byte, 5);
  return out;
}

describe('the cost of reading a hostile reply', () => {
  it('reads a reply of a million nested arrays or empty maps at a small multiple of a string reply of its size', () => {
    const honest = encodeBody({ pad: 'a'.repeat(N) });
    const deep = new Uint8Array(N).fill(0x91);
    deep[N - 1] = 0xc0;
    const maps = arrayOf(0x80, N);
    read(honest); // warm up
    const control = medianMs(honest);
    const deepMs = medianMs(deep);
    const mapsMs = medianMs(maps);
    console.log(
      `1 MB replies, median of 5: string ${control.toFixed(1)} ms, ${N} nested arrays ${deepMs.toFixed(1)} ms, ${N} empty maps ${mapsMs.toFixed(1)} ms`,
    );
    expect(deepMs).toBeLessThan(5 * Math.max(control, 2));
    expect(mapsMs).toBeLessThan(5 * Math.max(control, 2));
  }, 120_000);
});
