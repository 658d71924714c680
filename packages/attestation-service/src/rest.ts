// trustee's restful-as front end (attestation-service/src/bin/restful*): the same service as the gRPC
// one, with upstream's routes, JSON bodies and errors, over node:http.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { PolicyCheckError } from '@broker/attestation';
import { OPEN_WRITES, WriteAuthError, type WriteAuthorizer } from '@broker/auth';
import type { Logger } from '@broker/cli';
import type { ServerTls } from '@broker/rvps-core';
import type { attestation } from '@broker/trustee-protos';
import { AttestationServiceError } from './errors.js';
import { causeChain, GRPC_AS_TEES, verifyRequestOf } from './grpc.js';
import type { OpenedAttestationService } from './service.js';

/** actix's JSON body limit in trustee's restful-as. */
export const MAX_REST_BODY_BYTES = 2 * 1024 * 1024;
/** restful-as takes trustee's grpc-as names less `nvidia` and `tpm`, plus `sampledevice`. */
export const REST_AS_TEES: readonly string[] = [
  ...GRPC_AS_TEES.filter((t) => t !== 'nvidia' && t !== 'tpm'),
  'sampledevice',
];

export class HttpError extends AttestationServiceError {
  override readonly name: string = 'HttpError';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super('HTTP_REQUEST_REFUSED', message);
  }
}

type Obj = Record<string, unknown>;
const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

async function readJson(req: IncomingMessage): Promise<unknown> {
  const declared = Number(req.headers['content-length'] ?? '0');
  if (declared > MAX_REST_BODY_BYTES) throw new HttpError(413, 'Payload too large');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_REST_BODY_BYTES) throw new HttpError(413, 'Payload too large');
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (e) {
    throw new HttpError(400, `Json deserialize error: ${(e as Error).message}`);
  }
}

function str(o: Obj, key: string, where: string): string {
  const v = o[key];
  if (typeof v !== 'string')
    throw new HttpError(400, `Json deserialize error: ${where}${key} must be a string`);
  return v;
}

/** restful-as's body as the gRPC request it is equivalent to. */
export function grpcRequestOfRest(body: unknown): attestation.AttestationRequest {
  if (!isObject(body)) throw new HttpError(400, 'Json deserialize error: expected an object');
  const list = body.verification_requests;
  const ids = body.policy_ids;
  if (!Array.isArray(list))
    throw new HttpError(400, 'Json deserialize error: missing field `verification_requests`');
  if (!Array.isArray(ids) || !ids.every((i) => typeof i === 'string')) {
    throw new HttpError(400, 'Json deserialize error: missing field `policy_ids` (a list of strings)');
  }
  const verificationRequests = list.map((item, i) => {
    if (!isObject(item)) throw new HttpError(400, `Json deserialize error: verification_requests[${i}]`);
    const where = `verification_requests[${i}].`;
    const out: attestation.IndividualAttestationRequest = {
      tee: str(item, 'tee', where),
      evidence: str(item, 'evidence', where),
      runtimeDataHashAlgorithm:
        item.runtime_data_hash_algorithm === undefined ? '' : str(item, 'runtime_data_hash_algorithm', where),
    };
    const rd = item.runtime_data;
    if (isObject(rd) && typeof rd.raw === 'string') out.rawRuntimeData = rd.raw;
    else if (isObject(rd) && 'structured' in rd) out.structuredRuntimeData = JSON.stringify(rd.structured);
    else if (rd !== undefined && rd !== null)
      throw new HttpError(400, `Json deserialize error: ${where}runtime_data`);
    const init = item.init_data;
    if (isObject(init) && typeof init.init_data_digest === 'string')
      out.initDataDigest = init.init_data_digest;
    else if (isObject(init) && typeof init.init_data_toml === 'string')
      out.initDataToml = init.init_data_toml;
    else if (init !== undefined && init !== null)
      throw new HttpError(400, `Json deserialize error: ${where}init_data`);
    return out;
  });
  return { verificationRequests, policyIds: ids as string[] };
}

function send(
  res: ServerResponse,
  status: number,
  body: string | Buffer = '',
  type?: string,
  extra: Record<string, string> = {},
): void {
  res.writeHead(status, {
    ...extra,
    ...(type !== undefined && { 'content-type': type }),
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

export interface RestOptions {
  /** Who may `POST /policy`; anyone when absent (trustee's behaviour). */
  readonly auth?: WriteAuthorizer;
  /**
   * Origins (`http(s)://host[:port]`) whose browser pages may call the routes (restful-as's
   * `--allowed_origin`); none when empty.
   */
  readonly allowedOrigins?: readonly string[];
}

const CORS_MAX_AGE_SECONDS = '86400';

/** The CORS answer headers for `origin`, or undefined when it is not allowed. */
function corsHeaders(
  origin: string | undefined,
  allowed: readonly string[],
): Record<string, string> | undefined {
  if (origin === undefined || !allowed.includes(origin)) return undefined;
  return { 'access-control-allow-origin': origin, vary: 'Origin' };
}

function b64urlText(text: string): string {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1)
    throw new AttestationServiceError('REQUEST_FAILED', 'Base64 decode policy: invalid base64url');
  return Buffer.from(text, 'base64url').toString('utf8');
}

export function restHandler(opened: OpenedAttestationService, logger?: Logger, options: RestOptions = {}) {
  const { service } = opened;
  const auth = options.auth ?? OPEN_WRITES;
  const origins = options.allowedOrigins ?? [];
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0];
    const route = `${req.method} ${path}`;
    const cors = corsHeaders(req.headers.origin, origins);
    if (req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined) {
      if (cors === undefined) return send(res, 400, 'Origin is not allowed to make this request');
      return send(res, 200, '', undefined, {
        ...cors,
        'access-control-allow-methods': 'POST, GET, OPTIONS',
        'access-control-allow-headers': 'content-type, authorization',
        'access-control-max-age': CORS_MAX_AGE_SECONDS,
      });
    }
    if (cors !== undefined) for (const [k, v] of Object.entries(cors)) res.setHeader(k, v);
    try {
      switch (route) {
        case 'POST /attestation': {
          const request = verifyRequestOf(grpcRequestOfRest(await readJson(req)), REST_AS_TEES);
          return send(res, 200, await service.verify(request));
        }
        case 'POST /policy': {
          const socket = req.socket as Partial<TLSSocket>;
          const who = auth.check(route, {
            authorization: req.headers.authorization,
            // Set only on a TLS listener with a client CA, when the client's certificate chained to it.
            verifiedClientCertificate: socket.authorized === true,
          });
          const body = await readJson(req);
          if (!isObject(body)) throw new HttpError(400, 'Json deserialize error: expected an object');
          const id = str(body, 'policy_id', '');
          await service.setPolicy(id, b64urlText(str(body, 'policy', '')));
          logger?.info({ policyId: id.slice(0, 100), by: who }, 'attestation policy set');
          return send(res, 200);
        }
        case 'GET /policy': {
          const ids = await opened.listPolicies();
          return send(res, 200, JSON.stringify(ids.map((id) => ({ 'policy-id': id }))), 'application/json');
        }
        case 'POST /challenge': {
          const body = await readJson(req);
          if (!isObject(body) || typeof body.tee !== 'string' || typeof body.tee_params !== 'string') {
            throw new HttpError(
              400,
              'Json deserialize error: expected {"tee": string, "tee_params": string}',
            );
          }
          if (!REST_AS_TEES.includes(body.tee))
            throw new AttestationServiceError(
              'REQUEST_FAILED',
              `Unsupported TEE type: ${JSON.stringify(body.tee.slice(0, 64))}`,
            );
          if (body.tee === 'se')
            throw new AttestationServiceError(
              'REQUEST_FAILED',
              'the se verifier is not available in this service',
            );
          return send(res, 200, '');
        }
        case 'GET /.well-known/jwks.json':
          return send(
            res,
            200,
            JSON.stringify({ keys: service.signerPublicJwk === undefined ? [] : [service.signerPublicJwk] }),
            'application/json',
          );
        case 'GET /healthz':
          return send(res, 200);
        case 'GET /metrics':
          return send(res, 200, await opened.metrics.metrics(), opened.metrics.contentType);
        default:
          return send(res, 404);
      }
    } catch (e) {
      if (e instanceof HttpError) return send(res, e.status, e.message);
      if (e instanceof WriteAuthError) {
        logger?.warn({ route, err: e.message }, 'write refused');
        const status = e.code === 'PERMISSION_DENIED' ? 403 : 401;
        // The body is not read: close the connection rather than drain an unauthenticated upload.
        return send(res, status, e.message, 'text/plain', {
          ...(status === 401 && { 'www-authenticate': 'Bearer' }),
          connection: 'close',
        });
      }
      // A policy refused by its checks (no trust_claims, a limit exceeded): the caller's to fix.
      if (e instanceof PolicyCheckError) {
        logger?.warn({ route, err: e.message }, 'policy refused');
        return send(res, e.code === 'busy' ? 503 : 400, e.message);
      }
      logger?.warn({ route, err: causeChain(e) }, 'request failed');
      return send(res, 500, `An internal error occured: \n${causeChain(e)}`);
    }
  };
}

export interface RunningRestServer {
  readonly port: number;
  close(): Promise<void>;
}

/** Listens on `host:port` (port 0 picks one). */
export async function startAsRestServer(
  opened: OpenedAttestationService,
  address: string,
  logger?: Logger,
  tls?: ServerTls,
  options: RestOptions = {},
): Promise<RunningRestServer> {
  const m = /^\[?([^\]]*)\]?:(\d+)$/.exec(address);
  if (m === null)
    throw new AttestationServiceError(
      'ADDRESS_INVALID',
      `${JSON.stringify(address.slice(0, 100))}: expected HOST:PORT`,
    );
  const handler = restHandler(opened, logger, options);
  const listener = (req: IncomingMessage, res: ServerResponse) => void handler(req, res);
  const server: Server =
    tls === undefined
      ? createServer(listener)
      : createHttpsServer(
          {
            cert: tls.certChain,
            key: tls.privateKey,
            // A client certificate is asked for, not required: only writes need one.
            ...(tls.clientCa !== undefined && {
              ca: tls.clientCa,
              requestCert: true,
              rejectUnauthorized: false,
            }),
          },
          listener,
        );
  server.requestTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(Number(m[2]), m[1], () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
