/**
 * GPG simple signing end to end with independent peers: Debian's gpg makes
 * the keys, skopeo (`copy --sign-by`) signs an image it pushes to Debian's
 * docker-registry and writes the signature into a file lookaside store
 * configured by registries.d. Our `image-policy check` and pull accept it
 * under `signedBy`, reject it under another key and reject a signature whose
 * payload names another image; skopeo's own verdicts (containers/image)
 * agree. The same signatures are then served from an http lookaside and
 * through the registry signature API (`X-Registry-Supports-Signatures`).
 */
import { readFileSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  buildImage,
  buildLayer,
  ImagePullError,
  loadRegistriesD,
  lookasideTopLevel,
  parseImageReference,
  parsePolicy,
  pullImage,
  writeDirImage,
} from '@broker/image';
import {
  createGpgHome,
  type GpgHome,
  type RunningRegistry,
  runTool,
  startDockerRegistry,
} from '@broker/image/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { imagePolicyMain, imagePullMain } from './cli.js';

let registry: RunningRegistry;
let gpg: GpgHome;
let work: string;
let signer: string;
let other: string;
let regd: string;
let sigs: string;
let digest: string;

function io() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    io: { stdout: (t: string) => out.push(t), stderr: (t: string) => err.push(t), env: {} },
  };
}

async function policyFile(name: string, keyFingerprint: string, extra: Record<string, unknown> = {}) {
  const key = join(work, `${keyFingerprint}.gpg`);
  await writeFile(key, await gpg.exportKey(keyFingerprint));
  const file = join(work, name);
  await writeFile(
    file,
    JSON.stringify({
      default: [{ type: 'reject' }],
      transports: {
        docker: {
          [`${registry.host}/ns`]: [{ type: 'signedBy', keyType: 'GPGKeys', keyPath: key, ...extra }],
        },
      },
    }),
  );
  return file;
}

async function check(policy: string, image: string, registriesD = regd) {
  const c = io();
  const code = await imagePolicyMain(
    ['check', '--policy', policy, '--registries.d', registriesD, '--plain-http', `docker://${image}`],
    c.io,
  );
  return { code, out: c.out.join(''), err: c.err.join('') };
}

async function skopeoVerdict(policy: string, image: string, registriesD = regd) {
  const dest = await mkdtemp(join(work, 'skopeo-dest-'));
  const r = await runTool('skopeo', [
    '--policy',
    policy,
    '--registries.d',
    registriesD,
    'copy',
    '--src-tls-verify=false',
    `docker://${image}`,
    `dir:${dest}`,
  ]);
  await rm(dest, { recursive: true, force: true });
  return r;
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'gpg-skopeo-'));
  registry = await startDockerRegistry();
  gpg = await createGpgHome();
  signer = await gpg.generateKey('Skopeo Signer <signer@example.test>');
  other = await gpg.generateKey('Other <other@example.test>');
  sigs = join(work, 'sigs');
  regd = join(work, 'registries.d');
  await mkdir(regd);
  await writeFile(
    join(regd, 'default.yaml'),
    `default-docker:\n  lookaside: file://${sigs}\n  lookaside-staging: file://${sigs}\n`,
  );
  const layer = await buildLayer([{ name: 'hello.txt', content: 'signed by gpg through skopeo\n' }]);
  const image = buildImage({ layers: [layer] });
  const dir = join(work, 'image');
  await writeDirImage(dir, image);
  const push = (ref: string, sign: boolean) =>
    runTool(
      'skopeo',
      [
        '--registries.d',
        regd,
        'copy',
        '--dest-tls-verify=false',
        ...(sign ? ['--sign-by', signer] : []),
        `dir:${dir}`,
        `docker://${registry.host}/${ref}`,
      ],
      gpg.env,
    );
  const signed = await push('ns/app:v1', true);
  expect(signed.code, signed.stderr).toBe(0);
  // The same manifest under another name, unsigned: the app's signature names ns/app:v1.
  const unsigned = await push('ns/other:v1', false);
  expect(unsigned.code, unsigned.stderr).toBe(0);
  const stored = await readdir(join(sigs, 'ns'));
  expect(stored).toHaveLength(1);
  digest = (stored[0] as string).replace(/^app@sha256=/, 'sha256:');
  // A signature that vouches for this digest but names another image.
  await mkdir(join(sigs, 'ns', `other@sha256=${digest.slice(7)}`), { recursive: true });
  await copyFile(
    join(sigs, 'ns', stored[0] as string, 'signature-1'),
    join(sigs, 'ns', `other@sha256=${digest.slice(7)}`, 'signature-1'),
  );
}, 120_000);

afterAll(async () => {
  await registry?.stop();
  await gpg?.close();
  if (work !== undefined) await rm(work, { recursive: true, force: true });
});

describe('skopeo --sign-by signatures in a file lookaside', () => {
  it('skopeo wrote signature-1 under <store>/<repo>@sha256=<hex>/', () => {
    expect(digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    const blob = readFileSync(join(sigs, 'ns', `app@sha256=${digest.slice(7)}`, 'signature-1'));
    expect(blob[0]).toBeGreaterThanOrEqual(0x80); // a raw OpenPGP message
  });

  it('image-policy check accepts it under signedBy with the signing key, as skopeo does', async () => {
    const policy = await policyFile('right.json', signer);
    const r = await check(policy, `${registry.host}/ns/app:v1`);
    expect(r.code, r.out + r.err).toBe(0);
    expect(r.out).toContain(`requirement 1: signedBy (keyPath`);
    expect(r.out).toContain(`accepted (signature for ${registry.host}/ns/app:v1)`);
    expect(r.out).toContain(`manifest: ${digest}`);
    const theirs = await skopeoVerdict(policy, `${registry.host}/ns/app:v1`);
    expect(theirs.code, theirs.stderr).toBe(0);
  });

  it('another key rejects, as skopeo does', async () => {
    const policy = await policyFile('wrong.json', other);
    const r = await check(policy, `${registry.host}/ns/app:v1`);
    expect(r.code).toBe(1);
    expect(r.out).toMatch(
      /signedBy .*: rejected: Invalid GPG signature: signed by key [0-9A-F]{16}, which is not among the trusted keys/,
    );
    const theirs = await skopeoVerdict(policy, `${registry.host}/ns/app:v1`);
    expect(theirs.code).not.toBe(0);
    expect(theirs.stderr).toContain('Source image rejected');
  });

  it('a signature whose payload names another image rejects, as skopeo does', async () => {
    const policy = await policyFile('right2.json', signer);
    const r = await check(policy, `${registry.host}/ns/other:v1`);
    expect(r.code).toBe(1);
    expect(r.out).toContain(`rejected: Signature for identity "${registry.host}/ns/app:v1" is not accepted`);
    const theirs = await skopeoVerdict(policy, `${registry.host}/ns/other:v1`);
    expect(theirs.code).not.toBe(0);
    // containers/image 5.23 (Debian's skopeo) does not quote the identity yet; later releases do, as we do.
    expect(theirs.stderr).toContain(`Signature for identity ${registry.host}/ns/app:v1 is not accepted`);
  });

  it('without --registries.d there is no lookaside: no signature exists', async () => {
    const policy = await policyFile('right3.json', signer);
    const empty = await mkdtemp(join(work, 'empty-regd-'));
    const r = await check(policy, `${registry.host}/ns/app:v1`, empty);
    expect(r.code).toBe(1);
    expect(r.out).toContain('rejected: A signature was required, but no signature exists');
  });

  it('the older sigstore: key of a per-namespace docker: entry is read too', async () => {
    const older = await mkdtemp(join(work, 'regd-sigstore-'));
    await writeFile(
      join(older, 'ns.yaml'),
      `docker:\n  ${registry.host}/ns:\n    sigstore: file://${sigs}\n`,
    );
    const cfg = await loadRegistriesD(older);
    expect(lookasideTopLevel(cfg, parseImageReference(`${registry.host}/ns/app:v1`))).toBe(`file://${sigs}`);
    const r = await check(await policyFile('right4.json', signer), `${registry.host}/ns/app:v1`, older);
    expect(r.code, r.out).toBe(0);
  });

  it('pullImage and image-pull accept it, and refuse it under another key with image-rs’ text', async () => {
    const registriesD = await loadRegistriesD(regd);
    const key = join(work, `${signer}.gpg`);
    const policy = parsePolicy(
      JSON.stringify({ default: [{ type: 'signedBy', keyType: 'GPGKeys', keyPath: key }] }),
    );
    const bundle = await mkdtemp(join(work, 'bundle-'));
    const result = await pullImage(`${registry.host}/ns/app:v1`, bundle, {
      policy,
      registriesD,
      registry: { insecure: () => true },
    });
    expect(result.manifestDigest).toBe(digest);
    expect(readFileSync(join(bundle, 'rootfs', 'hello.txt'), 'utf8')).toBe('signed by gpg through skopeo\n');

    const wrong = parsePolicy(
      JSON.stringify({
        default: [
          { type: 'signedBy', keyType: 'GPGKeys', keyData: (await gpg.exportKey(other)).toString('base64') },
        ],
      }),
    );
    const bundle2 = await mkdtemp(join(work, 'bundle-'));
    const e = await pullImage(`${registry.host}/ns/app:v1`, bundle2, {
      policy: wrong,
      registriesD,
      registry: { insecure: () => true },
    }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ImagePullError);
    expect((e as ImagePullError).message).toBe(
      'Image policy rejected: Denied by policy: rejected by `signedBy` rule',
    );
    expect(await readdir(bundle2)).toEqual([]);

    const c = io();
    const bundle3 = await mkdtemp(join(work, 'bundle-'));
    const code = await imagePullMain(
      [
        '--policy',
        await policyFile('pull.json', signer),
        '--registries.d',
        regd,
        '--plain-http',
        '--no-progress',
        `docker://${registry.host}/ns/app:v1`,
        bundle3,
      ],
      c.io,
    );
    expect(code, c.err.join('')).toBe(0);
    expect(c.out.join('')).toBe(`${digest}\n`);
  }, 60_000);
});

describe('bad input through the command line and the pull', () => {
  it('a lookaside signature with a trailing packet is refused with the reason, and nothing is unpacked', async () => {
    const tampered = await mkdtemp(join(work, 'sigs-tampered-'));
    const from = join(sigs, 'ns', `app@sha256=${digest.slice(7)}`);
    const to = join(tampered, 'ns', `app@sha256=${digest.slice(7)}`);
    await mkdir(to, { recursive: true });
    // A literal data packet (new format, tag 11) after skopeo's signed message.
    const extra = Buffer.from([0xcb, 0x07, 0x62, 0x00, 0, 0, 0, 0, 0x78]);
    await writeFile(join(to, 'signature-1'), Buffer.concat([readFileSync(join(from, 'signature-1')), extra]));
    const tamperedRegd = await mkdtemp(join(work, 'regd-tampered-'));
    await writeFile(join(tamperedRegd, 'default.yaml'), `default-docker:\n  lookaside: file://${tampered}\n`);
    const policy = await policyFile('tampered.json', signer);
    const r = await check(policy, `${registry.host}/ns/app:v1`, tamperedRegd);
    expect(r.code).toBe(1);
    expect(r.out).toContain('rejected: Invalid GPG signature');

    const bundle = await mkdtemp(join(work, 'bundle-'));
    const e = await pullImage(`${registry.host}/ns/app:v1`, bundle, {
      policy: parsePolicy(
        JSON.stringify({
          default: [{ type: 'signedBy', keyType: 'GPGKeys', keyPath: join(work, `${signer}.gpg`) }],
        }),
      ),
      registriesD: await loadRegistriesD(tamperedRegd),
      registry: { insecure: () => true },
    }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ImagePullError);
    expect((e as ImagePullError).stage).toBe('policy');
    expect((e as ImagePullError).detail).toMatch(/^Invalid GPG signature/);
    expect(await readdir(bundle)).toEqual([]);
  });

  it('a registries.d file that does not parse is a runtime failure (exit 1) naming the file', async () => {
    const bad = await mkdtemp(join(work, 'regd-bad-'));
    await writeFile(join(bad, 'broken.yaml'), 'docker: [\n');
    const r = await check(await policyFile('bad-regd.json', signer), `${registry.host}/ns/app:v1`, bad);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/Error loading registries configuration ".*broken.yaml"/);
  });
});

/** Serves `root` over http (the lookaside store), 404 for what is missing. */
async function serveFiles(root: string): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    try {
      const body = readFileSync(join(root, decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname)));
      res.writeHead(200).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe('other signature sources', () => {
  it('an http:// lookaside store', async () => {
    const { url, server } = await serveFiles(sigs);
    try {
      const httpRegd = await mkdtemp(join(work, 'regd-http-'));
      await writeFile(join(httpRegd, 'default.yaml'), `default-docker:\n  lookaside: ${url}\n`);
      const policy = await policyFile('http.json', signer);
      expect((await check(policy, `${registry.host}/ns/app:v1`, httpRegd)).code).toBe(0);
      expect((await check(policy, `${registry.host}/ns/other:v1`, httpRegd)).out).toContain(
        'is not accepted',
      );
    } finally {
      server.close();
    }
  });

  it('the registry signature API (X-Registry-Supports-Signatures) replaces the lookaside', async () => {
    // A front for docker-registry that offers the extension, serving skopeo's signature bytes.
    const signature = readFileSync(join(sigs, 'ns', `app@sha256=${digest.slice(7)}`, 'signature-1'));
    const served: string[] = [];
    const front = createServer((req, res) => {
      const path = req.url ?? '/';
      if (path.startsWith('/extensions/v2/')) {
        served.push(path);
        const list = path === `/extensions/v2/ns/app/signatures/${digest}` ? [signature] : [];
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            signatures: list.map((s) => ({
              schemaVersion: 2,
              type: 'atomic',
              name: `${digest}@0123456789abcdef0123456789abcdef`,
              content: s.toString('base64'),
            })),
          }),
        );
        return;
      }
      const up = httpRequest(
        { host: '127.0.0.1', port: registry.port, path, method: req.method, headers: req.headers },
        (upRes) => {
          const headers = { ...upRes.headers };
          if (path === '/v2/') headers['x-registry-supports-signatures'] = '1';
          res.writeHead(upRes.statusCode ?? 502, headers);
          upRes.pipe(res);
        },
      );
      req.pipe(up);
    });
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
    const host = `127.0.0.1:${(front.address() as AddressInfo).port}`;
    try {
      // A lookaside that would give nothing: the API must be what answers.
      const empty = await mkdtemp(join(work, 'regd-empty-'));
      const key = join(work, `${signer}.gpg`);
      const policy = join(work, 'xrss.json');
      await writeFile(
        policy,
        JSON.stringify({ default: [{ type: 'signedBy', keyType: 'GPGKeys', keyPath: key }] }),
      );
      const ok = await check(policy, `${host}/ns/app:v1`, empty);
      // The payload names the registry it was pushed to, so judge identity by repository here.
      expect(ok.out).toContain(`Signature for identity "${registry.host}/ns/app:v1" is not accepted`);
      const byRepo = join(work, 'xrss-remap.json');
      await writeFile(
        byRepo,
        JSON.stringify({
          default: [
            {
              type: 'signedBy',
              keyType: 'GPGKeys',
              keyPath: key,
              signedIdentity: { type: 'remapIdentity', prefix: host, signedPrefix: registry.host },
            },
          ],
        }),
      );
      const r = await check(byRepo, `${host}/ns/app:v1`, empty);
      expect(r.code, r.out).toBe(0);
      expect(served).toContain(`/extensions/v2/ns/app/signatures/${digest}`);
      const none = await check(byRepo, `${host}/ns/other:v1`, empty);
      expect(none.out).toContain('A signature was required, but no signature exists');
    } finally {
      front.close();
    }
  });
});
