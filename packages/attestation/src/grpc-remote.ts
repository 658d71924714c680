// The KBS's client of a remote attestation service (trustee's `coco_as_grpc`, kbs/src/attestation/coco/grpc.rs):
// the same AttestationService the KBS uses for its built-in one, answered by trustee's gRPC AS instead.
// One channel per pooled connection carries both the AS and the RVPS stubs, as in trustee.

import { readFileSync } from 'node:fs';
import { type GrpcTlsOptions, grpcTarget, RvpsError } from '@broker/rvps-core';
import { attestation, reference } from '@broker/trustee-protos';
import { type ChannelOptions, Metadata, type ServiceError, status } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { RemoteAsConfig, RemoteCredentialPaths } from './config.js';
import { AttestationFailed, ParsePolicyError, RemoteWriteRefused } from './errors.js';
import type { AttestationService, VerifyRequest } from './service-api.js';
import { adminTokenSigner } from './write-credential.js';

export const DEFAULT_AS_ADDR = 'http://127.0.0.1:50004';
export const DEFAULT_AS_POOL_SIZE = 100;
/** trustee's fixed deadline of every call to the AS. */
export const AS_CALL_DEADLINE_MS = 300_000;
/** Connections actually opened: HTTP/2 multiplexes calls, so a handful serve trustee's pool of 100. */
const MAX_CONNECTIONS = 4;
/** The largest reply taken from the AS (a token, a reference value). */
const MAX_REPLY_BYTES = 4 * 1024 * 1024;

export interface GrpcAttestationServiceOptions {
  /** `http://HOST:PORT` (h2c) or `https://HOST:PORT` (TLS, the system roots unless `tls.caCert`). */
  readonly asAddr: string;
  readonly poolSize?: number;
  /** Deadline of each call; trustee's 300 s by default. */
  readonly deadlineMs?: number;
  readonly logger?: Logger;
  /** Only with an `https://` address. */
  readonly tls?: GrpcTlsOptions;
  /**
   * A fresh bearer token for each write (policy, reference value), sent as `authorization: Bearer …`
   * metadata; evaluation and queries carry none.
   */
  readonly writeToken?: () => Promise<string>;
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

/**
 * A write the AS refused for want of a credential becomes RemoteWriteRefused, naming the keys that
 * give the KBS one; anything else is left to the caller.
 */
function refusal(
  what: string,
  e: ServiceError,
  presented: boolean,
  where = { service: 'attestation service', section: '[attestation_service]' },
): RemoteWriteRefused | undefined {
  const code =
    e.code === status.UNAUTHENTICATED
      ? 'UNAUTHENTICATED'
      : e.code === status.PERMISSION_DENIED
        ? 'PERMISSION_DENIED'
        : undefined;
  if (code === undefined) return undefined;
  const hint = presented
    ? `the credential the KBS presented was not accepted (check that the service trusts the public key of ${where.section} admin_private_key, or the CA of client_cert)`
    : `configure ${where.section} admin_private_key (a PEM private key whose public key the service trusts through --admin-public-key), or client_cert and client_key (a certificate from its --client-ca)`;
  return new RemoteWriteRefused(
    code,
    `the remote ${where.service} refused ${what} (${code}: ${e.details || e.message}); ${hint}`,
    { cause: e },
  );
}

/** Connects lazily: the KBS starts while the AS is down, and each call reconnects as needed. */
export function createGrpcAttestationService(options: GrpcAttestationServiceOptions): AttestationService {
  const { target: t, credentials } = grpcTarget(options.asAddr, options.tls, '[attestation_service] as_addr');
  const presentsCredential = options.writeToken !== undefined || options.tls?.clientCert !== undefined;
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
    token?: string,
  ): Promise<Res> {
    const md = new Metadata();
    if (token !== undefined) md.set('authorization', `Bearer ${token}`);
    return new Promise((resolve, reject) => {
      method(req, md, { deadline: new Date(Date.now() + deadlineMs) }, (e, r) =>
        e ? reject(e) : resolve(r as Res),
      );
    });
  }

  /** A token for one write, or none when the KBS has no admin key for the AS. */
  const writeToken = async (): Promise<string | undefined> =>
    options.writeToken === undefined ? undefined : await options.writeToken();

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
      const token = await writeToken();
      try {
        await unary<attestation.SetPolicyRequest, attestation.SetPolicyResponse>(
          stubs.as.setAttestationPolicy.bind(stubs.as),
          { policyId: id, policy: Buffer.from(regoText, 'utf8').toString('base64url') },
          token,
        );
      } catch (e) {
        const refused = refusal('the attestation policy', e as ServiceError, presentsCredential);
        if (refused !== undefined) throw refused;
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
      const token = await writeToken();
      try {
        await unary<reference.ReferenceValueRegisterRequest, reference.ReferenceValueRegisterResponse>(
          stubs.rvps.registerReferenceValue.bind(stubs.rvps),
          { message: text },
          token,
        );
      } catch (e) {
        const refused = refusal('the reference value', e as ServiceError, presentsCredential);
        if (refused !== undefined) throw refused;
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

/** The credentials of a remote service, read from their files. */
export interface RemoteCredentials {
  readonly tls: GrpcTlsOptions;
  /** Signs the admin JWT of one write. */
  readonly writeToken?: () => Promise<string>;
}

/**
 * Reads the files named by a section's credential keys (`section` names it in errors), at start, so that
 * a wrong path or key stops the KBS.
 */
export function readRemoteCredentials(paths: RemoteCredentialPaths, section: string): RemoteCredentials {
  const read = (key: string, path: string): Buffer => {
    try {
      return readFileSync(path);
    } catch (cause) {
      throw new RangeError(`${section} ${key}: cannot read ${path}: ${(cause as Error).message}`, { cause });
    }
  };
  let writeToken: (() => Promise<string>) | undefined;
  if (paths.adminPrivateKey !== undefined) {
    const pem = read('admin_private_key', paths.adminPrivateKey);
    try {
      writeToken = adminTokenSigner(pem);
    } catch (e) {
      throw new RangeError(`${section} admin_private_key ${paths.adminPrivateKey}: ${(e as Error).message}`, {
        cause: e,
      });
    }
  }
  const tls: GrpcTlsOptions = {
    ...(paths.caCert !== undefined && { caCert: read('ca_cert', paths.caCert) }),
    ...(paths.clientCert !== undefined &&
      paths.clientKey !== undefined && {
        clientCert: {
          certChain: read('client_cert', paths.clientCert),
          privateKey: read('client_key', paths.clientKey),
        },
      }),
  };
  return { tls, ...(writeToken !== undefined && { writeToken }) };
}

/** The client of `[attestation_service] type = "coco_as_grpc"`, its credential files read now. */
export function openGrpcAttestationService(config: RemoteAsConfig, logger?: Logger): AttestationService {
  const { tls, writeToken } = readRemoteCredentials(config, '[attestation_service]');
  return createGrpcAttestationService({
    asAddr: config.asAddr,
    poolSize: config.poolSize,
    tls,
    ...(writeToken !== undefined && { writeToken }),
    ...(logger !== undefined && { logger }),
  });
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
export async function connectGrpcRvps(
  address: string,
  remote: RemoteCredentials = { tls: {} },
): Promise<RemoteRvps> {
  const { target: t, credentials } = grpcTarget(
    address,
    remote.tls,
    '[attestation_service.rvps_config] address',
  );
  const presentsCredential = remote.writeToken !== undefined || remote.tls.clientCert !== undefined;
  const client = new reference.ReferenceValueProviderServiceClient(t, credentials, CHANNEL_OPTIONS);
  const call = <Req, Res>(
    method: (
      req: Req,
      md: Metadata,
      opts: { deadline: Date },
      cb: (e: ServiceError | null, r?: Res) => void,
    ) => unknown,
    req: Req,
    md = new Metadata(),
  ) =>
    new Promise<Res>((resolve, reject) =>
      method(req, md, { deadline: new Date(Date.now() + RVPS_QUERY_DEADLINE_MS) }, (e, r) =>
        e
          ? reject(new RvpsError('RECORD_CORRUPT', `remote RVPS at ${address}: ${describe(e)}`, { cause: e }))
          : resolve(r as Res),
      ),
    );
  const rvps: RemoteRvps = {
    async register(message) {
      const md = new Metadata();
      if (remote.writeToken !== undefined) md.set('authorization', `Bearer ${await remote.writeToken()}`);
      try {
        await call(client.registerReferenceValue.bind(client), { message }, md);
      } catch (e) {
        const cause = e instanceof Error ? e.cause : undefined;
        const refused =
          typeof cause === 'object' && cause !== null && 'code' in cause
            ? refusal('the reference value', cause as ServiceError, presentsCredential, {
                service: 'RVPS',
                section: '[attestation_service.rvps_config]',
              })
            : undefined;
        throw refused ?? e;
      }
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
