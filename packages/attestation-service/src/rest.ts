// trustee's restful-as front end (attestation-service/src/bin/restful*): the same service as the gRPC
// one, with upstream's routes, JSON bodies and errors, over node:http.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Logger } from '@broker/cli';
import type { attestation } from '@broker/trustee-protos';
import { causeChain, GRPC_AS_TEES, verifyRequestOf } from './grpc.js';
import type { OpenedAttestationService } from './service.js';

/** actix's JSON body limit in trustee's restful-as. */
export const MAX_REST_BODY_BYTES = 2 * 1024 * 1024;
/** restful-as takes trustee's grpc-as names less `nvidia` and `tpm`, plus `sampledevice`. */
export const REST_AS_TEES: readonly string[] = [
  ...GRPC_AS_TEES.filter((t) => t !== 'nvidia' && t !== 'tpm'),
  'sampledevice',
];

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
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

function send(res: ServerResponse, status: number, body: string | Buffer = '', type?: string): void {
  res.writeHead(status, {
    ...(type !== undefined && { 'content-type': type }),
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

function b64urlText(text: string): string {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1)
    throw new Error('Base64 decode policy: invalid base64url');
  return Buffer.from(text, 'base64url').toString('utf8');
}

export function restHandler(opened: OpenedAttestationService, logger?: Logger) {
  const { service } = opened;
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0];
    const route = `${req.method} ${path}`;
    try {
      switch (route) {
        case 'POST /attestation': {
          const request = verifyRequestOf(grpcRequestOfRest(await readJson(req)), REST_AS_TEES);
          return send(res, 200, await service.verify(request));
        }
        case 'POST /policy': {
          const body = await readJson(req);
          if (!isObject(body)) throw new HttpError(400, 'Json deserialize error: expected an object');
          const id = str(body, 'policy_id', '');
          await service.setPolicy(id, b64urlText(str(body, 'policy', '')));
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
            throw new Error(`Unsupported TEE type: ${JSON.stringify(body.tee.slice(0, 64))}`);
          if (body.tee === 'se') throw new Error('the se verifier is not available in this service');
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
        default:
          return send(res, 404);
      }
    } catch (e) {
      if (e instanceof HttpError) return send(res, e.status, e.message);
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
  tls?: { readonly certChain: Buffer; readonly privateKey: Buffer },
): Promise<RunningRestServer> {
  const m = /^\[?([^\]]*)\]?:(\d+)$/.exec(address);
  if (m === null) throw new Error(`--rest ${JSON.stringify(address.slice(0, 100))}: expected HOST:PORT`);
  const handler = restHandler(opened, logger);
  const listener = (req: IncomingMessage, res: ServerResponse) => void handler(req, res);
  const server: Server =
    tls === undefined
      ? createServer(listener)
      : createHttpsServer({ cert: tls.certChain, key: tls.privateKey }, listener);
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
