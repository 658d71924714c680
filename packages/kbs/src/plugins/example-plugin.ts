// A small kbs.plugin.v1.KbsPlugin service, the counterpart of trustee's external_plugin_test_server.rs:
// POST is admin-gated, GET attestation-gated. Echo mode answers every call with a description of the
// request; store mode keeps POSTed bodies in memory by path and GET returns them, JWE-encrypted by the
// KBS when `encryptGet` is set.
import type { Logger } from '@broker/cli';
import { serveGrpc } from '@broker/rvps-core';
import { plugin } from '@broker/trustee-protos';
import { Server, type ServerUnaryCall, type sendUnaryData, status } from '@grpc/grpc-js';

/** Requests larger than this are refused by grpc-js with RESOURCE_EXHAUSTED. */
export const MAX_EXAMPLE_REQUEST_BYTES = 4 * 1024 * 1024;
/** Store mode keeps at most this many paths and bytes; a POST beyond them is refused. */
export const MAX_EXAMPLE_ENTRIES = 1024;
export const MAX_EXAMPLE_STORED_BYTES = 64 * 1024 * 1024;

export interface ExamplePluginOptions {
  /** `host:port`; port 0 picks a free one. */
  readonly address: string;
  /** PEM server certificate chain and key: TLS instead of plaintext h2c. */
  readonly tls?: { readonly certChain: Buffer; readonly privateKey: Buffer };
  /** POST stores the body under its path, GET returns it (otherwise both echo). */
  readonly store?: boolean;
  /** GET replies must be JWE-encrypted by the KBS. */
  readonly encryptGet?: boolean;
  readonly logger?: Logger;
}

export interface RunningExamplePlugin {
  readonly port: number;
  close(): Promise<void>;
}

function echo(req: { method: string; path: string[]; query: Record<string, string>; body: Buffer }): Buffer {
  const query = Object.entries(req.query)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${JSON.stringify(k)}: ${JSON.stringify(v)}`)
    .join(', ');
  return Buffer.from(
    `Echo: method=${req.method}, path=${JSON.stringify(req.path)}, query={${query}}, body_len=${req.body.length}`,
    'utf8',
  );
}

export function examplePluginHandlers(
  options: Omit<ExamplePluginOptions, 'address' | 'tls'>,
): plugin.KbsPluginServer {
  const store = new Map<string, Buffer>();
  let storedBytes = 0;
  const log = options.logger;
  return {
    handle(
      call: ServerUnaryCall<plugin.PluginRequest, plugin.PluginResponse>,
      done: sendUnaryData<plugin.PluginResponse>,
    ) {
      const req = call.request;
      const key = req.path.join('/');
      if (req.method === 'POST') {
        if (!options.store) {
          done(null, { body: echo(req), statusCode: 200, contentType: 'text/plain' });
          return;
        }
        const previous = store.get(key)?.length ?? 0;
        if (
          (previous === 0 && !store.has(key) && store.size >= MAX_EXAMPLE_ENTRIES) ||
          storedBytes - previous + req.body.length > MAX_EXAMPLE_STORED_BYTES
        ) {
          done({ code: status.RESOURCE_EXHAUSTED, details: 'the example plugin store is full' });
          return;
        }
        store.set(key, Buffer.from(req.body));
        storedBytes += req.body.length - previous;
        log?.info({ key, bytes: req.body.length }, 'stored');
        done(null, { body: Buffer.alloc(0), statusCode: 200, contentType: '' });
        return;
      }
      if (req.method === 'GET') {
        const stored = store.get(key);
        if (stored !== undefined) {
          log?.info({ key }, 'returning stored data');
          done(null, { body: stored, statusCode: 200, contentType: 'application/octet-stream' });
        } else {
          done(null, { body: echo(req), statusCode: 200, contentType: 'text/plain' });
        }
        return;
      }
      done({ code: status.INVALID_ARGUMENT, details: `method not supported: ${req.method.slice(0, 16)}` });
    },
    validateAuth(
      call: ServerUnaryCall<plugin.ValidateAuthRequest, plugin.ValidateAuthResponse>,
      done: sendUnaryData<plugin.ValidateAuthResponse>,
    ) {
      done(null, { requiresAdminAuth: call.request.method === 'POST' });
    },
    needsEncryption(
      call: ServerUnaryCall<plugin.NeedsEncryptionRequest, plugin.NeedsEncryptionResponse>,
      done: sendUnaryData<plugin.NeedsEncryptionResponse>,
    ) {
      done(null, { requiresPayloadEncryption: options.encryptGet === true && call.request.method === 'GET' });
    },
  };
}

export async function startExamplePlugin(options: ExamplePluginOptions): Promise<RunningExamplePlugin> {
  const server = new Server({ 'grpc.max_receive_message_length': MAX_EXAMPLE_REQUEST_BYTES });
  server.addService(plugin.KbsPluginService, examplePluginHandlers(options));
  return serveGrpc(server, { address: options.address, tls: options.tls });
}
