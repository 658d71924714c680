/**
 * The sandbox agent as a ttrpc server, and the listen addresses it accepts: `unix:///path` (what the
 * peer-pods forwarder connects to) and `tcp://host:port`. kata's `vsock://<cid>:<port>` is parsed and
 * refused with a reason: Node.js cannot open AF_VSOCK sockets.
 */
import { DataHubClient } from '@broker/guest-api';
import {
  type ListenOptions,
  parseTtrpcAddress,
  type TtrpcAddress,
  TtrpcServer,
  type TtrpcServerOptions,
} from '@broker/ttrpc';
import { SandboxAgent, type SandboxAgentOptions } from './agent.js';
import { InvalidRequest } from './errors.js';
import { registerAgentService } from './service.js';
import type { ImagePuller } from './storage.js';

/** Where kata's agent listens inside a VM. */
export const KATA_VSOCK_ADDRESS = 'vsock://-1:1024';
/** The agent socket of a peer-pods VM (the forwarder relays the host's calls to it). */
export const DEFAULT_LISTEN = 'unix:///run/kata-containers/agent.sock';

/** A listen address that cannot be used. */
export class UnsupportedAddress extends InvalidRequest {
  override readonly name: string = 'UnsupportedAddress';
}

/** Parses a listen address; `vsock://CID:PORT` is recognised and refused. */
export function parseListenAddress(input: string): ListenOptions {
  const vsock = /^vsock:\/\/(-1|\d+):(\d+)$/.exec(input);
  if (vsock) {
    throw new UnsupportedAddress(
      `cannot listen on ${input}: Node.js has no AF_VSOCK sockets; listen on a unix socket ` +
        `(${DEFAULT_LISTEN}, as the peer-pods forwarder expects) and relay vsock to it`,
    );
  }
  if (input.startsWith('vsock:'))
    throw new UnsupportedAddress(`invalid vsock address ${input}: expected vsock://CID:PORT`);
  return parseTtrpcAddress(input);
}

/** Pulls through the data hub at `address`, one connection per pull. */
export function dataHubPuller(address: string | TtrpcAddress): ImagePuller {
  return async (image, bundlePath, signal) => {
    const client = await DataHubClient.connect(address);
    try {
      await client.pullImage(image, bundlePath, signal ? { signal } : undefined);
    } finally {
      client.close();
    }
  };
}

export interface StartOptions extends SandboxAgentOptions {
  readonly listen: readonly ListenOptions[];
  readonly server?: TtrpcServerOptions;
}

export interface RunningAgent {
  readonly agent: SandboxAgent;
  readonly server: TtrpcServer;
  readonly addresses: readonly TtrpcAddress[];
  /** Stops serving, then removes every container and the sandbox. */
  close(): Promise<void>;
}

export async function startSandboxAgent(options: StartOptions): Promise<RunningAgent> {
  // Its own sockets are out of every request's reach (the caller adds the data hub's).
  const sockets = options.listen.flatMap((l) => ('path' in l && typeof l.path === 'string' ? [l.path] : []));
  const agent = new SandboxAgent({
    ...options,
    protectedPaths: [...sockets, ...(options.protectedPaths ?? [])],
  });
  await agent.init();
  const server = new TtrpcServer(options.server);
  registerAgentService(server, agent);
  const addresses: TtrpcAddress[] = [];
  try {
    for (const l of options.listen) addresses.push(await server.listen(l));
  } catch (e) {
    await server.close({ graceMs: 0 });
    throw e;
  }
  return {
    agent,
    server,
    addresses,
    async close() {
      await server.close({ graceMs: 1000 });
      await agent.shutdown();
    },
  };
}
