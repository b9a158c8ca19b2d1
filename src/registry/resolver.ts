/**
 * The resolver (PROTOCOL 5.2): a profile, its skills and required capabilities, to one
 * `ResolvedToolContext`. Pure: it reads a `ToolContextStore` and does no I/O, so the same
 * input and store content give the same reply, byte for byte, and the same digest.
 */
import { NotFoundError } from '../bus/errors.js';
import { builtinContexts, builtinRefsFor } from './builtins.js';
import { canonicalJson, digestOf } from './canonical.js';
import { renderProviderTools } from './provider-formats.js';
import type { StoredContext, ToolContextStore } from './store.js';
import {
  type Diagnostic,
  type Environment,
  type EnvironmentRequirements,
  type MatrixToolProjection,
  ProviderFormat,
  type ResolvedTool,
  type ResolvedToolContext,
  type ResolveRequest,
  type ToolContextSpec,
  type Verification,
} from './types.js';

/** The timeout when no merged context or tool sets one, in ms. */
export const DEFAULT_TIMEOUT_MS = 30_000;

/** What the resolver may know beyond the store. */
export interface ResolveOptions {
  /** Whether a mount has a live instance; needed for `onlyAvailable`. */
  isLive?: (mount: string) => boolean;
}

/** Resolves a request against a store; throws `NotFoundError` for unknown refs or unmet capabilities. */
export function resolveToolContext(request: ResolveRequest, store: ToolContextStore, options: ResolveOptions = {}): ResolvedToolContext {
  const diagnostics: Diagnostic[] = [];
  const selected = select(request, store, diagnostics);

  const matrixTools: ResolvedTool[] = [];
  // Each tool's canonical text is made only when a second tool of its name comes (rarely).
  const toolIndex = new Map<string, { tool: ResolvedTool; projection: MatrixToolProjection; canonical?: string }>();
  const sdkTools: string[] = [];
  const instructions: string[] = [];
  let timeoutMs = Number.POSITIVE_INFINITY;
  const requirements = new RequirementsUnion();
  const verification = new VerificationUnion();

  for (const { spec } of selected) {
    if (spec.timeoutMs !== undefined) timeoutMs = Math.min(timeoutMs, spec.timeoutMs);
    if (spec.instructions?.trim()) instructions.push(`## ${spec.title}\n\n${spec.instructions.trim()}`);
    requirements.add(spec.environmentRequirements);
    verification.add(spec.verification);
    for (const projection of spec.matrixTools ?? []) {
      if (request.onlyAvailable && options.isLive !== undefined && !options.isLive(projection.target)) {
        diagnostics.push({
          level: 'warning',
          code: 'target_unavailable',
          message: `tool '${projection.name}' of context '${spec.key}' left out: ${projection.target} has no live instance`,
          context: spec.key,
          tool: projection.name,
        });
        continue;
      }
      const tool = resolvedTool(projection, spec);
      const held = toolIndex.get(tool.name);
      if (held === undefined) {
        toolIndex.set(tool.name, { tool, projection });
        matrixTools.push(tool);
        if (tool.timeoutMs !== undefined) timeoutMs = Math.min(timeoutMs, tool.timeoutMs);
      } else if ((held.canonical ??= canonicalProjection(held.projection, held.tool)) === canonicalProjection(projection, tool)) {
        // The same projection from two contexts: one tool, gated if either context gates it.
        held.tool.requiresApproval ||= tool.requiresApproval;
      } else {
        diagnostics.push({
          level: 'warning',
          code: 'tool_name_conflict',
          message: `tool '${tool.name}' of context '${spec.key}' (${tool.target} ${tool.op}) differs from the one of context '${held.tool.context}' (${held.tool.target} ${held.tool.op}); the first, from '${held.tool.context}', is kept`,
          context: spec.key,
          tool: tool.name,
        });
      }
    }
    for (const name of spec.sdkTools ?? []) {
      if (toolIndex.has(name)) {
        diagnostics.push({
          level: 'warning',
          code: 'sdk_tool_shadowed',
          message: `SDK tool '${name}' of context '${spec.key}' has the name of a bus tool; the bus tool is kept`,
          context: spec.key,
          tool: name,
        });
      } else if (!sdkTools.includes(name)) {
        sdkTools.push(name);
      }
    }
  }

  const body: Omit<ResolvedToolContext, 'revision' | 'digest'> = {
    contexts: selected.map((c) => c.spec.key),
    matrixTools,
    sdkTools,
    instructions: instructions.join('\n\n'),
    timeoutMs: Number.isFinite(timeoutMs) ? timeoutMs : DEFAULT_TIMEOUT_MS,
    environmentRequirements: requirements.value(),
    verification: verification.value(),
    diagnostics,
  };
  if (request.onlyAvailable && options.isLive === undefined) {
    diagnostics.push({
      level: 'info',
      code: 'presence_unknown',
      message: 'onlyAvailable: this registry cannot see which mounts are live, so no tool was left out',
    });
  }
  const providerTools = renderProviderTools(matrixTools, request.format ?? ProviderFormat.Matrix, request.strict === true, diagnostics);
  if (providerTools !== undefined) body.providerTools = providerTools;
  return { ...body, revision: store.revision, digest: digestOf(body) };
}

/**
 * The contexts to merge, in order: the profile's refs (or the built-in rule), each
 * skill's refs, then a provider for each required capability nobody selected provides.
 * Each context once; contexts the environment cannot serve are left out.
 */
function select(request: ResolveRequest, store: ToolContextStore, diagnostics: Diagnostic[]): StoredContext[] {
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

  const unknown = [...new Set(refs.filter((key) => store.get(key) === undefined))];
  if (unknown.length > 0) {
    throw new NotFoundError(`unknown tool context${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')}`, {
      details: { unknown },
    });
  }

  const selected: StoredContext[] = [];
  const seen = new Set<string>();
  const excluded = new Set<string>();
  const admit = (key: string): boolean => {
    if (seen.has(key)) return true;
    if (excluded.has(key)) return false;
    const stored = store.get(key) as StoredContext;
    const unmet = unmetRequirements(stored.spec.environmentRequirements, request.environment);
    if (unmet.length > 0) {
      excluded.add(key);
      diagnostics.push({
        level: 'warning',
        code: 'environment_unmet',
        message: `context '${key}' left out: the environment lacks ${unmet.join(', ')}`,
        context: key,
      });
      return false;
    }
    seen.add(key);
    selected.push(stored);
    return true;
  };
  for (const key of refs) admit(key);

  // Capabilities: the request's, its skills', and those of every context selected so far
  // (a provider's own `requires` pull in further providers, until nothing is missing).
  const wanted: string[] = [];
  addNew(wanted, request.requires);
  for (const skill of request.skills ?? []) addNew(wanted, skill.requires);
  const unmet: string[] = [];
  for (let i = 0; ; i++) {
    for (const c of selected) addNew(wanted, c.spec.requires);
    const capability = wanted[i];
    if (capability === undefined) break;
    if (selected.some((c) => c.spec.provides?.includes(capability))) continue;
    const provider = pickProvider(store, capability, admit);
    if (provider === undefined) {
      unmet.push(capability);
    } else {
      diagnostics.push({
        level: 'info',
        code: 'capability_provided',
        message: `context '${provider}' added: it provides '${capability}'`,
        context: provider,
      });
    }
  }
  if (unmet.length > 0) {
    throw new NotFoundError(`no tool context provides ${unmet.map((c) => `'${c}'`).join(', ')}`, {
      details: { unmetCapabilities: unmet },
    });
  }
  return selected;
}

/**
 * The provider of a capability: a built-in before a registered context, then the lowest
 * key; providers the environment cannot serve are skipped. It stops at the first admissible
 * one: with thousands of providers, a resolve reads as few as it must.
 */
function pickProvider(store: ToolContextStore, capability: string, admit: (key: string) => boolean): string | undefined {
  for (const builtin of builtinContexts) {
    if (builtin.provides?.includes(capability) && store.get(builtin.key)?.source === 'built-in' && admit(builtin.key)) return builtin.key;
  }
  for (const key of store.providersOf(capability)) {
    if (store.get(key)?.source !== 'built-in' && admit(key)) return key;
  }
  return undefined;
}

/** What makes two projections of one name the same tool: the projection, its result mode defaulted. */
function canonicalProjection(projection: MatrixToolProjection, tool: ResolvedTool): string {
  return canonicalJson({ ...projection, resultMode: tool.resultMode });
}

function resolvedTool(projection: MatrixToolProjection, spec: ToolContextSpec): ResolvedTool {
  const approval = spec.permissions.approval;
  const requiresApproval = approval === 'always' || (typeof approval === 'object' && approval.tools.includes(projection.name));
  const tool: ResolvedTool = {
    ...projection,
    resultMode: projection.resultMode ?? 'json',
    requiresApproval,
    context: spec.key,
  };
  const timeoutMs = Math.min(projection.timeoutMs ?? Infinity, spec.timeoutMs ?? Infinity);
  if (Number.isFinite(timeoutMs)) tool.timeoutMs = timeoutMs;
  if (spec.permissions.allowTargets !== undefined) tool.allowTargets = spec.permissions.allowTargets;
  return tool;
}

/** What of `requirements` the environment lacks, by name; none when no environment is given. */
export function unmetRequirements(requirements: EnvironmentRequirements | undefined, environment: Environment | undefined): string[] {
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

class RequirementsUnion {
  private flags: Pick<EnvironmentRequirements, 'cwd' | 'repoRoot' | 'container'> = {};
  private credentials: string[] = [];
  private capabilities: string[] = [];

  add(r: EnvironmentRequirements | undefined): void {
    if (r === undefined) return;
    if (r.cwd) this.flags.cwd = true;
    if (r.repoRoot) this.flags.repoRoot = true;
    if (r.container) this.flags.container = true;
    addNew(this.credentials, r.credentials);
    addNew(this.capabilities, r.capabilities);
  }

  value(): EnvironmentRequirements {
    const v: EnvironmentRequirements = { ...this.flags };
    if (this.credentials.length > 0) v.credentials = this.credentials;
    if (this.capabilities.length > 0) v.capabilities = this.capabilities;
    return v;
  }
}

class VerificationUnion {
  private commands: string[] = [];
  private checks: string[] = [];

  add(v: Verification | undefined): void {
    addNew(this.commands, v?.commands);
    addNew(this.checks, v?.checks);
  }

  value(): Verification {
    const v: Verification = {};
    if (this.commands.length > 0) v.commands = this.commands;
    if (this.checks.length > 0) v.checks = this.checks;
    return v;
  }
}

function addNew(into: string[], items: readonly string[] | undefined): void {
  for (const item of items ?? []) if (!into.includes(item)) into.push(item);
}
