import { createPublicKey } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLogger } from '@broker/cli';
import { parseSnpReport, SNP_REPORT_SIZE, sevJsonFromReport } from '@broker/verifier';
import { compactVerify, decodeProtectedHeader, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAsConfig } from './config.js';
import { MAX_REST_BODY_BYTES, type RunningRestServer, startAsRestServer } from './rest.js';
import { type OpenedAttestationService, openAttestationService } from './service.js';
import { SVN_POLICY, sampleEvidenceRequest } from './testing/index.js';

const silent = createLogger({
  name: 'attestation-service',
  env: { RUST_LOG: 'off' },
  format: 'json',
  destination: { write() {} },
});

describe('restful attestation service', () => {
  let opened: OpenedAttestationService;
  let server: RunningRestServer;
  let base: string;
  beforeAll(async () => {
    opened = await openAttestationService(parseAsConfig({}), silent);
    server = await startAsRestServer(opened, '127.0.0.1:0');
    base = `http://127.0.0.1:${server.port}`;
  });
  afterAll(async () => {
    await server.close();
    await opened.close();
  });

  const post = (path: string, body: unknown) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });

  function restItem(runtimeData: Record<string, unknown>, svn = '1') {
    const g = sampleEvidenceRequest(runtimeData, svn);
    return { tee: 'sample', evidence: g.evidence, runtime_data: { structured: runtimeData } };
  }

  it('POST /attestation answers the raw token, which the JWKS route verifies', async () => {
    const res = await post('/attestation', {
      verification_requests: [restItem({ nonce: 'r1' })],
      policy_ids: [],
    });
    expect(res.status).toBe(200);
    const token = await res.text();
    const jwks = (await (await fetch(`${base}/.well-known/jwks.json`)).json()) as { keys: JWK[] };
    expect(jwks.keys).toHaveLength(1);
    expect(decodeProtectedHeader(token).jwk).toMatchObject({ x: jwks.keys[0]?.x, y: jwks.keys[0]?.y });
    const { payload } = await compactVerify(
      token,
      createPublicKey({ key: jwks.keys[0] as never, format: 'jwk' }),
    );
    const claims = JSON.parse(Buffer.from(payload).toString('utf8'));
    expect(claims.submods.cpu0['ear.veraison.annotated-evidence'].runtime_data_claims).toEqual({
      nonce: 'r1',
    });
  });

  it("lists trustee's policy for each TEE class at start: cpu, gpu, NVSwitch and PPCIE", async () => {
    const list = (await (await fetch(`${base}/policy`)).json()) as { 'policy-id': string }[];
    expect(list.map((p) => p['policy-id'])).toEqual(
      expect.arrayContaining(['default_cpu', 'default_gpu', 'default_switch', 'default_ppcie']),
    );
  });

  it('sets a policy with POST /policy, lists it with GET /policy, and evaluates with it', async () => {
    const set = await post('/policy', {
      policy_id: 'svn_cpu',
      policy: Buffer.from(SVN_POLICY).toString('base64url'),
    });
    expect(set.status).toBe(200);
    const list = (await (await fetch(`${base}/policy`)).json()) as { 'policy-id': string }[];
    expect(list.map((p) => p['policy-id'])).toContain('svn_cpu');
    await opened.rvps.register(
      JSON.stringify({
        version: '0.1.0',
        type: 'sample',
        payload: Buffer.from('{"svn":["5"]}').toString('base64'),
      }),
    );
    const res = await post('/attestation', {
      verification_requests: [restItem({ nonce: 'r2' }, '5')],
      policy_ids: ['svn'],
    });
    const token = await res.text();
    const claims = JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString('utf8'));
    expect(claims.submods.cpu0['ear.trustworthiness-vector'].executables).toBe(2);
  });

  it('answers upstream errors: 500 with the cause chain, 400 for bodies, 413 over the limit', async () => {
    const mismatch = await post('/attestation', {
      verification_requests: [{ ...restItem({ a: 1 }), runtime_data: { structured: { a: 2 } } }],
      policy_ids: [],
    });
    expect(mismatch.status).toBe(500);
    expect(await mismatch.text()).toMatch(/^An internal error occured: \n0: sample evidence rejected/);
    const tpm = await post('/attestation', {
      verification_requests: [{ ...restItem({}), tee: 'tpm' }],
      policy_ids: [],
    });
    expect(tpm.status).toBe(500);
    expect((await post('/attestation', { verification_requests: [] })).status).toBe(400);
    expect((await post('/attestation', '{')).status).toBe(400);
    expect((await post('/attestation', 'x'.repeat(MAX_REST_BODY_BYTES + 1))).status).toBe(413);
    const badPolicy = await post('/policy', {
      policy_id: 'p',
      policy: Buffer.from('package policy\nx if {').toString('base64url'),
    });
    expect(badPolicy.status).toBe(500);
  });

  it('answers the challenge, health and unknown routes', async () => {
    const ch = await post('/challenge', { tee: 'tdx', tee_params: '{}' });
    expect([ch.status, await ch.text()]).toEqual([200, '']);
    expect((await post('/challenge', { tee: 'tdx' })).status).toBe(400);
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/policy/default_cpu`)).status).toBe(404);
  });
});

describe('GET /metrics', () => {
  it('counts collateral requests that fail, by source, under the name the KBS uses', async () => {
    const kds = createServer((_req, res) => {
      res.writeHead(500, { 'content-length': 4 });
      res.end('boom');
    });
    await new Promise<void>((resolve) => kds.listen(0, '127.0.0.1', resolve));
    const { port } = kds.address() as AddressInfo;
    const opened = await openAttestationService(
      parseAsConfig({
        verifier_config: {
          snp_verifier: { vcek_sources: [{ type: 'KDS', base_url: `http://127.0.0.1:${port}` }] },
        },
      }),
      silent,
    );
    const server = await startAsRestServer(opened, '127.0.0.1:0');
    try {
      const base = `http://127.0.0.1:${server.port}`;
      const failures = async () =>
        (await (await fetch(`${base}/metrics`)).text())
          .split('\n')
          .filter((l) => l.startsWith('attestation_collateral_fetch_failures_total'));
      expect(await failures()).toEqual([]);
      // A Milan report without a certificate table and with a chip ID: its VCEK is asked of KDS first.
      const report = Buffer.alloc(SNP_REPORT_SIZE);
      report.writeUInt32LE(3, 0);
      report.writeUInt32LE(1, 0x34);
      report[0x188] = 0x19;
      report[0x189] = 0x01;
      report[0x18a] = 1;
      report.fill(0x42, 0x1a0, 0x1e0);
      const evidence = { attestation_report: sevJsonFromReport(parseSnpReport(report)), cert_chain: null };
      const res = await fetch(`${base}/attestation`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          verification_requests: [
            {
              tee: 'snp',
              evidence: Buffer.from(JSON.stringify(evidence)).toString('base64url'),
              runtime_data: { structured: { nonce: 'n' } },
            },
          ],
          policy_ids: [],
        }),
      });
      expect(res.status).toBe(500);
      expect(await failures()).toEqual(['attestation_collateral_fetch_failures_total{source="kds"} 1']);
    } finally {
      await server.close();
      await opened.close();
      await new Promise((resolve) => kds.close(resolve));
    }
  });
});
