// The rendered deployment run for real: every Secret and ConfigMap laid out the way kubelet mounts them
// (a `..data` symlink to a timestamped directory, one symlink per key), the rendered kbs-config.toml with
// its paths under a temporary root, and our KBS started on it.
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseKbsConfigText, type RunningKbs, startKbs } from '@broker/kbs';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseBrokerConfig } from './broker-config.js';
import { renderBrokerConfig } from './render.js';
import { brokerConfigDoc, CLUSTER_DOMAIN, HOST, sourceSecrets } from './testing/fixtures.js';
import { adminToken, localKbsConfig, materialize } from './testing/kubelet.js';

let root: string;
let kbs: RunningKbs;
let port: number;
let httpsCert: string;
let tokenKey: string;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'deploy-kbs-'));
  const { secrets, certs } = await sourceSecrets();
  httpsCert = certs.https.certPem;
  tokenKey = certs.token.keyPem;
  const rendered = renderBrokerConfig(parseBrokerConfig(brokerConfigDoc()), {
    clusterDomain: CLUSTER_DOMAIN,
    secrets,
  });
  materialize(root, rendered.objects, {
    'attestation-status': { status: Buffer.from('success') },
    kbsres1: { key1: Buffer.alloc(32, 7) },
  });
  const toml = localKbsConfig(rendered.kbsConfigToml, root);
  kbs = await startKbs(parseKbsConfigText(toml), { logger: pino({ level: 'silent' }) });
  port = kbs.addresses[0]?.port as number;
}, 30_000);

afterAll(async () => {
  await kbs?.close();
  rmSync(root, { recursive: true, force: true });
});

function get(path: string, token?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        // The client checks the certificate against the route host, as a guest does.
        servername: HOST,
        ca: httpsCert,
        headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
      },
      (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('the rendered deployment runs our KBS', () => {
  it('serves HTTPS with the certificate of the route host', async () => {
    expect(await get('/healthz')).toMatchObject({ status: 200 });
  });

  it('admin API: a token signed with the token key and role admin is accepted, others are not', async () => {
    const rv = await get('/kbs/v0/reference-value/snp_pcr08', adminToken(tokenKey));
    expect(rv.status).toBe(200);
    expect(JSON.parse(rv.body)).toEqual([]);
    expect((await get('/kbs/v0/reference-value/snp_pcr08')).status).toBe(401);
    expect((await get('/kbs/v0/reference-value/snp_pcr08', adminToken(tokenKey, 'viewer'))).status).toBe(401);
    const { certs } = await sourceSecrets();
    // The HTTPS key is not an admin credential.
    expect(() => adminToken(certs.https.keyPem)).not.toThrow();
    expect((await get('/kbs/v0/reference-value/snp_pcr08', adminToken(certs.https.keyPem))).status).toBe(401);
  });

  it('loaded the reference values of the mounted ConfigMap, and only known names answer', async () => {
    const names = ['snp_pcr03', 'snp_pcr08', 'snp_pcr09', 'snp_pcr11', 'snp_pcr12', 'tdx_pcr03', 'tdx_pcr12'];
    for (const n of names)
      expect((await get(`/kbs/v0/reference-value/${n}`, adminToken(tokenKey))).status, n).toBe(200);
    expect((await get('/kbs/v0/reference-value/snp_pcr99', adminToken(tokenKey))).status).toBe(401);
  });

  it('a resource request without attestation is refused', async () => {
    expect((await get('/kbs/v0/resource/default/attestation-status/status')).status).toBe(401);
  });
});
