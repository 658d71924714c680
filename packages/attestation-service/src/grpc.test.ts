import { createPublicKey } from 'node:crypto';
import { createLogger } from '@broker/cli';
import { RvpsClient } from '@broker/rvps-core';
import { attestation } from '@broker/trustee-protos';
import { credentials, Metadata, type ServiceError, status } from '@grpc/grpc-js';
import { compactVerify, decodeProtectedHeader, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAsConfig } from './config.js';
import { MAX_AS_REQUEST_BYTES, type RunningAsGrpcServer, startAsGrpcServer } from './grpc.js';
import { type OpenedAttestationService, openAttestationService } from './service.js';
import { SVN_POLICY, sampleEvidenceRequest } from './testing/index.js';

const silent = createLogger({
  name: 'attestation-service',
  env: { RUST_LOG: 'off' },
  format: 'json',
  destination: { write() {} },
});

function call<Req, Res>(
  fn: (req: Req, md: Metadata, opts: object, cb: (e: ServiceError | null, r?: Res) => void) => unknown,
  req: Req,
): Promise<Res> {
  return new Promise((resolve, reject) =>
    fn(req, new Metadata(), { deadline: Date.now() + 30_000 }, (e, r) => (e ? reject(e) : resolve(r as Res))),
  );
}

describe('grpc attestation service', () => {
  let opened: OpenedAttestationService;
  let server: RunningAsGrpcServer;
  let client: attestation.AttestationServiceClient;
  let rvps: RvpsClient;

  beforeAll(async () => {
    opened = await openAttestationService(parseAsConfig({}), silent);
    server = await startAsGrpcServer({ service: opened.service, rvps: opened.rvps, address: '127.0.0.1:0' });
    client = new attestation.AttestationServiceClient(
      `127.0.0.1:${server.port}`,
      credentials.createInsecure(),
    );
    rvps = new RvpsClient(`http://127.0.0.1:${server.port}`);
  });
  afterAll(async () => {
    client.close();
    rvps.close();
    await server.close();
    await opened.close();
  });

  const evaluate = (req: attestation.AttestationRequest) =>
    call<attestation.AttestationRequest, attestation.AttestationResponse>(
      client.attestationEvaluate.bind(client),
      req,
    );
  const setPolicy = (req: attestation.SetPolicyRequest) =>
    call<attestation.SetPolicyRequest, attestation.SetPolicyResponse>(
      client.setAttestationPolicy.bind(client),
      req,
    );

  async function claims(token: string) {
    const header = decodeProtectedHeader(token);
    const key = createPublicKey({ key: header.jwk as JWK as never, format: 'jwk' });
    const { payload } = await compactVerify(token, key);
    return JSON.parse(Buffer.from(payload).toString('utf8'));
  }

  it('evaluates sample evidence with structured runtime data into a signed EAR token', async () => {
    const runtimeData = {
      nonce: 'n-1',
      'tee-pubkey': { kty: 'EC', crv: 'P-256', alg: 'ES256', x: 'x', y: 'y' },
    };
    const { attestationToken } = await evaluate({
      verificationRequests: [sampleEvidenceRequest(runtimeData)],
      policyIds: [],
    });
    const c = await claims(attestationToken);
    expect(c.submods.cpu0['ear.appraisal-policy-id']).toBe('default');
    expect(c.submods.cpu0['ear.veraison.annotated-evidence'].runtime_data_claims).toEqual(runtimeData);
  });

  it('uses a policy set over gRPC and reference values registered over the same port', async () => {
    await setPolicy({ policyId: 'svn_cpu', policy: Buffer.from(SVN_POLICY).toString('base64url') });
    const req = { verificationRequests: [sampleEvidenceRequest({ nonce: 'n-2' }, '7')], policyIds: ['svn'] };
    const before = (await claims((await evaluate(req)).attestationToken)).submods.cpu0;
    expect(before['ear.trustworthiness-vector'].executables).toBe(33);
    await rvps.register(
      JSON.stringify({
        version: '0.1.0',
        type: 'sample',
        payload: Buffer.from('{"svn":["7"]}').toString('base64'),
      }),
    );
    const after = (await claims((await evaluate(req)).attestationToken)).submods.cpu0;
    expect(after['ear.trustworthiness-vector'].executables).toBe(2);
    expect(after['ear.appraisal-policy-id']).toBe('svn');
  });

  it('compares raw runtime data as-is with the report data', async () => {
    const raw = Buffer.alloc(48, 7);
    const evidence = Buffer.from(JSON.stringify({ svn: '1', report_data: raw.toString('base64') })).toString(
      'base64url',
    );
    const base = { tee: 'sample', evidence, runtimeDataHashAlgorithm: '' };
    const { attestationToken } = await evaluate({
      verificationRequests: [{ ...base, rawRuntimeData: raw.toString('base64url') }],
      policyIds: [],
    });
    expect((await claims(attestationToken)).submods.cpu0['ear.status']).toBeTypeOf('string');
    const other = Buffer.alloc(48, 8).toString('base64url');
    const e = (await evaluate({
      verificationRequests: [{ ...base, rawRuntimeData: other }],
      policyIds: [],
    }).catch((err: unknown) => err)) as ServiceError;
    expect(e.details).toMatch(/^Attestation evaluation failed: \n0: sample evidence rejected/);
  });

  it('without runtime data (raw nor structured) skips the report data check: runtime_data_claims is null', async () => {
    // What the attestation agent's coco_as token sends: evidence bound to nothing the AS is given.
    const evidence = Buffer.from(
      JSON.stringify({ svn: '1', report_data: Buffer.alloc(64, 9).toString('base64') }),
    ).toString('base64url');
    const { attestationToken } = await evaluate({
      verificationRequests: [{ tee: 'sample', evidence, runtimeDataHashAlgorithm: '' }],
      policyIds: [],
    });
    const annotated = (await claims(attestationToken)).submods.cpu0['ear.veraison.annotated-evidence'];
    expect(annotated.runtime_data_claims).toBeNull();
    expect(annotated.report_data).toBe(Buffer.alloc(64, 9).toString('base64'));
  });

  it.each([
    ['no requests', { verificationRequests: [], policyIds: [] }, /^Attestation evaluation failed: \n0: /],
    [
      'an unknown TEE',
      { verificationRequests: [{ ...sampleEvidenceRequest({}), tee: 'sev' }], policyIds: [] },
      /^parse TEE type: Unsupported TEE type: "sev"/,
    ],
    [
      'evidence that is not base64url',
      { verificationRequests: [{ ...sampleEvidenceRequest({}), evidence: '{"svn":"1"}' }], policyIds: [] },
      /^Illegal input Evidence/,
    ],
    [
      'evidence bound to other runtime data',
      {
        verificationRequests: [{ ...sampleEvidenceRequest({ a: 1 }), structuredRuntimeData: '{"a":2}' }],
        policyIds: [],
      },
      /^Attestation evaluation failed: \n0: sample evidence rejected/,
    ],
    [
      'an unknown hash algorithm',
      {
        verificationRequests: [{ ...sampleEvidenceRequest({}), runtimeDataHashAlgorithm: 'md5' }],
        policyIds: [],
      },
      /^parse runtime data HashAlgorithm failed/,
    ],
    [
      'a policy id that cannot name a file',
      { verificationRequests: [sampleEvidenceRequest({})], policyIds: ['../x'] },
      /^Attestation evaluation failed: \n0: /,
    ],
  ])('refuses %s with ABORTED', async (_what, req, message) => {
    const e = (await evaluate(req as attestation.AttestationRequest).catch(
      (err: unknown) => err,
    )) as ServiceError;
    expect(e.code).toBe(status.ABORTED);
    expect(e.details).toMatch(message);
  });

  it('refuses a policy that does not compile, and an oversized request with RESOURCE_EXHAUSTED', async () => {
    const bad = (await setPolicy({
      policyId: 'p',
      policy: Buffer.from('package policy\nallow if {').toString('base64url'),
    }).catch((err: unknown) => err)) as ServiceError;
    expect(bad.code).toBe(status.ABORTED);
    expect(bad.details).toMatch(/^Set Attestation Policy Failed: /);
    const big = (await evaluate({
      verificationRequests: [{ ...sampleEvidenceRequest({}), evidence: 'A'.repeat(MAX_AS_REQUEST_BYTES) }],
      policyIds: [],
    }).catch((err: unknown) => err)) as ServiceError;
    expect(big.code).toBe(status.RESOURCE_EXHAUSTED);
  });

  it('answers the challenge API: empty for TEEs without one, refusals as trustee words them', async () => {
    const challenge = (inner: Record<string, string>) =>
      call<attestation.ChallengeRequest, attestation.ChallengeResponse>(
        client.getAttestationChallenge.bind(client),
        {
          inner,
        },
      );
    expect(await challenge({ tee: 'tdx', tee_params: '{}' })).toEqual({ attestationChallenge: '' });
    const e = (await challenge({ tee: 'tdx' }).catch((err: unknown) => err)) as ServiceError;
    expect(e.details).toBe('Error parse inner_tee tee_params');
  });
});

describe('grpc attestation service, malformed messages', () => {
  it('answers bytes that are not a protobuf message with a status, and keeps serving', async () => {
    const { makeGenericClientConstructor } = await import('@grpc/grpc-js');
    const opened = await openAttestationService(parseAsConfig({}), silent);
    const server = await startAsGrpcServer({
      service: opened.service,
      rvps: opened.rvps,
      address: '127.0.0.1:0',
    });
    const identity = (b: Buffer) => b;
    const Raw = makeGenericClientConstructor(
      {
        evaluate: {
          path: '/attestation.AttestationService/AttestationEvaluate',
          requestStream: false,
          responseStream: false,
          requestSerialize: identity,
          requestDeserialize: identity,
          responseSerialize: identity,
          responseDeserialize: identity,
        },
      },
      'Raw',
    );
    const raw = new Raw(`127.0.0.1:${server.port}`, credentials.createInsecure()) as unknown as {
      evaluate(req: Buffer, cb: (e: ServiceError | null) => void): void;
      close(): void;
    };
    // A length prefix past the end; a nested message that claims more than it has; an invalid wire type.
    for (const bytes of [
      Buffer.from([0x0a, 0x7f, 0x01]),
      Buffer.from([0x0a, 0x02, 0x0a, 0x10]),
      Buffer.from([0x0f]),
    ]) {
      const e = await new Promise<ServiceError | null>((resolve) => raw.evaluate(bytes, resolve));
      expect(e?.code).toBe(status.INTERNAL);
    }
    raw.close();
    const client = new attestation.AttestationServiceClient(
      `127.0.0.1:${server.port}`,
      credentials.createInsecure(),
    );
    const ok = await new Promise<attestation.ChallengeResponse | undefined>((resolve, reject) =>
      client.getAttestationChallenge({ inner: { tee: 'snp', tee_params: '{}' } }, (e, r) =>
        e ? reject(e) : resolve(r),
      ),
    );
    expect(ok).toEqual({ attestationChallenge: '' });
    client.close();
    await server.close();
    await opened.close();
  });
});
