/**
 * deploy/nats.conf as a deployment grows it: its one mount user (`weather`, for `app.weather`)
 * copied for each further mount, as the comment above that block says to do.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The least-privilege configuration docker-compose.yml runs. */
export const deployConf = fileURLToPath(new URL('../../deploy/nats.conf', import.meta.url));

/** The largest message an agent user may publish under deploy/nats.conf, in bytes. */
export const AGENT_MAX_PAYLOAD = 262_144;

/**
 * A copy of deploy/nats.conf with the `weather` block copied for user `<name>` of mount
 * `app.<name>`, each name, the agents' payload limit `agentMaxPayload` (default as
 * deploy/nats.conf has it) and `more` configuration at its end; returns its path.
 */
export function confWithMountUsers(names: readonly string[], agentMaxPayload = AGENT_MAX_PAYLOAD, more = ''): string {
  const limit = `limits: { max_payload: ${AGENT_MAX_PAYLOAD} }`;
  const deployed = readFileSync(deployConf, 'utf8');
  if (!deployed.includes(limit)) throw new Error(`${deployConf} has no ${limit} to change`);
  const conf = deployed.replace(limit, `limits: { max_payload: ${agentMaxPayload} }`);
  const start = conf.indexOf('{\n        user: weather\n');
  if (start < 0) throw new Error(`${deployConf} has no block for user weather to copy`);
  let depth = 0;
  let end = start;
  do {
    if (conf[end] === '{') depth++;
    if (conf[end] === '}') depth--;
    end++;
  } while (depth > 0);
  const block = conf.slice(start, end);
  const copies = names.map((name) => `\n      ${block.replaceAll('weather', name)}`).join('');
  const file = join(mkdtempSync(join(tmpdir(), 'nats-conf-')), 'nats.conf');
  writeFileSync(file, `${conf.slice(0, end)}${copies}${conf.slice(end)}\n${more}\n`);
  return file;
}
