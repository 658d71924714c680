/**
 * The running hub: start-up credentials first, then the ttrpc socket, as
 * upstream, so that a socket that exists means the credentials are in place
 * (kata and the peer-pod units wait for the socket before going on).
 */
import { registerDataHubServices } from '@broker/guest-api';
import { TtrpcServer, type UnixAddress } from '@broker/ttrpc';
import type { CdhConfig } from './config.js';
import { DataHub, type DataHubOptions } from './hub.js';
import { registerKeyProviderService } from './image/keyprovider.js';

export interface StartDataHubOptions extends DataHubOptions {
  /** File mode of the socket (default 0o600: only root's kata agent and api-server-rest call it). */
  readonly socketMode?: number;
}

export interface RunningDataHub {
  readonly hub: DataHub;
  /** The socket listened on. */
  readonly address: UnixAddress;
  /** The ttrpc services served. */
  readonly services: readonly string[];
  /** Stops accepting calls, lets running ones finish (up to `graceMs`), closes the KBS and agent connections. */
  close(options?: { graceMs?: number }): Promise<void>;
}

/** Starts the hub on `config.socket`. Throws `HubInitializationFailed` when the credentials cannot be written. */
export async function startDataHub(
  config: CdhConfig,
  options: StartDataHubOptions = {},
): Promise<RunningDataHub> {
  const hub = new DataHub(config, options);
  try {
    await hub.init();
  } catch (e) {
    await hub.close();
    throw e;
  }
  const server = new TtrpcServer(options.logger !== undefined ? { logger: options.logger } : {});
  const services = registerDataHubServices(server, hub);
  services.push(
    registerKeyProviderService(
      server,
      (kid) => hub.getResource(kid),
      (reason) => options.logger?.warn({ reason }, 'UnwrapKey failed'),
    ),
  );
  try {
    await server.listen({ path: config.socketAddress.path, mode: options.socketMode ?? 0o600 });
  } catch (e) {
    await hub.close();
    throw e;
  }
  options.logger?.info({ socket: config.socket, services }, 'Confidential Data Hub listens');
  let closing: Promise<void> | undefined;
  return {
    hub,
    address: config.socketAddress,
    services,
    close(closeOptions = {}) {
      closing ??= (async () => {
        await server.close(closeOptions.graceMs !== undefined ? { graceMs: closeOptions.graceMs } : {});
        await hub.close();
      })();
      return closing;
    },
  };
}
