// The KBS's client of a remote attestation service (trustee's `coco_as_grpc`, kbs/src/attestation/coco/grpc.rs):
// the same AttestationService the KBS uses for its built-in one, answered by trustee's gRPC AS instead.
// One channel per pooled connection carries both the AS and the RVPS stubs, as in trustee.
import { attestation, reference } from '@broker/trustee-protos';
import { ChannelCredentials, type ChannelOptions, Metadata, type ServiceError } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { RvpsError } from '../rvps/errors.js';
import { AttestationFailed, ParsePolicyError } from './errors.js';
import type { AttestationService, VerifyRequest } from './service.js';

export const DEFAULT_AS_ADDR = 'http://127.0.0.1:50004';
export const DEFAULT_AS_POOL_SIZE = 100;
/** trustee's fixed deadline of every call to the AS. */
export const AS_CALL_DEADLINE_MS = 300_000;
/** Connections actually opened: HTTP/2 multiplexes calls, so a handful serve trustee's pool of 100. */
const MAX_CONNECTIONS = 4;
/** The largest reply taken from the AS (a token, a reference value). */
const MAX_REPLY_BYTES = 4 * 1024 * 1024;

export interface GrpcAttestationServiceOptions {
  /** `http://HOST:PORT` (h2c) or `https://HOST:PORT` (TLS with the system roots). */
  readonly asAddr: string;
  readonly poolSize?: number;
  /** Deadline of each call; trustee's 300 s by default. */
  readonly deadlineMs?: number;
  readonly logger?: Logger;
}

function target(addr: string): { target: string; credentials: ChannelCredentials } {
  const m = /^(https?):\/\/([^/]+)\/?$/.exec(addr);
  if (m === null) {
    throw new RangeError(
      `[attestation_service] as_addr ${JSON.stringify(addr.slice(0, 100))} must be http://HOST:PORT or https://HOST:PORT`,
    );
  }
  return {
    target: m[2] as string,
    credentials: m[1] === 'https' ? ChannelCredentials.createSsl() : ChannelCredentials.createInsecure(),
  };
}

const CHANNEL_OPTIONS: ChannelOptions = {
  // Separate connections per pooled client, and a quick return once the AS is back.
  'grpc.use_local_subchannel_pool': 1,
  'grpc.initial_reconnect_backoff_ms': 500,
  'grpc.max_reconnect_backoff_ms': 5000,
  'grpc.max_receive_message_length': MAX_REPLY_BYTES,
};

interface Stubs {
  readonly as: attestation.AttestationServiceClient;
  readonly rvps: reference.ReferenceValueProviderServiceClient;
}

function describe(e: ServiceError): string {
  return `${e.code} ${e.details || e.message}`;
}

/** Connects lazily: the KBS starts while the AS is down, and each call reconnects as needed. */
export function createGrpcAttestationService(options: GrpcAttestationServiceOptions): AttestationService {
  const { target: t, credentials } = target(options.asAddr);
  const deadlineMs = options.deadlineMs ?? AS_CALL_DEADLINE_MS;
  const n = Math.max(1, Math.min(options.poolSize ?? DEFAULT_AS_POOL_SIZE, MAX_CONNECTIONS));
  const pool: Stubs[] = [];
  for (let i = 0; i < n; i++) {
    pool.push({
      as: new attestation.AttestationServiceClient(t, credentials, CHANNEL_OPTIONS),
      rvps: new reference.ReferenceValueProviderServiceClient(t, credentials, CHANNEL_OPTIONS),
    });
  }
  let next = 0;
  const pick = (): Stubs => pool[next++ % pool.length] as Stubs;

  function unary<Req, Res>(
    method: (
      req: Req,
      md: Metadata,
      opts: { deadline: Date },
      cb: (e: ServiceError | null, r?: Res) => void,
    ) => unknown,
    req: Req,
  ): Promise<Res> {
    return new Promise((resolve, reject) => {
      method(req, new Metadata(), { deadline: new Date(Date.now() + deadlineMs) }, (e, r) =>
        e ? reject(e) : resolve(r as Res),
      );
    });
  }

  return {
    async verify(req: VerifyRequest) {
      if (req.initData !== null && req.initData.format !== 'toml') {
        throw new AttestationFailed(
          'REQUEST',
          `Unsupported initdata format: ${JSON.stringify(req.initData.format.slice(0, 32))}`,
        );
      }
      if (req.rawReportData !== undefined) {
        throw new AttestationFailed(
          'REQUEST',
          'raw report data cannot be sent to a remote attestation service',
        );
      }
      const entry = (tee: string, evidence: unknown, runtimeData: unknown, alg: string) => ({
        tee,
        evidence: Buffer.from(JSON.stringify(evidence)).toString('base64url'),
        structuredRuntimeData: JSON.stringify(runtimeData),
        runtimeDataHashAlgorithm: alg,
      });
      const request: attestation.AttestationRequest = {
        verificationRequests: [
          {
            ...entry(req.tee, req.evidence, req.runtimeData, req.runtimeDataHashAlgorithm),
            ...(req.initData !== null && { initDataToml: req.initData.body }),
          },
          ...req.additional.map((a) =>
            entry(
              a.tee,
              a.evidence,
              a.runtimeData,
              a.runtimeDataHashAlgorithm ?? req.runtimeDataHashAlgorithm,
            ),
          ),
        ],
        policyIds: [...req.policyIds],
      };
      const stubs = pick();
      try {
        const res = await unary<attestation.AttestationRequest, attestation.AttestationResponse>(
          stubs.as.attestationEvaluate.bind(stubs.as),
          request,
        );
        return res.attestationToken;
      } catch (e) {
        options.logger?.warn(
          { err: describe(e as ServiceError) },
          'remote attestation service refused or unreachable',
        );
        throw new AttestationFailed('EVIDENCE', 'RCAR handshake Attest failed', { cause: e });
      }
    },

    async setPolicy(id, regoText) {
      const stubs = pick();
      try {
        await unary<attestation.SetPolicyRequest, attestation.SetPolicyResponse>(
          stubs.as.setAttestationPolicy.bind(stubs.as),
          { policyId: id, policy: Buffer.from(regoText, 'utf8').toString('base64url') },
        );
      } catch (e) {
        throw new ParsePolicyError(id, `remote attestation service: ${describe(e as ServiceError)}`, {
          cause: e,
        });
      }
    },

    async registerReferenceValue(message) {
      const text =
        typeof message === 'string'
          ? message
          : message instanceof Uint8Array
            ? Buffer.from(message).toString('utf8')
            : JSON.stringify(message);
      const stubs = pick();
      try {
        await unary<reference.ReferenceValueRegisterRequest, reference.ReferenceValueRegisterResponse>(
          stubs.rvps.registerReferenceValue.bind(stubs.rvps),
          { message: text },
        );
      } catch (e) {
        throw new RvpsError('MESSAGE_MALFORMED', `remote RVPS: ${describe(e as ServiceError)}`, { cause: e });
      }
    },

    async getReferenceValue(name) {
      const stubs = pick();
      let res: reference.ReferenceValueQueryResponse;
      try {
        res = await unary<reference.ReferenceValueQueryRequest, reference.ReferenceValueQueryResponse>(
          stubs.rvps.queryReferenceValue.bind(stubs.rvps),
          { referenceValueId: name },
        );
      } catch (e) {
        throw new RvpsError('RECORD_CORRUPT', `remote RVPS: ${describe(e as ServiceError)}`, { cause: e });
      }
      if (res.referenceValueResults === undefined) return undefined;
      try {
        return JSON.parse(res.referenceValueResults);
      } catch (e) {
        throw new RvpsError('RECORD_CORRUPT', 'remote RVPS answered a value that is not JSON', { cause: e });
      }
    },

    // The remote AS signs; its key is what [attestation_token] must trust.
    signerPublicJwk: undefined,

    async close() {
      for (const s of pool) {
        s.as.close();
        s.rvps.close();
      }
    },
  };
}

/** A remote RVPS as the built-in attestation service uses it (`rvps_config.type = "GrpcRemote"`). */
export interface RemoteRvps {
  register(message: string): Promise<void>;
  /** The value, or undefined when the id is unknown. */
  query(name: string): Promise<unknown>;
  close(): void;
}

/** Deadline of a reference value lookup from a policy (trustee's 10 s). */
const RVPS_QUERY_DEADLINE_MS = 10_000;

/**
 * Connects and checks the RVPS with trustee's health query (an id that never exists): as in trustee,
 * the attestation service does not start while its RVPS is unreachable.
 */
export async function connectGrpcRvps(address: string): Promise<RemoteRvps> {
  const { target: t, credentials } = target(address);
  const client = new reference.ReferenceValueProviderServiceClient(t, credentials, CHANNEL_OPTIONS);
  const call = <Req, Res>(
    method: (
      req: Req,
      md: Metadata,
      opts: { deadline: Date },
      cb: (e: ServiceError | null, r?: Res) => void,
    ) => unknown,
    req: Req,
  ) =>
    new Promise<Res>((resolve, reject) =>
      method(req, new Metadata(), { deadline: new Date(Date.now() + RVPS_QUERY_DEADLINE_MS) }, (e, r) =>
        e
          ? reject(new RvpsError('RECORD_CORRUPT', `remote RVPS at ${address}: ${describe(e)}`, { cause: e }))
          : resolve(r as Res),
      ),
    );
  const rvps: RemoteRvps = {
    async register(message) {
      await call(client.registerReferenceValue.bind(client), { message });
    },
    async query(name) {
      const res = await call<reference.ReferenceValueQueryRequest, reference.ReferenceValueQueryResponse>(
        client.queryReferenceValue.bind(client),
        { referenceValueId: name },
      );
      if (res.referenceValueResults === undefined) return undefined;
      try {
        return JSON.parse(res.referenceValueResults);
      } catch (e) {
        throw new RvpsError('RECORD_CORRUPT', 'remote RVPS answered a value that is not JSON', { cause: e });
      }
    },
    close: () => client.close(),
  };
  try {
    await rvps.query('__healthcheck__');
  } catch (e) {
    client.close();
    throw e;
  }
  return rvps;
}
