import { describe, expect, it } from 'vitest';
import type { Progress } from '../../src/bus/context.js';
import { throttled } from '../../src/dispatcher/system-dispatcher.js';

describe('the progress relay of a $call', () => {
  it('passes one report per interval, holds back the latest of the rest, and flushes it before the reply', () => {
    const sent: number[] = [];
    const relay = throttled((p: Progress) => sent.push(p.progress), 60_000);
    for (let i = 1; i <= 100; i++) relay({ progress: i, total: 100 });
    expect(sent).toEqual([1]);
    relay.flush();
    expect(sent).toEqual([1, 100]);
    relay.flush();
    expect(sent).toEqual([1, 100]);
  });
});
