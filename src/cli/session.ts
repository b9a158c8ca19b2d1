/** The session flags of `resolve`, `call` and `mcp`, and the `$resolve` request they describe. */
import type { Command } from 'commander';
import type { ResolveRequest } from '../registry/types.js';
import { jsonFlag, UsageError } from './output.js';

/** Flags that pick a session (the `$resolve` request behind `resolve`, `call` and `mcp`). */
export interface SessionFlags {
  profile: string;
  worker?: string;
  refs?: string;
  skill?: string[];
  requires?: string;
  environment?: string;
  format?: string;
  onlyAvailable?: boolean;
  strict?: boolean;
}

/** Adds the session flags to a command. */
export function withSession(cmd: Command): Command {
  return cmd
    .requiredOption('-p, --profile <name>', 'agent profile (default, explain, monitor, edit, propose, evaluate, …)')
    .option('-w, --worker <name>', 'worker, e.g. claude-code or codex')
    .option('--refs <keys>', 'tool context refs, comma-separated (skips the built-in rules)')
    .option('--skill <name=refs>', 'a skill and its refs, e.g. review=repo-coding (repeatable)', (v: string, prev: string[] = []) => [...prev, v])
    .option('--requires <capabilities>', 'required capabilities, comma-separated')
    .option('--environment <json>', 'the worker environment, e.g. {"repoRoot":"/src"}')
    .option('--only-available', 'leave out tools whose target has no live instance');
}

const csv = (text: string | undefined) =>
  text === undefined
    ? undefined
    : text
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);

/** The `$resolve` request the flags describe. */
export function sessionRequest(flags: SessionFlags): ResolveRequest {
  const request: ResolveRequest = { profile: flags.profile };
  if (flags.worker) request.worker = flags.worker;
  const refs = csv(flags.refs);
  if (refs) request.toolContextRefs = refs;
  if (flags.skill?.length) request.skills = flags.skill.map(skillOf);
  const requires = csv(flags.requires);
  if (requires) request.requires = requires;
  if (flags.environment) request.environment = jsonFlag('--environment', flags.environment) as ResolveRequest['environment'];
  if (flags.format) request.format = flags.format as ResolveRequest['format'];
  if (flags.onlyAvailable) request.onlyAvailable = true;
  if (flags.strict) request.strict = true;
  return request;
}

/** One `--skill name=ref1,ref2`. */
function skillOf(text: string): NonNullable<ResolveRequest['skills']>[number] {
  const [name, list] = text.split('=', 2);
  if (!name) throw new UsageError(`--skill takes name=ref1,ref2, got '${text}'`);
  const refs = csv(list);
  return refs ? { name, toolContextRefs: refs } : { name };
}
