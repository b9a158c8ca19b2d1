/**
 * A NATS server in a container, through testcontainers' NATS module, for the test harness.
 * Used whenever a container engine (Docker, or podman's Docker-compatible API) answers and the
 * image can be had; every reason it cannot be used is an error that says which, so that the
 * harness can fall back to a `nats-server` process and tell the user why.
 */

/** The image a user pulls; `NATS_IMAGE` names another (scripts/containers.sh sets its local build). */
export const DEFAULT_NATS_IMAGE = 'nats:2.15.3-alpine';

/** A started NATS container and how to connect to it. */
export interface StartedNats {
  /** `nats://host:port` of its client port, mapped to the host. */
  url: string;
  /** Credentials the server demands: the module always starts it with `--user`/`--pass`. */
  user?: string;
  pass?: string;
  stop(): Promise<void>;
}

/** The container could not be used; `message` says why, `cause` holds the engine's error. */
export class ContainerUnavailableError extends Error {
  override name = 'ContainerUnavailableError';
}

/** Starts `image` with JetStream; rejects with ContainerUnavailableError when no engine or image. */
export async function startNatsContainer(image = process.env.NATS_IMAGE || DEFAULT_NATS_IMAGE): Promise<StartedNats> {
  const { getContainerRuntimeClient } = await import('testcontainers');
  try {
    await getContainerRuntimeClient();
  } catch (cause) {
    throw new ContainerUnavailableError('no container engine answers', { cause });
  }
  const { NatsContainer } = await import('@testcontainers/nats');
  let started: Awaited<ReturnType<InstanceType<typeof NatsContainer>['start']>>;
  try {
    // The module's default waits 120 s for the ready line; a server that starts does so in ~1 s.
    started = await new NatsContainer(image).withJetStream().withStartupTimeout(30_000).start();
  } catch (cause) {
    throw new ContainerUnavailableError(`a container engine answers, but ${image} did not start: ${firstLine(cause)}`, {
      cause,
    });
  }
  return { ...natsConnection(started.getConnectionOptions()), stop: async () => void (await started.stop()) };
}

/** URL and credentials from the module's connection options (`servers` is `host:port`). */
function natsConnection(options: {
  servers?: string | string[];
  user?: string;
  pass?: string;
}): Omit<StartedNats, 'stop'> {
  const server = String(Array.isArray(options.servers) ? options.servers[0] : options.servers);
  const url = server.startsWith('nats://') ? server : `nats://${server}`;
  return {
    url,
    ...(options.user !== undefined && { user: options.user }),
    ...(options.pass !== undefined && { pass: options.pass }),
  };
}

function firstLine(err: unknown): string {
  return String(err instanceof Error ? err.message : err).split('\n')[0] ?? '';
}
