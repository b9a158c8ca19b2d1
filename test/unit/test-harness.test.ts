/** The test harness's own parts that decide what a run means: lanes, order, leftovers, the summary line, where the NATS tools are built. */
import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { TestModule, TestSpecification, Vitest } from 'vitest/node';
import { killLeftovers, tracked } from '../harness/children.js';
import { laneOfWorker, testLanes } from '../harness/lanes.js';
import { natsScriptOf } from '../harness/nats-tools.js';
import LongestFirst from '../harness/sequencer.js';
import SummaryReporter from '../harness/summary-reporter.js';

/** What the reporter reads of a test file: its tests' states, its own state, its errors. */
function module(tests: string[], state = 'passed', errors: unknown[] = []): TestModule {
  // `passed (fails)`: an `it.fails` test that failed, as it should.
  const allTests = tests.map((s) => ({
    result: () => ({ state: s.split(' ')[0] }),
    options: { fails: s.endsWith('(fails)') },
  }));
  return { children: { allTests: () => allTests }, state: () => state, errors: () => errors } as unknown as TestModule;
}

function summary(modules: TestModule[], unhandled: unknown[] = []): string {
  const write = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
  try {
    new SummaryReporter().onTestRunEnd(modules, unhandled as never);
    return String(write.mock.calls.at(-1)?.[0]).trim();
  } finally {
    write.mockRestore();
  }
}

describe('the summary line', () => {
  it('counts passed, failed and skipped tests', () => {
    expect(summary([module(['passed', 'failed', 'skipped']), module(['passed'])])).toBe(
      'Tests: 2 passed, 1 failed, 1 skipped',
    );
  });

  it('counts the tests expected to fail (it.fails) apart from those that pass', () => {
    expect(summary([module(['passed', 'passed (fails)', 'failed (fails)']), module(['skipped'])])).toBe(
      'Tests: 1 passed, 1 failed, 1 skipped, 1 expected to fail',
    );
  });

  it('counts a file that failed outside its tests (no test ran) as a failure', () => {
    const broken = module([], 'failed', [{ message: 'Cannot find module' }]);
    expect(summary([module(['passed']), broken])).toBe(
      'Tests: 1 passed, 1 failed, 0 skipped (1 file(s) failed outside their tests)',
    );
  });

  it('counts an error nobody handled as a failure', () => {
    expect(summary([module(['passed'])], [{ message: 'boom' }])).toBe(
      'Tests: 1 passed, 1 failed, 0 skipped (1 unhandled error(s))',
    );
  });
});

describe('lanes', () => {
  it('runs 2 lanes by default, 1 on a server the run did not start or a demanded container, TEST_LANES when set', () => {
    expect(testLanes({})).toBe(2);
    expect(testLanes({ NATS_URL: 'nats://x:4222' })).toBe(1);
    expect(testLanes({ MATRIX_TEST_NATS: 'container' })).toBe(1);
    expect(testLanes({ TEST_LANES: '3', MATRIX_TEST_NATS: 'container' })).toBe(3);
    expect(() => testLanes({ TEST_LANES: '0' })).toThrow(/TEST_LANES/);
    expect(() => testLanes({ TEST_LANES: '2', NATS_URL: 'nats://x:4222' })).toThrow(/NATS_URL/);
  });

  it('gives each of vitest’s concurrent workers (VITEST_POOL_ID 1…lanes) a lane of its own', () => {
    expect([1, 2].map((id) => laneOfWorker(2, String(id)))).toEqual([0, 1]);
    expect(laneOfWorker(1, '2')).toBe(0);
    expect(laneOfWorker(2, undefined)).toBe(0);
  });
});

describe('the file order', () => {
  const spec = (path: string, groupOrder: number) =>
    ({
      moduleId: `/repo/${path}`,
      project: { name: 'p', config: { sequence: { groupOrder } } },
    }) as unknown as TestSpecification;
  const ctx = (sequence: object) =>
    ({
      config: { root: '/repo', sequence },
      cache: { getFileTestResults: (key: string) => (key === 'p:b.test.ts' ? { duration: 5_000 } : undefined) },
    }) as unknown as Vitest;
  const files = [
    spec('u.test.ts', 0),
    spec('a.test.ts', 1),
    spec('test/system/fuzz.test.ts', 1),
    spec('b.test.ts', 1),
    spec('v.test.ts', 0),
  ];
  const names = (sorted: TestSpecification[]) => sorted.map((s) => s.moduleId.slice('/repo/'.length));

  it('runs tier by tier, the longest files of a tier first (known, else cached, else unknown last)', async () => {
    const sorted = names(await new LongestFirst(ctx({})).sort(files));
    expect(sorted.slice(0, 2).sort()).toEqual(['u.test.ts', 'v.test.ts']);
    expect(sorted.slice(2)).toEqual(['test/system/fuzz.test.ts', 'b.test.ts', 'a.test.ts']);
  });

  it('shuffles the files of each tier under --sequence.shuffle, the same way for the same seed', async () => {
    const orders = new Set<string>();
    for (let seed = 1; seed <= 20; seed++) {
      const once = names(await new LongestFirst(ctx({ shuffle: true, seed })).sort(files));
      expect(names(await new LongestFirst(ctx({ shuffle: true, seed })).sort(files))).toEqual(once);
      expect(once.slice(0, 2).sort()).toEqual(['u.test.ts', 'v.test.ts']);
      expect(once.slice(2).sort()).toEqual(['a.test.ts', 'b.test.ts', 'test/system/fuzz.test.ts']);
      orders.add(once.join());
    }
    expect(orders.size).toBeGreaterThan(3);
  });
});

describe('leftover processes', () => {
  afterEach(() => killLeftovers());

  it('kills what a file started and left running, and only that', async () => {
    const left = tracked(spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' }));
    const done = tracked(spawn(process.execPath, ['-e', ''], { stdio: 'ignore' }));
    await new Promise((resolve) => done.once('exit', resolve));
    expect(await killLeftovers()).toBe(1);
    expect(left.signalCode).toBe('SIGKILL');
    expect(await killLeftovers()).toBe(0);
  });
});

describe('the NATS tools', () => {
  it('finds scripts/nats.sh from the harness run as source and compiled into dist/ (the benches)', () => {
    expect(natsScriptOf('file:///repo/test/harness/nats-tools.ts')).toBe('/repo/scripts/nats.sh');
    expect(natsScriptOf('file:///repo/dist/test/harness/nats-tools.js')).toBe('/repo/scripts/nats.sh');
  });
});
