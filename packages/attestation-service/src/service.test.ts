import { createPublicKey } from 'node:crypto';
import { createLogger } from '@broker/cli';
import { MemoryStorage } from '@broker/kv-storage';
import { createRvps, type RunningRvpsServer, RvpsClient, startRvpsServer } from '@broker/rvps-core';
import { compactVerify, decodeProtectedHeader, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAsConfig } from './config.js';
import { verifyRequestOf } from './grpc.js';
import { openAttestationService } from './service.js';
import { SVN_POLICY, sampleEvidenceRequest } from './testing/index.js';

const silent = createLogger({
  name: 'attestation-service',
  env: { RUST_LOG: 'off' },
  format: 'json',
  destination: { write() {} },
});

async function payload(token: string) {
  const key = createPublicKey({ key: decodeProtectedHeader(token).jwk as JWK as never, format: 'jwk' });
  return JSON.parse(Buffer.from((await compactVerify(token, key)).payload).toString('utf8'));
}

describe('attestation service with a remote RVPS (rvps_config GrpcRemote)', () => {
  let rvpsServer: RunningRvpsServer;
  beforeAll(async () => {
    rvpsServer = await startRvpsServer({ rvps: createRvps(new MemoryStorage()), address: '127.0.0.1:0' });
  });
  afterAll(() => rvpsServer.close());

  it('looks reference values up in the RVPS process (address without scheme, as trustee accepts it)', async () => {
    const settings = parseAsConfig({
      rvps_config: { type: 'GrpcRemote', address: `127.0.0.1:${rvpsServer.port}` },
    });
    const opened = await openAttestationService(settings, silent);
    try {
      await opened.service.setPolicy('svn_cpu', SVN_POLICY);
      const client = new RvpsClient(`http://127.0.0.1:${rvpsServer.port}`);
      await client.register(
        JSON.stringify({
          version: '0.1.0',
          type: 'sample',
          payload: Buffer.from('{"svn":["3"]}').toString('base64'),
        }),
      );
      client.close();
      const req = verifyRequestOf({
        verificationRequests: [sampleEvidenceRequest({ nonce: 'r' }, '3')],
        policyIds: ['svn'],
      });
      const token = await opened.service.verify(req);
      expect((await payload(token)).submods.cpu0['ear.trustworthiness-vector'].executables).toBe(2);
    } finally {
      await opened.close();
    }
  });

  it('does not start while its RVPS is unreachable, as trustee', async () => {
    const settings = parseAsConfig({ rvps_config: { type: 'GrpcRemote', address: 'http://127.0.0.1:1' } });
    await expect(openAttestationService(settings, silent)).rejects.toThrow(/query reference value/);
  });
});
