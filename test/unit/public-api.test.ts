import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as publicApi from '../../src/index.js';
import * as internal from '../../src/internal.js';

describe('the package entries', () => {
  it('exports a curated public API from "." (every runtime name listed here on purpose)', () => {
    expect(Object.keys(publicApi).sort()).toEqual([
      'BadRequestError',
      'BusClient',
      'CancelledError',
      'ConflictError',
      'Dispatcher',
      'ErrorCode',
      'ForbiddenError',
      'GrantError',
      'GrantVerifier',
      'IdentityGate',
      'InternalError',
      'KvContextStore',
      'MAX_LIVE_TASKS_PER_PRINCIPAL',
      'MatrixError',
      'Mount',
      'Mounts',
      'NotFoundError',
      'PayloadTooLargeError',
      'Registry',
      'ResultFormat',
      'StaticStore',
      'TaskRunner',
      'TaskStatus',
      'TaskStore',
      'TimeoutError',
      'ToolErrorCode',
      'ToolProvider',
      'ToolSession',
      'UnavailableError',
      'agentsMount',
      'approvalGate',
      'approvalsMount',
      'awaitDecision',
      'connectBus',
      'connectOptionsFromEnv',
      'dispatcherMount',
      'durableTracesMount',
      'mintGrant',
      'newIssuerKey',
      'openToolSession',
      'packagesMount',
      'registryMount',
      'resolveToolContext',
      'sessionsMount',
      'tasksMount',
      'toolResultMessage',
      'tracesMount',
    ]);
  });

  it('exports everything, the public API included and the same objects, from "./internal"', () => {
    const everything = new Map(Object.entries(internal));
    for (const [name, value] of Object.entries(publicApi)) expect(everything.get(name), name).toBe(value);
    expect(everything.size).toBeGreaterThan(Object.keys(publicApi).length * 3);
  });

  it('maps ".", "./internal" and one subpath per framework adapter in package.json to their built entries', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      exports: Record<string, { types: string; default: string }>;
    };
    expect(pkg.exports).toEqual({
      '.': { types: './dist/src/index.d.ts', default: './dist/src/index.js' },
      './internal': { types: './dist/src/internal.d.ts', default: './dist/src/internal.js' },
      './ai-sdk': { types: './dist/src/adapters/ai-sdk.d.ts', default: './dist/src/adapters/ai-sdk.js' },
      './openai-agents': {
        types: './dist/src/adapters/openai-agents.d.ts',
        default: './dist/src/adapters/openai-agents.js',
      },
      './langchain': { types: './dist/src/adapters/langchain.d.ts', default: './dist/src/adapters/langchain.js' },
    });
  });
});
