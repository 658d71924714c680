// Two attestation services (grpc-as / restful-as) on one PostgreSQL database with the built-in RVPS, as
// replicas behind one Service: a policy set and reference values registered through one are used by
// the other's very next appraisal (a shared store is read on every use, not cached for a second).
import { createPublicKey } from 'node:crypto';
import { createLogger } from '@broker/cli';
import { type PostgresServer, startPostgresServer } from '@broker/kv-storage/testing';
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

let db: PostgresServer;
beforeAll(async () => {
  db = await startPostgresServer();
}, 60_000);
afterAll(async () => {
  await db?.dispose();
});

async function executables(token: string): Promise<number> {
  const key = createPublicKey({ key: decodeProtectedHeader(token).jwk as JWK as never, format: 'jwk' });
  const claims = JSON.parse(Buffer.from((await compactVerify(token, key)).payload).toString('utf8'));
  return claims.submods.cpu0['ear.trustworthiness-vector'].executables;
}

const message = (svn: string[]) =>
  JSON.stringify({
    version: '0.1.0',
    type: 'sample',
    payload: Buffer.from(JSON.stringify({ svn })).toString('base64'),
  });

describe('attestation services on PostgreSQL', () => {
  it("use each other's policies and reference values at the next appraisal", async () => {
    const settings = parseAsConfig({
      storage_backend: {
        storage_type: 'Postgres',
        backends: { postgres: { host: '127.0.0.1', port: db.port, password: db.password } },
      },
    });
    expect(settings.storage.storageType).toBe('Postgres');
    const [a, b] = [
      await openAttestationService(settings, silent),
      await openAttestationService(settings, silent),
    ];
    try {
      const verify = (svn: string) =>
        b.service.verify(
          verifyRequestOf({
            verificationRequests: [sampleEvidenceRequest({ nonce: 'n' }, svn)],
            policyIds: ['svn'],
          }),
        );
      await a.service.setPolicy('svn_cpu', SVN_POLICY);
      await a.rvps.register(message(['3']));
      expect(await executables(await verify('3'))).toBe(2);
      // Replaced through A: B's very next appraisal sees the new value.
      await a.rvps.register(message(['4']));
      expect(await executables(await verify('3'))).toBe(33);
      expect(await executables(await verify('4'))).toBe(2);
      await a.service.setPolicy(
        'svn_cpu',
        SVN_POLICY.replace('default executables := 33', 'default executables := 34'),
      );
      expect(await executables(await verify('3'))).toBe(34);
      expect(await db.psql("SELECT key FROM attestation_service_policy WHERE key = 'svn_cpu.rego'")).toBe(
        'svn_cpu.rego\n',
      );
    } finally {
      await a.close();
      await b.close();
    }
  });
});
