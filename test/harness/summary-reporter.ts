/**
 * Ends a run with the plain line CI reads: `Tests: N passed, N failed, N skipped`, and
 * `, N expected to fail` when the run has such tests (`it.fails`: vitest says it passed when it
 * failed as it should, which is not a feature that works). A file that failed outside its tests
 * (an import, a hook, a process it left) counts as one failure, and so does an error nobody
 * handled, so the line never says 0 failed on a red run.
 */
import type { Reporter, SerializedError, TestModule } from 'vitest/node';

export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<SerializedError> = []): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    let expectedToFail = 0;
    let failedFiles = 0;
    for (const module of modules) {
      let failedHere = 0;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed' && test.options.fails === true) expectedToFail++;
        else if (state === 'passed') passed++;
        else if (state === 'failed') failedHere++;
        else skipped++;
      }
      failed += failedHere;
      if (failedHere === 0 && (module.state() === 'failed' || module.errors().length > 0)) failedFiles++;
    }
    const outside = [
      ...(failedFiles > 0 ? [`${failedFiles} file(s) failed outside their tests`] : []),
      ...(unhandledErrors.length > 0 ? [`${unhandledErrors.length} unhandled error(s)`] : []),
    ];
    const total = failed + failedFiles + unhandledErrors.length;
    const expected = expectedToFail > 0 ? `, ${expectedToFail} expected to fail` : '';
    process.stdout.write(
      `\nTests: ${passed} passed, ${total} failed, ${skipped} skipped${expected}${outside.length > 0 ? ` (${outside.join(', ')})` : ''}\n`,
    );
  }
}
