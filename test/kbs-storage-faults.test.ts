// dist/bin/kbs on a volume that fails: full (a small tmpfs), read-only (the tmpfs remounted), and killed
// with SIGKILL in the middle of writes. The operator's answers name the storage cause, deleting still
// frees space on a full LocalJson volume, guests still attest and fetch from a read-only store, and a
// restart removes the temp files the killed writes left. Mounting needs root; elsewhere this is skipped.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jweDecrypt } from '@broker/protocol';
import { afterAll, describe, expect, it } from 'vitest';
import { binary, freePort, type Running, start, waitForListen } from './helpers/process.js';
import { call, sampleGuest } from './helpers/replicas.js';
import { makeServerCert } from './helpers/tls.js';

const ROOT = process.getuid?.() === 0;
const dir = mkdtempSync(join(tmpdir(), 'broker-kbs-storage-faults-'));
const mounts: string[] = [];
afterAll(() => {
  for (const m of mounts.reverse()) execFileSync('umount', ['-l', m]);
  rmSync(dir, { recursive: true, force: true });
});

/** A tmpfs of `size` at a new directory. */
function tmpfs(name: string, size: string): string {
  const m = join(dir, name);
  mkdirSync(m);
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', m]);
  mounts.push(m);
  return m;
}

/** Fills the volume of `mount` with a file of its own until a write fails with ENOSPC. */
function fill(mount: string): void {
  const chunk = Buffer.alloc(4096, 1);
  for (let i = 0; ; i++) {
    try {
      writeFileSync(join(mount, `filler-${i}`), chunk);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOSPC') return;
      throw e;
    }
  }
}

const tls = makeServerCert(['127.0.0.1'], mkdtempSync(join(dir, 'tls-')));

interface Kbs {
  readonly url: string;
  readonly process: Running;
  admin(method: string, path: string, body?: string | Buffer): Promise<{ status: number; body: string }>;
  /** Handshake as a sample guest, then GET the resource: its value, or the error status and body. */
  fetch(path: string): Promise<string>;
}

async function startKbs(storage: string): Promise<Kbs> {
  const port = await freePort();
  const config = join(dir, `kbs-${port}.toml`);
  writeFileSync(
    config,
    `[http_server]
sockets = ["127.0.0.1:${port}"]
private_key = "${tls.keyPath}"
certificate = "${tls.certPath}"
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "InsecureAllowAll"
${storage}
[[plugins]]
name = "resource"
`,
  );
  const proc = start(binary('kbs'), ['--config-file', config]);
  await waitForListen({ port }, proc);
  const url = `https://127.0.0.1:${port}`;
  return {
    url,
    process: proc,
    admin: (method, path, body) =>
      call(tls.certPem, `${url}/kbs/v0/${path}`, method, {}, body === undefined ? undefined : String(body)),
    async fetch(path) {
      const guest = sampleGuest(tls.certPem);
      const auth = await guest.auth(url);
      if (auth.status !== 200) return `auth ${auth.status} ${auth.body}`;
      const attest = await guest.attest(url, auth.cookie, auth.nonce);
      if (attest.status !== 200) return `attest ${attest.status} ${attest.body}`;
      const r = await guest.resource(url, path, { cookie: auth.cookie });
      if (r.status !== 200) return `resource ${r.status} ${r.body}`;
      return Buffer.from(jweDecrypt(JSON.parse(r.body), guest.key.privateKey)).toString();
    },
  };
}

/** Waits for the log to show `re` (the logger writes asynchronously); the test's timeout bounds it. */
async function logged(kbs: Kbs, re: RegExp): Promise<void> {
  while (!re.test(kbs.process.output())) await new Promise((r) => setTimeout(r, 50));
}

const localFs = (d: string) =>
  `[storage_backend]\nstorage_type = "LocalFs"\n[storage_backend.backends.local_fs]\ndir_path = "${d}"`;
const localJson = (d: string) =>
  `[storage_backend]\nstorage_type = "LocalJson"\n[storage_backend.backends.local_json]\nfile_dir_path = "${d}"`;
const b64u = (s: string) => Buffer.from(s).toString('base64url');
const ALLOW_ALL = JSON.stringify({ policy: b64u('package policy\ndefault allow := true\n') });
const detail = (body: string) => (JSON.parse(body) as { detail: string }).detail;

describe.skipIf(!ROOT)('KBS storage faults, real processes', () => {
  it('on a full LocalFs volume names ENOSPC in the answer and the log, and guests still attest', async () => {
    const volume = tmpfs('full-fs', '2m');
    const kbs = await startKbs(localFs(join(volume, 'store')));
    try {
      expect((await kbs.admin('POST', 'resource-policy', ALLOW_ALL)).status).toBe(200);
      expect((await kbs.admin('POST', 'resource/default/app/key', 'before')).status).toBe(200);
      fill(volume);
      const write = await kbs.admin('POST', 'resource/default/app/other', 'x'.repeat(64 * 1024));
      expect(write.status).toBe(401);
      expect(detail(write.body)).toMatch(/storage volume is full \(ENOSPC\)/);
      const policy = await kbs.admin(
        'POST',
        'attestation-policy',
        JSON.stringify({
          policy_id: 'p',
          policy: b64u(`package policy\ntrust_claims := {}\n# ${'x'.repeat(64 * 1024)}\n`),
        }),
      );
      expect(policy.status, policy.body).toBe(401);
      expect(detail(policy.body)).toMatch(/Set Attestation Policy failed: .*\(ENOSPC\)/);
      await logged(kbs, /"storage":"ENOSPC"/);
      // The sessions are not on the volume: guests attest and fetch as before.
      expect(await kbs.fetch('default/app/key')).toBe('before');
      // Deleting frees space.
      expect((await kbs.admin('DELETE', 'resource/default/app/key')).status).toBe(200);
    } finally {
      expect(await kbs.process.stop()).toBe(0);
    }
  });

  it('on a full LocalJson volume still deletes a resource, which frees space for the next write', async () => {
    const volume = tmpfs('full-json', '2m');
    const store = join(volume, 'store');
    const kbs = await startKbs(localJson(store));
    try {
      expect((await kbs.admin('POST', 'resource-policy', ALLOW_ALL)).status).toBe(200);
      expect((await kbs.admin('POST', 'resource/default/app/big', 'b'.repeat(256 * 1024))).status).toBe(200);
      expect((await kbs.admin('POST', 'resource/default/app/small', 'kept')).status).toBe(200);
      fill(volume);
      const del = await kbs.admin('DELETE', 'resource/default/app/big');
      expect(del.status, del.body).toBe(200);
      expect(Object.keys(JSON.parse(readFileSync(join(store, 'repository'), 'utf8')))).toEqual([
        'default/app/small',
      ]);
      expect(await kbs.fetch('default/app/small')).toBe('kept');
      expect(await kbs.fetch('default/app/big')).toMatch(/^resource 401/);
      expect((await kbs.admin('POST', 'resource/default/app/more', 'm'.repeat(4096))).status).toBe(200);
      fill(volume);
      const refused = await kbs.admin('POST', 'resource/default/app/again', 'm'.repeat(4096));
      expect(refused.status).toBe(401);
      expect(detail(refused.body)).toMatch(/\(ENOSPC\)/);
    } finally {
      expect(await kbs.process.stop()).toBe(0);
    }
  });

  it('on a read-only volume serves guests and names EROFS to the operator', async () => {
    const volume = tmpfs('read-only', '4m');
    const kbs = await startKbs(localFs(join(volume, 'store')));
    try {
      expect((await kbs.admin('POST', 'resource-policy', ALLOW_ALL)).status).toBe(200);
      expect((await kbs.admin('POST', 'resource/default/app/key', 'served')).status).toBe(200);
      execFileSync('mount', ['-o', 'remount,ro', volume]);
      expect(await kbs.fetch('default/app/key')).toBe('served');
      const write = await kbs.admin('POST', 'resource/default/app/key', 'new');
      expect(write.status).toBe(401);
      expect(detail(write.body)).toMatch(/storage volume is read-only \(EROFS\)/);
      await logged(kbs, /"storage":"EROFS"/);
    } finally {
      expect(await kbs.process.stop()).toBe(0);
      execFileSync('mount', ['-o', 'remount,rw', volume]);
    }
  });

  it.each([
    ['LocalFs', localFs],
    ['LocalJson', localJson],
  ])('%s: a restart removes the temp files of writes killed by SIGKILL', async (_, storage) => {
    const store = join(dir, `killed-${_}`);
    const temps = (): string[] => {
      const found: string[] = [];
      const walk = (d: string) => {
        if (!existsSync(d)) return;
        for (const e of readdirSync(d, { withFileTypes: true })) {
          if (e.isDirectory()) walk(join(d, e.name));
          else if (e.name.endsWith('.tmp')) found.push(join(d, e.name));
        }
      };
      walk(store);
      return found;
    };
    const value = Buffer.alloc(1024 * 1024, 7).toString('base64');
    // Kill the KBS while writers keep it busy, until some writes were caught half done.
    for (let kill = 0; kill < 40 && temps().length === 0; kill++) {
      const kbs = await startKbs(storage(store));
      let killed = false;
      // Each writer posts again as soon as the last post is answered, until the KBS is gone.
      const writers = Array.from({ length: 3 }, async (_, i) => {
        while (!killed) {
          await kbs.admin('POST', `resource/default/w/k${i}`, value).catch(() => undefined);
        }
      });
      await new Promise((r) => setTimeout(r, 50 + ((kill * 37) % 200)));
      killed = true;
      await kbs.process.stop('SIGKILL');
      await Promise.all(writers);
    }
    const left = temps();
    expect(left.length).toBeGreaterThan(0);
    // LocalFs is shared with other processes, so it removes only temp files too old to be a live write's:
    // age them as a crash some time ago would have.
    const old = new Date(Date.now() - 3600_000);
    for (const t of left) utimesSync(t, old, old);
    const kbs = await startKbs(storage(store));
    try {
      expect(temps()).toEqual([]);
    } finally {
      expect(await kbs.process.stop()).toBe(0);
    }
  });
});
