/**
 * Choosing the contexts to merge (PROTOCOL 5.2): the profile's refs (or the built-in rule), each
 * skill's refs, then a provider for each required capability nobody selected provides — each
 * context once, in that order; contexts the environment cannot serve are left out.
 */
import { NotFoundError } from '../bus/errors.js';
import { builtinContexts, builtinRefsFor } from './builtins.js';
import { addNew } from './merge.js';
import type { StoredContext, ToolContextStore } from './store.js';
import type { Diagnostic, Environment, EnvironmentRequirements, ResolveRequest } from './types.js';

/** The contexts to merge, in order; throws `NotFoundError` for unknown refs or unmet capabilities. */
export function selectContexts(
  request: ResolveRequest,
  store: ToolContextStore,
  diagnostics: Diagnostic[],
): StoredContext[] {
  const refs = requestedRefs(request, diagnostics);
  const unknown = [...new Set(refs.filter((key) => store.get(key) === undefined))];
  if (unknown.length > 0) {
    throw new NotFoundError(`unknown tool context${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')}`, {
      details: { unknown },
    });
  }
  const selection = new Selection(store, request.environment, diagnostics);
  for (const key of refs) selection.admit(key);
  addProviders(request, store, selection, diagnostics);
  return selection.selected;
}

/** The refs a request names: its own (or the built-in rule for its profile), then each skill's. */
function requestedRefs(request: ResolveRequest, diagnostics: Diagnostic[]): string[] {
  const refs: string[] = [];
  if (request.toolContextRefs !== undefined) {
    refs.push(...request.toolContextRefs);
  } else {
    const rule = builtinRefsFor(request.profile, request.worker);
    if (rule.length === 0) {
      diagnostics.push({
        level: 'warning',
        code: 'no_builtin_rule',
        message: `no built-in rule gives tools to profile '${request.profile}'${request.worker ? ` with worker '${request.worker}'` : ''}; pass toolContextRefs to choose contexts`,
      });
    }
    refs.push(...rule);
  }
  for (const skill of request.skills ?? []) refs.push(...(skill.toolContextRefs ?? []));
  return refs;
}

/** The contexts chosen so far: each once, and only those the environment can serve. */
class Selection {
  readonly selected: StoredContext[] = [];
  private readonly seen = new Set<string>();
  private readonly excluded = new Set<string>();

  constructor(
    private readonly store: ToolContextStore,
    private readonly environment: Environment | undefined,
    private readonly diagnostics: Diagnostic[],
  ) {}

  /** Selects `key` (a known context) unless the environment cannot serve it; whether it is selected. */
  admit(key: string): boolean {
    if (this.seen.has(key)) return true;
    if (this.excluded.has(key)) return false;
    const stored = this.store.get(key) as StoredContext;
    const unmet = unmetRequirements(stored.spec.environmentRequirements, this.environment);
    if (unmet.length > 0) {
      this.excluded.add(key);
      this.diagnostics.push({
        level: 'warning',
        code: 'environment_unmet',
        message: `context '${key}' left out: the environment lacks ${unmet.join(', ')}`,
        context: key,
      });
      return false;
    }
    this.seen.add(key);
    this.selected.push(stored);
    return true;
  }
}

/**
 * Capabilities: the request's, its skills', and those of every context selected so far (a
 * provider's own `requires` pull in further providers, until nothing is missing). What the
 * request names is the most it reaches: a built-in context comes in for the request's own
 * capabilities only, never for one that a registered context requires (a context registered
 * later cannot widen a grant that names it to `matrix_invoke` or the worker's shell).
 */
function addProviders(
  request: ResolveRequest,
  store: ToolContextStore,
  selection: Selection,
  diagnostics: Diagnostic[],
): void {
  const wanted: string[] = [];
  addNew(wanted, request.requires);
  for (const skill of request.skills ?? []) addNew(wanted, skill.requires);
  const requested = wanted.length;
  const unmet: string[] = [];
  const refused: string[] = [];
  for (let i = 0; ; i++) {
    for (const c of selection.selected) addNew(wanted, c.spec.requires);
    const capability = wanted[i];
    if (capability === undefined) break;
    if (selection.selected.some((c) => c.spec.provides?.includes(capability))) continue;
    const builtins = i < requested;
    const provider = pickProvider(store, capability, (key) => selection.admit(key), builtins);
    if (provider !== undefined) {
      diagnostics.push({
        level: 'info',
        code: 'capability_provided',
        message: `context '${provider}' added: it provides '${capability}'`,
        context: provider,
      });
    } else if (!builtins && pickProvider(store, capability, () => true, true) !== undefined) {
      refused.push(capability);
    } else {
      unmet.push(capability);
    }
  }
  if (unmet.length > 0 || refused.length > 0) {
    const names = (list: string[]) => list.map((c) => `'${c}'`).join(', ');
    const parts = [];
    if (unmet.length > 0) parts.push(`no tool context provides ${names(unmet)}`);
    if (refused.length > 0)
      parts.push(
        `only a built-in context provides ${names(refused)}, which a registered context's requires cannot pull in: name it in the request`,
      );
    throw new NotFoundError(parts.join('; '), {
      details: { unmetCapabilities: [...unmet, ...refused] },
    });
  }
}

/**
 * The provider of a capability: a built-in before a registered context (when `builtins`), then
 * the lowest key; providers the environment cannot serve are skipped. It stops at the first
 * admissible one: with thousands of providers, a resolve reads as few as it must.
 */
function pickProvider(
  store: ToolContextStore,
  capability: string,
  admit: (key: string) => boolean,
  builtins: boolean,
): string | undefined {
  if (builtins) {
    for (const builtin of builtinContexts) {
      if (builtin.provides?.includes(capability) && store.get(builtin.key)?.source === 'built-in' && admit(builtin.key))
        return builtin.key;
    }
  }
  for (const key of store.providersOf(capability)) {
    if (store.get(key)?.source !== 'built-in' && admit(key)) return key;
  }
  return undefined;
}

/** What of `requirements` the environment lacks, by name; none when no environment is given. */
export function unmetRequirements(
  requirements: EnvironmentRequirements | undefined,
  environment: Environment | undefined,
): string[] {
  if (requirements === undefined || environment === undefined) return [];
  const unmet: string[] = [];
  if (requirements.cwd && !environment.cwd) unmet.push('cwd');
  if (requirements.repoRoot && !environment.repoRoot) unmet.push('repoRoot');
  if (requirements.container && !environment.container) unmet.push('container');
  for (const c of requirements.credentials ?? []) {
    if (!environment.credentials?.includes(c)) unmet.push(`credential '${c}'`);
  }
  for (const c of requirements.capabilities ?? []) {
    if (!environment.capabilities?.includes(c)) unmet.push(`capability '${c}'`);
  }
  return unmet;
}
