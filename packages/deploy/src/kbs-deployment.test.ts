// The rendered deployment run for real: every Secret and ConfigMap laid out the way kubelet mounts them
// (a `..data` symlink to a timestamped directory, one symlink per key), the rendered kbs-config.toml with
// its paths under a temporary root, and our KBS started on it.
import { createPrivateKey, sign } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseKbsConfigText, type RunningKbs, startKbs } from '@broker/kbs';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseBrokerConfig } from './broker-config.js';
import { type KubeObject, renderBrokerConfig } from './render.js';
import { brokerConfigDoc, CLUSTER_DOMAIN, HOST, sourceSecrets } from './testing/fixtures.js';

// biome-ignore lint/suspicious/noExplicitAny: test access to nested plain JSON
type Any = any;

function kubeMount(dir: string, files: Record<string, Buffer>): void {
  const stamp = '..2026_01_01_00_00_00.000000001';
  mkdirSync(join(dir, stamp), { recursive: true });
  for (const [k, v] of Object.entries(files)) writeFileSync(join(dir, stamp, k), v);
  symlinkSync(stamp, join(dir, '..data'));
  for (const k of Object.keys(files)) symlinkSync(join('..data', k), join(dir, k));
}

function dataOf(o: Any): Record<string, Buffer> {
  const out: Record<string, Buffer> = {};
  for (const [k, v] of Object.entries(o.data ?? {})) {
    out[k] = o.kind === 'Secret' ? Buffer.from(v as string, 'base64') : Buffer.from(v as string, 'utf8');
  }
  return out;
}

/** Lays out the Deployment's volumes under `root` as kubelet would, with `extra` Secrets (the resources). */
function materialize(
  root: string,
  objects: readonly KubeObject[],
  extra: Record<string, Record<string, Buffer>>,
): void {
  const d = objects.find((o) => o.kind === 'Deployment') as Any;
  const pod = d.spec.template.spec;
  const byName = (kind: string, name: string) =>
    objects.find((o) => o.kind === kind && o.metadata.name === name);
  // Parents first, so that nested mounts land inside their emptyDir.
  const mounts = [...pod.containers[0].volumeMounts].sort(
    (a: Any, b: Any) => a.mountPath.length - b.mountPath.length,
  );
  for (const m of mounts) {
    const v = pod.volumes.find((x: Any) => x.name === m.name);
    const at = join(root, m.mountPath);
    if (v.emptyDir) {
      mkdirSync(at, { recursive: true });
      continue;
    }
    const files = v.secret
      ? (extra[v.secret.secretName] ?? dataOf(byName('Secret', v.secret.secretName)))
      : dataOf(byName('ConfigMap', v.configMap.name));
    if (m.subPath !== undefined) {
      mkdirSync(dirname(at), { recursive: true });
      writeFileSync(at, files[m.subPath] as Buffer);
    } else {
      kubeMount(at, files);
    }
  }
}

function adminToken(keyPem: string, role = 'admin'): string {
  const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const input = `${b64({ alg: 'ES256', typ: 'JWT' })}.${b64({ role, exp: Math.floor(Date.now() / 1000) + 300 })}`;
  const sig = sign('sha256', Buffer.from(input), {
    key: createPrivateKey(keyPem),
    dsaEncoding: 'ieee-p1363',
  });
  return `${input}.${sig.toString('base64url')}`;
}

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
  const toml = rendered.kbsConfigToml
    .replaceAll('"/etc/', `"${root}/etc/`)
    .replace('"0.0.0.0:8080"', '"127.0.0.1:0"')
    .replace('"0.0.0.0:9090"', '"127.0.0.1:0"');
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
