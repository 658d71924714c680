// dist/bin/kbs as one KBS on several cores (`worker_count`, node:cluster workers on Redis), and its hot
// reload of mounted files (a kubelet-style `..data` swap of the TLS Secret and of a resource Secret).
import { X509Certificate } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { jweDecrypt } from '@broker/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binary, freePort, runToEnd, start, waitForListen } from './helpers/process.js';
import { prepareReplicas, type RedisProcess, sampleGuest, startRedis } from './helpers/replicas.js';
import { openssl } from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-kbs-workers-'));
let redis: RedisProcess;

beforeAll(async () => {
  redis = await startRedis(join(dir, 'redis'));
});
afterAll(async () => {
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function eventually(probe: () => Promise<boolean>): Promise<void> {
  while (!(await probe())) await new Promise((r) => setTimeout(r, 50));
}

describe('worker_count: one KBS on several processes', () => {
  it('serves handshakes from both workers, which share the sessions through Redis, and stops cleanly', async () => {
    const set = await prepareReplicas(join(dir, 'workers'), redis.url, 1, { workerCount: 2 });
    const kbs = set.replicas[0]!;
    await kbs.start();
    try {
      const file = join(set.dir, 'secret');
      writeFileSync(file, 'from a worker');
      const put = await set.admin(kbs, 'set-resource', '--path', 'default/w/secret', '--resource-file', file);
      expect(put.code, put.stderr).toBe(0);
      const pol = await set.admin(kbs, 'set-resource-policy', '--allow-all');
      expect(pol.code, pol.stderr).toBe(0);
      // Every request is a new connection, so the primary hands them to the workers in turn: the three
      // steps of a handshake regularly land on different workers.
      for (let i = 0; i < 12; i++) {
        const guest = sampleGuest(set.ca);
        const auth = await guest.auth(kbs.url);
        expect(auth.status, auth.body).toBe(200);
        const attest = await guest.attest(kbs.url, auth.cookie, auth.nonce);
        expect(attest.status, attest.body).toBe(200);
        const res = await guest.resource(kbs.url, 'default/w/secret', { cookie: auth.cookie });
        expect(res.status, res.body).toBe(200);
        expect(Buffer.from(jweDecrypt(JSON.parse(res.body), guest.key.privateKey)).toString()).toBe(
          'from a worker',
        );
      }
      const servedBy = new Set(
        kbs
          .process!.output()
          .split('\n')
          .filter((l) => l.includes('"msg":"access"'))
          .map((l) => (JSON.parse(l) as { pid: number }).pid),
      );
      expect(servedBy.size).toBe(2);
    } finally {
      const code = await kbs.process!.stop('SIGTERM');
      expect(code).toBe(0);
    }
  });

  it('refuses several workers when the sessions would be private to each process', async () => {
    const config = join(dir, 'memory.toml');
    writeFileSync(
      config,
      '[http_server]\ninsecure_http = true\nworker_count = 2\n[admin]\nauthorization_mode = "DenyAll"\n',
    );
    const r = await runToEnd(binary('kbs'), ['--config-file', config]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /worker_count = 2 needs state shared between worker processes.*Redis.*or set worker_count = 1/,
    );
  });
});

/** kubelet's atomic update of a mounted volume: new hidden dir, `..data` swapped, visible symlinks. */
function kubeMount(mount: string, files: Record<string, string | Buffer>, generation: number): void {
  mkdirSync(mount, { recursive: true });
  const stamp = `..2025_01_0${generation}`;
  mkdirSync(join(mount, stamp));
  for (const [name, content] of Object.entries(files)) writeFileSync(join(mount, stamp, name), content);
  const tmpLink = join(mount, '..data_tmp');
  rmSync(tmpLink, { force: true });
  symlinkSync(stamp, tmpLink);
  renameSync(tmpLink, join(mount, '..data'));
  for (const name of Object.keys(files)) {
    try {
      symlinkSync(join('..data', name), join(mount, name));
    } catch {
      // already a symlink through ..data
    }
  }
}

function certOf(url: string): Promise<string> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const s = connect({ host: u.hostname, port: Number(u.port), rejectUnauthorized: false }, () => {
      resolve(new X509Certificate(s.getPeerCertificate().raw).fingerprint256);
      s.end();
    });
    s.on('error', reject);
  });
}

describe('hot reload of mounted files by the kbs executable', () => {
  it('serves a swapped TLS certificate and swapped resource content without a restart', async () => {
    const base = join(dir, 'reload');
    mkdirSync(base, { recursive: true });
    const pair = (name: string) => {
      const key = join(base, `${name}.key`);
      const cert = join(base, `${name}.crt`);
      openssl(
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-days',
        '2',
        '-keyout',
        key,
        '-out',
        cert,
        '-subj',
        `/CN=${name}`,
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      );
      return { key: readFileSync(key), cert: readFileSync(cert) };
    };
    const a = pair('tls-a');
    const b = pair('tls-b');
    const tlsMount = join(base, 'https');
    kubeMount(tlsMount, { 'tls.key': a.key, 'tls.crt': a.cert }, 1);
    const resMount = join(base, 'resources', 'default', 'app-secret');
    kubeMount(resMount, { key: 'generation 1' }, 1);
    const policyMount = join(base, 'resource-policy');
    kubeMount(policyMount, { 'policy.rego': 'package policy\ndefault allow = true\n' }, 1);
    const port = await freePort();
    const config = join(base, 'kbs.toml');
    writeFileSync(
      config,
      `[http_server]
sockets = ["127.0.0.1:${port}"]
private_key = "${join(tlsMount, 'tls.key')}"
certificate = "${join(tlsMount, 'tls.crt')}"
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "DenyAll"
[[plugins]]
name = "resource"
[mounted_files]
resources = ["${join(base, 'resources')}"]
resource_policy = "${policyMount}"
`,
    );
    const kbs = start(binary('kbs'), ['--config-file', config]);
    try {
      await waitForListen({ port }, kbs);
      const url = `https://127.0.0.1:${port}`;
      expect(await certOf(url)).toBe(new X509Certificate(a.cert).fingerprint256);
      const fetch = async (ca: Buffer) => {
        const guest = sampleGuest(ca.toString());
        const auth = await guest.auth(url);
        const attest = await guest.attest(url, auth.cookie, auth.nonce);
        const res = await guest.resource(url, 'default/app-secret/key', { cookie: auth.cookie });
        expect(attest.status, attest.body).toBe(200);
        return res.status === 200
          ? Buffer.from(jweDecrypt(JSON.parse(res.body), guest.key.privateKey)).toString()
          : '';
      };
      expect(await fetch(a.cert)).toBe('generation 1');

      kubeMount(tlsMount, { 'tls.key': b.key, 'tls.crt': b.cert }, 2);
      await eventually(async () => (await certOf(url)) === new X509Certificate(b.cert).fingerprint256);
      kubeMount(resMount, { key: 'generation 2' }, 2);
      await eventually(async () => (await fetch(b.cert)) === 'generation 2');
      expect(kbs.output()).toContain('TLS certificate reloaded');
    } finally {
      expect(await kbs.stop()).toBe(0);
    }
  });
});
