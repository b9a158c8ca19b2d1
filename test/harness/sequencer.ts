/**
 * The order test files start in: tier by tier (`sequence.groupOrder`), and inside a tier the
 * longest first, so that with several lanes the last file to finish is a short one. Durations
 * are the rough figures below (seconds on a 2-core machine), else vitest's cache of the last
 * run, else a guess. `vitest run --sequence.shuffle` (seed with `--sequence.seed`) shuffles the
 * files of each tier instead, to show that none depends on the order.
 */
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { prng } from './fuzz.js';

/**
 * Rough wall time of the slow files (s): a run of main on 2 loaded cores (`--reporter=json`),
 * rounded; the browser files are guesses (not run there: no Chromium). A file not here counts
 * as its time in vitest's cache of the last run, else 1 s.
 */
const SECONDS: Record<string, number> = {
  'test/system/cluster.test.ts': 23,
  'test/system/security.test.ts': 17,
  'test/system/fuzz.test.ts': 16,
  'test/system/browser/console.test.ts': 15,
  'test/system/registration-memory.test.ts': 15,
  'test/system/browser/console-writes.test.ts': 10,
  'test/system/prometheus.test.ts': 10,
  'test/system/identity-cli.test.ts': 9,
  'test/system/resilience.test.ts': 8,
  'test/system/audit-trail.test.ts': 7,
  'test/integration/check.test.ts': 7,
  'test/integration/mcp.test.ts': 6,
  'test/system/e2e.test.ts': 6,
  'test/integration/kv-watch.test.ts': 6,
  'test/unit/registration-checks.test.ts': 5,
  'test/integration/registration.test.ts': 5,
  'test/integration/dispatcher.test.ts': 5,
  'test/integration/cli-messages.test.ts': 4,
  'test/system/example.test.ts': 3,
  'test/integration/registration-restart.test.ts': 3,
  'test/system/identity-fuzz.test.ts': 2,
  'test/unit/audit-query.test.ts': 2,
  'test/unit/shape.test.ts': 2,
  'test/system/service.test.ts': 2,
  'test/system/identity.test.ts': 2,
  'test/integration/mcp-permissions.test.ts': 2,
};

const UNKNOWN_SECONDS = 1;

export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const { shuffle, seed } = this.ctx.config.sequence;
    const random = prng(seed ?? 0);
    const weight = new Map(files.map((spec) => [spec, shuffle ? random() : -this.seconds(spec)]));
    return [...files].sort(
      (a, b) =>
        a.project.config.sequence.groupOrder - b.project.config.sequence.groupOrder ||
        (weight.get(a) ?? 0) - (weight.get(b) ?? 0),
    );
  }

  private seconds(spec: TestSpecification): number {
    const path = relative(this.ctx.config.root, spec.moduleId);
    const known = SECONDS[path];
    if (known !== undefined) return known;
    const cached = this.ctx.cache.getFileTestResults(`${spec.project.name}:${path}`);
    return cached ? cached.duration / 1000 : UNKNOWN_SECONDS;
  }
}
