/**
 * deploy/nats.conf bounds the server's log: a client publishing what its permissions refuse, in a
 * loop, makes the server write one line per refusal (tens of MB a second), so the log file
 * rotates and only a few files are kept; the compose stack bounds the container's stdout too.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const MB = 1024 * 1024;

/** `NNMB` / `NNGB` / a plain number of bytes, as nats-server reads a size. */
function bytes(value: string): number {
  const m = /^(\d+)\s*(KB|MB|GB)?$/i.exec(value.trim());
  if (m === null) throw new Error(`not a size: ${value}`);
  const unit = { KB: 1024, MB, GB: 1024 * MB }[(m[2] ?? '').toUpperCase() as 'KB' | 'MB' | 'GB'] ?? 1;
  return Number(m[1]) * unit;
}

describe("the deployment's log bounds", () => {
  it('rotates the server log and keeps a bounded number of files, at most 512 MB in all', () => {
    const conf = read('deploy/nats.conf');
    const limit = /^logfile_size_limit:\s*(\S+)/m.exec(conf)?.[1];
    const files = /^logfile_max_num:\s*(\d+)/m.exec(conf)?.[1];
    expect(limit, 'logfile_size_limit').toBeDefined();
    expect(files, 'logfile_max_num').toBeDefined();
    expect(bytes(limit as string) * (Number(files) + 1)).toBeLessThanOrEqual(512 * MB);
  });

  it("bounds the NATS container's stdout log in docker-compose.yml", () => {
    const nats = read('docker-compose.yml').split(/\n {2}\w/)[1] ?? '';
    expect(nats).toMatch(/logging:\s*\n\s*driver: json-file\s*\n\s*options: \{ max-size: "\d+m", max-file: "\d+" \}/);
  });
});
