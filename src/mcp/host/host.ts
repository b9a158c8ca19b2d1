/**
 * The MCP host (PROTOCOL 12): every server of an `mcpServers` file put on the bus as the mount
 * and context `mcp.<name>`, inside `serve` or as `matrix-tools mcp-host` of its own.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { type Logger, silentLogger } from '../../bus/log.js';
import type { ServerConfig } from './config.js';
import { PinStore } from './pinning.js';
import { Registrar } from './registrar.js';
import { ServerHost } from './server-host.js';
import { DEFAULT_TIMING, type SupervisorTiming } from './supervisor.js';

/** How a host runs. */
export interface McpHostOptions {
  servers: readonly ServerConfig[];
  logger?: Logger;
  /** Supervision timing; defaults: PROTOCOL 12's (30 s `initialize`, 1 s doubling to 60 s). */
  timing?: Partial<SupervisorTiming>;
  /** Register each server's context (default true). */
  register?: boolean;
  /** Replicas of the pins bucket when this creates it; default 1. */
  replicas?: number;
  /** KV bucket of accepted definitions; default `matrix-mcp-pins`. */
  pinsBucket?: string;
}

/** A running host. */
export interface McpHost {
  /** Its servers, in the file's order. */
  readonly servers: readonly ServerHost[];
  /** Stops every server and mount (the contexts stay registered). */
  stop(): Promise<void>;
}

/** Starts every server; resolves once each made its first attempt (ready or failed). */
export async function startMcpHost(nc: NatsConnection, options: McpHostOptions): Promise<McpHost> {
  const logger = options.logger ?? silentLogger;
  const pins = await PinStore.open(nc, { bucket: options.pinsBucket, replicas: options.replicas });
  if (!pins.durable) logger.error('mcp host: no JetStream; accepted tool definitions are kept in this process only');
  const registrar = options.register === false ? undefined : new Registrar(nc, logger);
  const timing = { ...DEFAULT_TIMING, ...options.timing };
  const servers = options.servers.map((server) => new ServerHost(nc, server, { pins, registrar, timing, logger }));
  await Promise.all(servers.map((s) => s.start()));
  return {
    servers,
    stop: async () => {
      await Promise.all(servers.map((s) => s.stop()));
      registrar?.close();
    },
  };
}
