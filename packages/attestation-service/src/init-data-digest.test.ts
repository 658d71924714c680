// trustee's `init_data_digest` (the other arm of `init_data` beside `init_data_toml`): the digest is
// compared as given with what the evidence binds (here an SNP report's HOST_DATA from the mock TEE),
// `init_data_claims` is null, and like every field of a verification request it may come on any of
// them, through the gRPC and the RESTful front ends alike.
import { createHash, createPublicKey } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SnpAttester } from '@broker/attester';
import { createLogger } from '@broker/cli';
import { type MockSnpDevice, startMockSnpDevice } from '@broker/mock-tee';
import { canonicalJson } from '@broker/protocol';
import { attestation } from '@broker/trustee-protos';
import { credentials, Metadata, type ServiceError, status } from '@grpc/grpc-js';
import { compactVerify, decodeProtectedHeader, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAsConfig } from './config.js';
import { type RunningAsGrpcServer, startAsGrpcServer } from './grpc.js';
import { type RunningRestServer, startAsRestServer } from './rest.js';
import { type OpenedAttestationService, openAttestationService } from './service.js';

const silent = createLogger({
  name: 'attestation-service',
  env: { RUST_LOG: 'off' },
  format: 'json',
  destination: { write() {} },
});

const INITDATA = 'version = "0.1.0"\nalgorithm = "sha384"\n[data]\n"aa.toml" = ""\n';
// kata writes the first 32 bytes of the SHA-384 digest into HOST_DATA; the AS is given all 48.
const DIGEST = createHash('sha384').update(INITDATA).digest();
const RUNTIME_DATA = { nonce: 'digest-nonce', 'tee-pubkey': { kty: 'EC' } };
const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

async function annotated(token: string, submod = 'cpu0') {
  const header = decodeProtectedHeader(token);
  const key = createPublicKey({ key: header.jwk as JWK as never, format: 'jwk' });
  const { payload } = await compactVerify(token, key);
  return JSON.parse(Buffer.from(payload).toString('utf8')).submods[submod]['ear.veraison.annotated-evidence'];
}

describe('attestation service: init_data_digest', () => {
  let stateDir: string;
  let device: MockSnpDevice;
  let opened: OpenedAttestationService;
  let grpc: RunningAsGrpcServer;
  let rest: RunningRestServer;
  let client: attestation.AttestationServiceClient;
  let snpEvidence: string;

  beforeAll(async () => {
    stateDir = await mkdtemp(join(tmpdir(), 'as-initdata-digest-'));
    device = await startMockSnpDevice({ stateDir, initDataDigest: DIGEST });
    const reportData = createHash('sha384').update(canonicalJson(RUNTIME_DATA)).digest();
    const evidence = await new SnpAttester({ tsmRoot: device.tsmRoot, env: {} }).getEvidence(reportData);
    snpEvidence = b64url(evidence);
    const config = parseAsConfig({
      verifier_config: { snp_verifier: { trusted_ark_paths: [device.rootsBundlePath] } },
    });
    opened = await openAttestationService(config, silent);
    grpc = await startAsGrpcServer({ service: opened.service, rvps: opened.rvps, address: '127.0.0.1:0' });
    rest = await startAsRestServer(opened, '127.0.0.1:0');
    client = new attestation.AttestationServiceClient(`127.0.0.1:${grpc.port}`, credentials.createInsecure());
  });
  afterAll(async () => {
    client?.close();
    await grpc?.close();
    await rest?.close();
    await opened?.close();
    device?.close();
    await rm(stateDir, { recursive: true, force: true });
  });

  const evaluate = (verificationRequests: attestation.IndividualAttestationRequest[]) =>
    new Promise<string>((resolve, reject) =>
      client.attestationEvaluate(
        { verificationRequests, policyIds: [] },
        new Metadata(),
        { deadline: Date.now() + 30_000 },
        (e, r) => (e ? reject(e) : resolve((r as attestation.AttestationResponse).attestationToken)),
      ),
    );
  const refusal = (verificationRequests: attestation.IndividualAttestationRequest[]) =>
    evaluate(verificationRequests).then(
      () => {
        throw new Error('expected a refusal');
      },
      (e: ServiceError) => e,
    );
  const snp = (initDataDigest?: Buffer | string): attestation.IndividualAttestationRequest => ({
    tee: 'snp',
    evidence: snpEvidence,
    structuredRuntimeData: JSON.stringify(RUNTIME_DATA),
    runtimeDataHashAlgorithm: 'sha384',
    ...(initDataDigest !== undefined && {
      initDataDigest:
        typeof initDataDigest === 'string' ? initDataDigest : initDataDigest.toString('base64url'),
    }),
  });

  it('gRPC: the digest HOST_DATA binds is accepted, init_data_claims is null', async () => {
    const ev = await annotated(await evaluate([snp(DIGEST)]));
    expect(ev.init_data).toBe(DIGEST.subarray(0, 32).toString('hex'));
    expect(ev.init_data_claims).toBeNull();
    expect(ev.runtime_data_claims).toEqual(RUNTIME_DATA);
  });

  it('gRPC: another digest is refused by the verifier', async () => {
    const other = Buffer.from(DIGEST);
    other[0] = (other[0] as number) ^ 1;
    const e = await refusal([snp(other)]);
    expect(e.code).toBe(status.ABORTED);
    expect(e.details).toMatch(/snp evidence rejected: .*HOST_DATA differs from the initdata digest/);
  });

  it('gRPC: the TOML the digest came from binds the same, and its data become init_data_claims', async () => {
    const { initDataDigest: _, ...request } = snp(DIGEST);
    const ev = await annotated(await evaluate([{ ...request, initDataToml: INITDATA }]));
    expect(ev.init_data).toBe(DIGEST.subarray(0, 32).toString('hex'));
    expect(ev.init_data_claims).toEqual({ 'aa.toml': {} });
  });

  it.each([
    ['not base64url', 'ab+/', /base64 decode init data: not URL-safe base64/],
    ['empty', '', /an initdata digest has 1 to 64 bytes, got 0/],
    ['longer than any TEE binds', Buffer.alloc(65, 1).toString('base64url'), /1 to 64 bytes, got 65/],
  ])('gRPC: a digest that is %s is refused', async (_name, digest, message) => {
    const e = await refusal([snp(digest)]);
    expect(e.code).toBe(status.ABORTED);
    expect(e.details).toMatch(message);
  });

  it('gRPC: a digest on an additional verification request goes to its verifier', async () => {
    const sample = {
      tee: 'sample',
      evidence: b64url({ svn: '1', report_data: '' }),
      runtimeDataHashAlgorithm: '',
      initDataDigest: Buffer.alloc(32, 5).toString('base64url'),
    };
    const token = await evaluate([snp(DIGEST), sample]);
    // The sample verifier reports the digest it was given; nothing else could have told it.
    expect((await annotated(token, 'cpu1')).init_data).toBe(Buffer.alloc(32, 5).toString('base64'));
    expect((await annotated(token, 'cpu0')).init_data).toBe(DIGEST.subarray(0, 32).toString('hex'));
  });

  it('REST: init_data {init_data_digest} is the same check', async () => {
    const post = (digest: Buffer) =>
      fetch(`http://127.0.0.1:${rest.port}/attestation`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          verification_requests: [
            {
              tee: 'snp',
              evidence: snpEvidence,
              runtime_data: { structured: RUNTIME_DATA },
              runtime_data_hash_algorithm: 'sha384',
              init_data: { init_data_digest: digest.toString('base64url') },
            },
          ],
          policy_ids: [],
        }),
      });
    const ok = await post(DIGEST);
    expect(ok.status).toBe(200);
    expect((await annotated(await ok.text())).init_data_claims).toBeNull();
    const bad = await post(Buffer.alloc(48, 0));
    expect(bad.status).not.toBe(200);
    expect(await bad.text()).toMatch(/HOST_DATA differs from the initdata digest/);
  });
});
