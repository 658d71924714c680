// trustee's grpc-as front end (attestation-service/src/bin/grpc/mod.rs): attestation.AttestationService,
// plus the RVPS service on the same port, over @grpc/grpc-js.

import { AttestationFailed, type AttestationService } from '@broker/attestation';
import { grpcWriteCredentials, OPEN_WRITES, WriteAuthError, type WriteAuthorizer } from '@broker/auth';
import type { Logger } from '@broker/cli';
import { isTee, type ReportDataHashAlgorithm, type Tee } from '@broker/protocol';
import {
  type RunningGrpcServer,
  type Rvps,
  rvpsHandlers,
  type ServerTls,
  serveGrpc,
  writeRefusal,
} from '@broker/rvps-core';
import { attestation, reference } from '@broker/trustee-protos';
import { Server, type ServerUnaryCall, type sendUnaryData, status } from '@grpc/grpc-js';
import { AttestationServiceError } from './errors.js';

/**
 * Largest request accepted: evidence of a TPM or a GPU with its certificate chains fits in well under
 * this. grpc-js refuses a larger one with RESOURCE_EXHAUSTED before a handler runs.
 */
export const MAX_AS_REQUEST_BYTES = 8 * 1024 * 1024;
/** More evidence items than this in one request is not a real platform. */
export const MAX_VERIFICATION_REQUESTS = 65;

/** The TEE names trustee's grpc-as accepts (its `to_kbs_tee`). */
export const GRPC_AS_TEES: readonly string[] = [
  'sgx',
  'snp',
  'tdx',
  'csv',
  'sample',
  'az-snp-vtpm',
  'cca',
  'az-tdx-vtpm',
  'se',
  'hygondcu',
  'nvidia',
  'tpm',
];

export class Aborted extends AttestationServiceError {
  override readonly name: string = 'Aborted';
  constructor(message: string) {
    super('REQUEST_ABORTED', message);
  }
}

function b64urlDecode(text: string, what: string): Buffer {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) {
    throw new Aborted(`${what}: not URL-safe base64 without padding`);
  }
  return Buffer.from(text, 'base64url');
}

function teeOf(name: string, tees: readonly string[]): Tee {
  if (!tees.includes(name) || !isTee(name)) {
    throw new Aborted(`parse TEE type: Unsupported TEE type: ${JSON.stringify(name.slice(0, 64))}`);
  }
  return name;
}

function hashAlgorithm(name: string): ReportDataHashAlgorithm {
  if (name === '') return 'sha384';
  if (name === 'sha256' || name === 'sha384' || name === 'sha512') return name;
  throw new Aborted(`parse runtime data HashAlgorithm failed: ${JSON.stringify(name.slice(0, 32))}`);
}

function evidenceOf(text: string): unknown {
  const bytes = b64urlDecode(text, 'Illegal input Evidence');
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch (e) {
    throw new Aborted(`failed to parse tee evidence: ${(e as Error).message}`);
  }
}

function structured(text: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new Aborted(`parse structured runtime data: ${(e as Error).message}`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new Aborted('parse structured runtime data: not a JSON object');
  }
  return v as Record<string, unknown>;
}

/** An anyhow-style cause chain: `0: outer\n1: cause…`. */
export function causeChain(e: unknown): string {
  const lines: string[] = [];
  let cur: unknown = e;
  for (let i = 0; cur !== undefined && i < 8; i++) {
    lines.push(`${i}: ${cur instanceof Error ? cur.message : String(cur)}`);
    cur = cur instanceof Error ? cur.cause : undefined;
  }
  return lines.join('\n');
}

/** Builds the service's request from trustee's: the first entry is the primary evidence, the rest additional. */
export function verifyRequestOf(req: attestation.AttestationRequest, tees: readonly string[] = GRPC_AS_TEES) {
  const items = req.verificationRequests;
  const first = items[0];
  if (first === undefined) throw new Aborted('Attestation evaluation failed: \n0: no verification requests');
  if (items.length > MAX_VERIFICATION_REQUESTS) {
    throw new Aborted(
      `Attestation evaluation failed: \n0: more than ${MAX_VERIFICATION_REQUESTS} verification requests`,
    );
  }
  const decoded = items.map((item) => {
    const tee = teeOf(item.tee, tees);
    const evidence = evidenceOf(item.evidence);
    const alg = hashAlgorithm(item.runtimeDataHashAlgorithm);
    // Neither raw nor structured: trustee's ReportData::NotProvided, the report data is not checked.
    const notProvided = item.rawRuntimeData === undefined && item.structuredRuntimeData === undefined;
    return {
      tee,
      evidence,
      alg,
      runtimeData: item.structuredRuntimeData !== undefined ? structured(item.structuredRuntimeData) : {},
      ...(item.rawRuntimeData !== undefined && {
        rawReportData: b64urlDecode(item.rawRuntimeData, 'base64 decode runtime data'),
      }),
      initData: item.initDataToml === undefined ? null : { format: 'toml', body: item.initDataToml },
      ...(item.initDataDigest !== undefined && {
        initDataDigest: b64urlDecode(item.initDataDigest, 'base64 decode init data'),
      }),
      ...(notProvided && { runtimeDataNotProvided: true }),
    };
  });
  const [{ alg, ...primary }, ...additional] = decoded as [(typeof decoded)[number], ...typeof decoded];
  return {
    ...primary,
    runtimeDataHashAlgorithm: alg,
    additional: additional.map(({ alg: a, ...d }) => ({ ...d, runtimeDataHashAlgorithm: a })),
    policyIds: req.policyIds.length === 0 ? ['default'] : req.policyIds,
  };
}

function fail<T>(callback: sendUnaryData<T>, details: string): void {
  callback({ code: status.ABORTED, details });
}

const SET_POLICY_PATH = '/attestation.AttestationService/SetAttestationPolicy';

/**
 * trustee's handlers; SetAttestationPolicy first passes `auth` (refused with UNAUTHENTICATED or
 * PERMISSION_DENIED), evaluation and challenges are open as upstream.
 */
export function attestationHandlers(
  service: AttestationService,
  logger?: Logger,
  auth: WriteAuthorizer = OPEN_WRITES,
): attestation.AttestationServiceServer {
  return {
    attestationEvaluate(
      call: ServerUnaryCall<attestation.AttestationRequest, attestation.AttestationResponse>,
      callback: sendUnaryData<attestation.AttestationResponse>,
    ) {
      let request: ReturnType<typeof verifyRequestOf>;
      try {
        request = verifyRequestOf(call.request);
      } catch (e) {
        return fail(callback, (e as Error).message);
      }
      service.verify(request).then(
        (token) => callback(null, { attestationToken: token }),
        (e: unknown) => {
          if (!(e instanceof AttestationFailed))
            logger?.error({ err: causeChain(e) }, 'attestation evaluation error');
          fail(callback, `Attestation evaluation failed: \n${causeChain(e)}`);
        },
      );
    },

    setAttestationPolicy(
      call: ServerUnaryCall<attestation.SetPolicyRequest, attestation.SetPolicyResponse>,
      callback: sendUnaryData<attestation.SetPolicyResponse>,
    ) {
      let who: string;
      try {
        who = auth.check(SET_POLICY_PATH, grpcWriteCredentials(call));
      } catch (e) {
        if (!(e instanceof WriteAuthError)) throw e;
        logger?.warn({ err: e.message, peer: call.getPeer() }, 'set attestation policy refused');
        return callback(writeRefusal(e));
      }
      const { policyId, policy } = call.request;
      let rego: string;
      try {
        rego = b64urlDecode(policy, 'Base64 decode policy').toString('utf8');
      } catch (e) {
        return fail(callback, `Set Attestation Policy Failed: ${(e as Error).message}`);
      }
      service.setPolicy(policyId, rego).then(
        () => {
          logger?.info({ policyId: policyId.slice(0, 100), by: who }, 'attestation policy set');
          callback(null, {});
        },
        (e: unknown) => fail(callback, `Set Attestation Policy Failed: ${(e as Error).message}`),
      );
    },

    getAttestationChallenge(
      call: ServerUnaryCall<attestation.ChallengeRequest, attestation.ChallengeResponse>,
      callback: sendUnaryData<attestation.ChallengeResponse>,
    ) {
      const inner = call.request.inner;
      const tee = inner.tee;
      if (tee === undefined) return fail(callback, 'Error parse inner_tee tee');
      if (inner.tee_params === undefined) return fail(callback, 'Error parse inner_tee tee_params');
      if (!GRPC_AS_TEES.includes(tee)) {
        return fail(
          callback,
          `Error parse TEE type: Unsupported TEE type: ${JSON.stringify(tee.slice(0, 64))}`,
        );
      }
      // Only IBM SE has a supplemental challenge upstream; every other TEE answers an empty one.
      if (tee === 'se') return fail(callback, 'Challenge: the se verifier is not available in this service');
      callback(null, { attestationChallenge: '' });
    },
  };
}

export interface AsGrpcServerOptions {
  readonly service: AttestationService;
  readonly rvps: Rvps;
  /** `host:port`; port 0 picks a free one. */
  readonly address: string;
  readonly logger?: Logger;
  /**
   * PEM certificate chain and private key: serve TLS (HTTP/2 over TLS) instead of plaintext; with a
   * client CA, client certificates are requested (not required) for writes.
   */
  readonly tls?: ServerTls;
  /** Who may set policies and register reference values; anyone when absent (trustee's behaviour). */
  readonly auth?: WriteAuthorizer;
  /** Overrides how long a connection on the port has to show its protocol or send its HTTP/1.1 request. */
  readonly connectionTimeoutMs?: number;
}

/** Where trustee's grpc-as serves the token signer's JWK Set over plain HTTP/1.1, beside gRPC. */
export const JWKS_PATH = '/.well-known/jwks.json';

/** The token signer's public key as a JWK Set (empty when tokens are unsigned), as the REST AS serves it. */
export function signerJwks(service: AttestationService): { keys: unknown[] } {
  return { keys: service.signerPublicJwk === undefined ? [] : [service.signerPublicJwk] };
}

export type RunningAsGrpcServer = RunningGrpcServer;

export async function startAsGrpcServer(options: AsGrpcServerOptions): Promise<RunningAsGrpcServer> {
  const server = new Server({
    'grpc.max_receive_message_length': MAX_AS_REQUEST_BYTES,
    'grpc.max_send_message_length': MAX_AS_REQUEST_BYTES,
  });
  server.addService(
    attestation.AttestationServiceService,
    attestationHandlers(options.service, options.logger, options.auth),
  );
  server.addService(
    reference.ReferenceValueProviderServiceService,
    rvpsHandlers(options.rvps, options.logger, options.auth),
  );
  return serveGrpc(server, {
    address: options.address,
    tls: options.tls,
    healthServices: ['attestation.AttestationService', 'reference.ReferenceValueProviderService'],
    http1: {
      routes: new Map([[JWKS_PATH, () => signerJwks(options.service)]]),
      ...(options.connectionTimeoutMs !== undefined && { timeoutMs: options.connectionTimeoutMs }),
    },
    logger: options.logger,
  });
}
