// A GPU attested through trustee's gRPC interface without runtime data (neither raw nor structured:
// trustee's ReportData::NotProvided) is refused, as trustee's nvidia verifier refuses it; the mock
// TEE's simulated GPU supplies the reports. A GPU request that does carry runtime data is still held
// to it, alone or as additional evidence of a CPU.
import { createHash, createPublicKey } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '@broker/cli';
import { GPU_STATE_FILES, loadOrCreateGpuDevice } from '@broker/mock-tee';
import { canonicalJson } from '@broker/protocol';
import { attestation } from '@broker/trustee-protos';
import type { TestDevice } from '@broker/verifier/testing';
import { credentials, Metadata, type ServiceError, status } from '@grpc/grpc-js';
import { compactVerify, decodeProtectedHeader, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAsConfig } from './config.js';
import { type RunningAsGrpcServer, startAsGrpcServer } from './grpc.js';
import { type OpenedAttestationService, openAttestationService } from './service.js';
import { sampleEvidenceRequest } from './testing/index.js';

const silent = createLogger({
  name: 'attestation-service',
  env: { RUST_LOG: 'off' },
  format: 'json',
  destination: { write() {} },
});

const RUNTIME_DATA = { nonce: 'gpu-nonce', 'tee-pubkey': { kty: 'EC' } };
/** What the guest binds: the first 32 bytes of SHA-384 of the runtime data's JCS form. */
const BOUND_NONCE = createHash('sha384').update(canonicalJson(RUNTIME_DATA)).digest().subarray(0, 32);
/** What a GPU attested without runtime data carries. */
const ZERO_NONCE = Buffer.alloc(32);

const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

describe('grpc attestation service: nvidia without runtime data', () => {
  let stateDir: string;
  let gpu: TestDevice;
  let opened: OpenedAttestationService;
  let server: RunningAsGrpcServer;
  let client: attestation.AttestationServiceClient;

  beforeAll(async () => {
    stateDir = await mkdtemp(join(tmpdir(), 'as-nvidia-'));
    gpu = await loadOrCreateGpuDevice(stateDir);
    const config = parseAsConfig({
      verifier_config: {
        nvidia_verifier: { type: 'Local', trusted_root_paths: [join(stateDir, GPU_STATE_FILES.root)] },
      },
    });
    opened = await openAttestationService(config, silent);
    server = await startAsGrpcServer({ service: opened.service, rvps: opened.rvps, address: '127.0.0.1:0' });
    client = new attestation.AttestationServiceClient(
      `127.0.0.1:${server.port}`,
      credentials.createInsecure(),
    );
  });
  afterAll(async () => {
    client.close();
    await server.close();
    await opened.close();
    await rm(stateDir, { recursive: true, force: true });
  });

  const evaluate = (verificationRequests: attestation.IndividualAttestationRequest[]) =>
    new Promise<string>((resolve, reject) =>
      client.attestationEvaluate(
        { verificationRequests, policyIds: [] },
        new Metadata(),
        { deadline: Date.now() + 30_000 },
        (e, r) => (e ? reject(e) : resolve(r!.attestationToken)),
      ),
    );
  const refusal = (verificationRequests: attestation.IndividualAttestationRequest[]) =>
    evaluate(verificationRequests).then(
      () => expect.unreachable('a token was issued'),
      (e: ServiceError) => {
        expect(e.code).toBe(status.ABORTED);
        return e.details;
      },
    );
  async function submods(token: string) {
    const key = createPublicKey({ key: decodeProtectedHeader(token).jwk as JWK as never, format: 'jwk' });
    return JSON.parse(Buffer.from((await compactVerify(token, key)).payload).toString('utf8')).submods;
  }

  const gpuRequest = (nonce: Uint8Array, runtimeData?: Record<string, unknown>) => ({
    tee: 'nvidia',
    evidence: b64url(gpu.evidence(nonce)),
    runtimeDataHashAlgorithm: 'sha384',
    ...(runtimeData !== undefined && { structuredRuntimeData: JSON.stringify(runtimeData) }),
  });

  it('refuses GPU evidence sent without runtime data, even a report with the all-zero nonce', async () => {
    for (const nonce of [ZERO_NONCE, BOUND_NONCE]) {
      expect(await refusal([gpuRequest(nonce)])).toMatch(
        /^Attestation evaluation failed: \n0: nvidia evidence rejected: NVIDIA evidence needs runtime data/,
      );
    }
    // With its runtime data, the bound report gives gpu0 with the device's claims.
    const ok = await submods(await evaluate([gpuRequest(BOUND_NONCE, RUNTIME_DATA)]));
    expect(Object.keys(ok)).toEqual(['gpu0']);
    expect(ok.gpu0['ear.veraison.annotated-evidence'].nvidia).toMatchObject({
      arch: 'Hopper',
      uuid: gpu.evidence(BOUND_NONCE).device_evidence_list[0]!.uuid,
    });
  });

  it('refuses a GPU without runtime data as additional evidence of a CPU that has it', async () => {
    const cpu = sampleEvidenceRequest(RUNTIME_DATA);
    expect(await refusal([cpu, gpuRequest(ZERO_NONCE)])).toMatch(
      /^Attestation evaluation failed: \n0: nvidia evidence rejected: NVIDIA evidence needs runtime data/,
    );
    // The GPU's report carrying no runtime data does not pass when its request provides runtime data.
    expect(await refusal([cpu, gpuRequest(ZERO_NONCE, RUNTIME_DATA)])).toMatch(
      /nvidia evidence rejected: NVIDIA report nonce is not the expected report data/,
    );
    const ok = await submods(await evaluate([cpu, gpuRequest(BOUND_NONCE, RUNTIME_DATA)]));
    expect(Object.keys(ok).sort()).toEqual(['cpu0', 'gpu0']);
  });
});
