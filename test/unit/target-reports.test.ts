/**
 * TargetReports (src/bus/reports.ts), the bucket of all of one target's requests together (issue
 * 41): its count grows with the requests in flight, which the target's callers choose, so many
 * calls to an honest target reporting steadily do not make it a flooder; its bytes do not grow,
 * and a reply's bytes past the size it was taken to be are taken from them.
 */
import { describe, expect, it } from 'vitest';
import { TargetReports } from '../../src/bus/reports.js';

const MiB = 2 ** 20;

describe('TargetReports', () => {
  it('grows the count with requests in flight, a quarter of one request each', () => {
    const reports = new TargetReports(
      { burst: 100, perSecond: 10 },
      { burst: 40, perSecond: 4, bytes: MiB, bytesPerSecond: MiB },
    );
    const now = Date.now();
    // One request in flight: the target's own 100 at once.
    reports.opened('app.a.$op');
    let stopped = 0;
    for (let i = 0; i < 101; i++) if (reports.count('app.a.$op', 10, now) !== undefined) stopped++;
    expect(stopped).toBe(1);
    // 20 in flight (20 × 10 = 200 at once) on a fresh target: 200 go, the 201st does not.
    for (let i = 0; i < 20; i++) reports.opened('app.b.$op');
    const outcomes = Array.from({ length: 201 }, () => reports.count('app.b.$op', 10, now));
    expect(outcomes.slice(0, 200).every((o) => o === undefined)).toBe(true);
    expect(outcomes[200]?.message).toMatch(/all its requests take together \(20 in flight/);
  });

  it("takes a reply's bytes past its estimate from the target's bytes, and stops past them", () => {
    const reports = new TargetReports({ burst: 5000, perSecond: 2000, bytes: 4 * MiB, bytesPerSecond: 1024 });
    const now = Date.now();
    for (let i = 0; i < 4; i++) expect(reports.countReply('app.c.$op', MiB, now)).toBeUndefined();
    const over = reports.countReply('app.c.$op', MiB, now);
    expect(over?.details?.target).toBe('app.c');
    expect(over?.message).toMatch(/replies larger than it had been answering/);
  });
});
