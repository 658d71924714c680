// An Arm CCA realm attested without runtime data is refused, as trustee's cca verifier refuses
// ReportData::NotProvided: on the coco_as path (the attestation agent's coco_as client and the `cca`
// attester against the mock TEE's realm, through the RESTful service) and through trustee's gRPC
// interface. A request that does carry runtime data is still held to it.
import { createHash, createPublicKey } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getCocoAsToken } from '@broker/attestation-agent';
import { CcaAttester } from '@broker/attester';
import { createLogger } from '@broker/cli';
import { CCA_STATE_FILES, type MockCcaDevice, startMockCcaDevice } from '@broker/mock-tee';
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

const RUNTIME_DATA = { nonce: 'realm-nonce', 'tee-pubkey': { kty: 'EC' } };
const REPORT_DATA = createHash('sha384').update(canonicalJson(RUNTIME_DATA)).digest();
const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

describe('attestation service: cca without runtime data', () => {
  const savedConfig = process.env.CCA_CONFIG_FILE;
  let stateDir: string;
  let realm: MockCcaDevice;
  let opened: OpenedAttestationService;
  let rest: RunningRestServer;
  let grpc: RunningAsGrpcServer;
  let client: attestation.AttestationServiceClient;

  beforeAll(async () => {
    stateDir = await mkdtemp(join(tmpdir(), 'as-cca-'));
    realm = await startMockCcaDevice({ stateDir });
    // trustee's cca verifier reads its stores from the file CCA_CONFIG_FILE names.
    process.env.CCA_CONFIG_FILE = join(stateDir, CCA_STATE_FILES.verifierConfig);
    opened = await openAttestationService(parseAsConfig({}), silent);
    rest = await startAsRestServer(opened, '127.0.0.1:0');
    grpc = await startAsGrpcServer({ service: opened.service, rvps: opened.rvps, address: '127.0.0.1:0' });
    client = new attestation.AttestationServiceClient(`127.0.0.1:${grpc.port}`, credentials.createInsecure());
  });
  afterAll(async () => {
    client.close();
    await grpc.close();
    await rest.close();
    await opened.close();
    realm.close();
    await rm(stateDir, { recursive: true, force: true });
    if (savedConfig === undefined) delete process.env.CCA_CONFIG_FILE;
    else process.env.CCA_CONFIG_FILE = savedConfig;
  });

  const attester = () => new CcaAttester({ env: realm.env });
  async function submods(token: string) {
    const key = createPublicKey({ key: decodeProtectedHeader(token).jwk as JWK as never, format: 'jwk' });
    return JSON.parse(Buffer.from((await compactVerify(token, key)).payload).toString('utf8')).submods;
  }

  it("refuses the attestation agent's coco_as request (the realm's token over empty report data)", async () => {
    const url = `http://127.0.0.1:${rest.port}`;
    const e = await getCocoAsToken({ url, attester: attester() }).then(
      () => expect.unreachable('a token was issued'),
      (err: Error) => err,
    );
    expect(e.message).toMatch(/^Remote Attestation Failed, AS Response: /);
    expect(e.message).toMatch(/cca evidence rejected: CCA evidence needs runtime data/);
    // The same realm with structured runtime data its token is bound to gets a token.
    const evidence = b64url(await attester().getEvidence(REPORT_DATA));
    const res = await fetch(`${url}/attestation`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        verification_requests: [{ tee: 'cca', evidence, runtime_data: { structured: RUNTIME_DATA } }],
        policy_ids: [],
      }),
    });
    expect(res.status).toBe(200);
    expect(Object.keys(await submods(await res.text()))).toEqual(['cpu0']);
  });

  it('refuses it through gRPC too; a token without runtime data is refused when runtime data is provided', async () => {
    const evaluate = (item: Partial<attestation.IndividualAttestationRequest>) =>
      new Promise<string>((resolve, reject) =>
        client.attestationEvaluate(
          {
            verificationRequests: [{ tee: 'cca', evidence: '', runtimeDataHashAlgorithm: 'sha384', ...item }],
            policyIds: [],
          },
          new Metadata(),
          { deadline: Date.now() + 30_000 },
          (err, r) => (err ? reject(err) : resolve(r!.attestationToken)),
        ),
      );
    const details = (item: Partial<attestation.IndividualAttestationRequest>) =>
      evaluate(item).then(
        () => expect.unreachable('a token was issued'),
        (err: ServiceError) => {
          expect(err.code).toBe(status.ABORTED);
          return err.details;
        },
      );
    const unbound = b64url(await attester().getEvidence(new Uint8Array(0)));
    const bound = b64url(await attester().getEvidence(REPORT_DATA));
    for (const evidence of [unbound, bound]) {
      expect(await details({ evidence })).toMatch(
        /^Attestation evaluation failed: \n0: cca evidence rejected: CCA evidence needs runtime data/,
      );
    }
    expect(await details({ evidence: unbound, structuredRuntimeData: JSON.stringify(RUNTIME_DATA) })).toMatch(
      /cca evidence rejected: CCA realm challenge is not the expected report data/,
    );
    const token = await evaluate({ evidence: bound, structuredRuntimeData: JSON.stringify(RUNTIME_DATA) });
    expect((await submods(token)).cpu0['ear.veraison.annotated-evidence'].cca.realm).toMatchObject({
      'cca-realm-challenge': Buffer.concat([REPORT_DATA, Buffer.alloc(16)]).toString('base64'),
    });
  });
});
