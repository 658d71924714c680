// The gRPC plumbing the standalone RVPS and attestation service share with the KBS's clients of them:
// an `http://` or `https://` address as a grpc-js target, a server bound with its health service and
// stopped gracefully, and grpc-js's own log lines routed to the service's logger.
import { format } from 'node:util';
import type { Logger } from '@broker/cli';
import { ChannelCredentials, type Server, setLogger } from '@grpc/grpc-js';
import { addHealthService } from './health.js';
import { type Http1Options, listenShared } from './shared-port.js';
import { grpcServerCredentials, type ServerTls } from './tls.js';

/** TLS settings of an `https://` address: the trust anchors, and a client certificate to present. */
export interface GrpcTlsOptions {
  /** PEM CA certificates trusted instead of the system roots. */
  readonly caCert?: Buffer;
  /** PEM certificate chain and private key presented to a server that asks for one (mutual TLS). */
  readonly clientCert?: { readonly certChain: Buffer; readonly privateKey: Buffer };
}

/**
 * `http://host:port` (plaintext h2c) or `https://host:port` (TLS with the system roots, or `caCert`;
 * with `clientCert` for mutual TLS) as a grpc-js target. `setting` names the address in messages
 * (`address`, `[attestation_service] as_addr`, …).
 */
export function grpcTarget(
  address: string,
  tls: GrpcTlsOptions = {},
  setting = 'address',
): { target: string; credentials: ChannelCredentials } {
  const m = /^(https?):\/\/([^/]+)\/?$/.exec(address);
  const shown = JSON.stringify(address.slice(0, 100));
  if (m === null) {
    throw new RangeError(`${setting} ${shown} must be http://HOST:PORT or https://HOST:PORT`);
  }
  if (m[1] === 'http' && (tls.caCert !== undefined || tls.clientCert !== undefined)) {
    throw new RangeError(`${setting} ${shown} is plain http://: a CA or client certificate needs https://`);
  }
  const credentials =
    m[1] === 'https'
      ? ChannelCredentials.createSsl(
          tls.caCert ?? null,
          tls.clientCert?.privateKey ?? null,
          tls.clientCert?.certChain ?? null,
        )
      : ChannelCredentials.createInsecure();
  return { target: m[2] as string, credentials };
}

export interface RunningGrpcServer {
  /** The port bound (the one asked for, or the one picked for port 0). */
  readonly port: number;
  /** Graceful stop: in-flight calls finish; after SHUTDOWN_GRACE_MS the rest are cancelled. */
  close(): Promise<void>;
}

export interface ServeGrpcOptions {
  /** `host:port`; port 0 picks a free one. */
  readonly address: string;
  /** Serve TLS (HTTP/2 over TLS), asking for client certificates when it has a client CA. */
  readonly tls?: ServerTls | undefined;
  /** The services `grpc.health.v1.Health` reports as SERVING (with `""`); absent: no health service. */
  readonly healthServices?: readonly string[] | undefined;
  /**
   * Plain HTTP/1.1 GET routes served on the same port (and under the same TLS) as the gRPC services,
   * as trustee's grpc-as serves `/.well-known/jwks.json`. Absent: the port speaks gRPC only.
   */
  readonly http1?: Http1Options | undefined;
  /** Logs refused HTTP/1.1 requests and connection errors (debug level). */
  readonly logger?: Logger | undefined;
}

/** Graceful stop: in-flight calls finish; after SHUTDOWN_GRACE_MS the rest are cancelled. */
export const SHUTDOWN_GRACE_MS = 5000;

/** Adds the health service to `server` (its services already added), binds it and starts serving. */
export async function serveGrpc(server: Server, options: ServeGrpcOptions): Promise<RunningGrpcServer> {
  const health =
    options.healthServices === undefined ? undefined : addHealthService(server, options.healthServices);
  if (options.http1 !== undefined) {
    const listener = await listenShared(server, options.address, options.http1, options.tls, options.logger);
    return {
      port: listener.port,
      close: () => {
        health?.close();
        listener.close();
        return shutdown(server);
      },
    };
  }
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(options.address, grpcServerCredentials(options.tls), (err, bound) =>
      err ? reject(new Error(`cannot listen on ${options.address}: ${err.message}`)) : resolve(bound),
    );
  });
  return {
    port,
    close: () => {
      health?.close();
      return shutdown(server);
    },
  };
}

/**
 * grpc-js's own log lines (`E No address added out of total 1 resolved`, on stderr by default) go to
 * `logger` at debug level: the failure they tell of reaches the user once, as the command's error.
 */
export function routeGrpcLogs(logger: Logger): void {
  const line =
    (level: string) =>
    (message: unknown, ...rest: unknown[]) =>
      logger.debug({ grpcLevel: level }, format(message, ...rest));
  setLogger({ error: line('error'), info: line('info'), debug: line('debug') });
}

function shutdown(server: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, SHUTDOWN_GRACE_MS);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
