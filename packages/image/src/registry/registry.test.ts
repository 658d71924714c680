import { generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildImage, buildIndex, buildLayer, pushImage } from '../build.js';
import { digestOf } from '../digest.js';
import { MEDIA_TYPE } from '../manifest.js';
import { parsePolicy } from '../policy.js';
import { ImagePullError, type PullProgressEvent, pullImage } from '../pull.js';
import { createSigstoreSignature } from '../sigstore.js';
import { type FakeAuth, FakeRegistry } from '../testing/fake-registry.js';
import { parseAuthFile, parseChallenges, parseTokenResponse } from './auth.js';
import { DigestMismatchError, RegistryClient, RegistryError } from './client.js';
import { readBody } from './http.js';
import { fetchSigstoreSignatures, pushSigstoreSignatures } from './signatures.js';

const running: FakeRegistry[] = [];
const clients: RegistryClient[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const r of running.splice(0)) await r.close();
});

async function registry(auth?: FakeAuth, redirectBlobs = false): Promise<FakeRegistry> {
  const r = await FakeRegistry.start({ ...(auth !== undefined ? { auth } : {}), redirectBlobs });
  running.push(r);
  return r;
}

function client(authJson?: unknown): RegistryClient {
  const c = new RegistryClient({
    insecure: () => true,
    ...(authJson !== undefined ? { credentials: parseAuthFile(JSON.stringify(authJson)) } : {}),
  });
  clients.push(c);
  return c;
}

async function sampleImage() {
  const layer = await buildLayer([
    { name: 'etc/os-release', content: 'ID=test\n' },
    { name: 'bin/app', content: 'app', mode: 0o755 },
  ]);
  return buildImage({ layers: [layer], cmd: ['/bin/app'] });
}

const repo = (r: FakeRegistry, path = 'ns/app') => ({ domain: r.host, path });

describe('parsing helpers', () => {
  it('WWW-Authenticate challenges', () => {
    expect(
      parseChallenges(
        'Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull"',
      ),
    ).toEqual([
      {
        scheme: 'bearer',
        params: {
          realm: 'https://auth.example/token',
          service: 'registry.example',
          scope: 'repository:a/b:pull',
        },
      },
    ]);
    expect(parseChallenges('Basic realm="x \\"q\\"", Bearer realm=r')).toEqual([
      { scheme: 'basic', params: { realm: 'x "q"' } },
      { scheme: 'bearer', params: { realm: 'r' } },
    ]);
    expect(parseChallenges(undefined)).toEqual([]);
    expect(parseChallenges('=,,"')).toEqual([]);
  });

  it('auth.json: most specific key, legacy URL keys, docker.io aliases, identity tokens', () => {
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    const lookup = parseAuthFile(
      JSON.stringify({
        auths: {
          'quay.io': { auth: b64('host:pw') },
          'quay.io/ns': { auth: b64('ns:pw') },
          'quay.io/ns/repo': { auth: b64('repo:p:w') },
          'https://index.docker.io/v1/': { auth: b64('hub:pw') },
          'https://legacy.example:5000/v2/': { auth: b64('legacy:pw') },
          'tok.example': { auth: b64('u:'), identitytoken: 'refresh' },
          'empty.example': {},
        },
      }),
    );
    expect(lookup('quay.io', 'ns/repo')).toEqual({ kind: 'basic', username: 'repo', password: 'p:w' });
    expect(lookup('quay.io', 'ns/other')).toEqual({ kind: 'basic', username: 'ns', password: 'pw' });
    expect(lookup('quay.io', 'other/x')).toEqual({ kind: 'basic', username: 'host', password: 'pw' });
    expect(lookup('docker.io', 'library/busybox')).toEqual({
      kind: 'basic',
      username: 'hub',
      password: 'pw',
    });
    expect(lookup('legacy.example:5000', 'a')).toEqual({ kind: 'basic', username: 'legacy', password: 'pw' });
    expect(lookup('tok.example', 'a')).toEqual({
      kind: 'identityToken',
      username: 'u',
      identityToken: 'refresh',
    });
    expect(lookup('empty.example', 'a')).toBeUndefined();
    expect(lookup('other.example', 'a')).toBeUndefined();
    expect(() => parseAuthFile('{"auths":{"x":{"auth":"bm9jb2xvbg=="}}}')).toThrow(
      'not base64 of user:password',
    );
    expect(() => parseAuthFile('[')).toThrow('auth file is not JSON');
  });

  it('token responses: token or access_token, lifetime floor of 60 s', () => {
    const now = 1_000_000;
    expect(parseTokenResponse(Buffer.from('{"token":"t","expires_in":300}'), now)).toEqual({
      token: 't',
      expiresAt: now + 300_000,
    });
    expect(parseTokenResponse(Buffer.from('{"access_token":"a","expires_in":5}'), now)).toEqual({
      token: 'a',
      expiresAt: now + 60_000,
    });
    expect(() => parseTokenResponse(Buffer.from('{}'), now)).toThrow('token response has no token');
    expect(() => parseTokenResponse(Buffer.from('nope'), now)).toThrow('token response is not JSON');
  });
});

describe('reading', () => {
  it('anonymous manifests and blobs, checked against their digests', async () => {
    const r = await registry();
    const c = client();
    const img = await sampleImage();
    const digest = await pushImage(c, repo(r), 'v1', img);
    expect(digest).toBe(img.manifestDigest);
    const byTag = await c.getManifest(repo(r), 'v1');
    expect(byTag.digest).toBe(img.manifestDigest);
    expect(byTag.contentType).toBe(MEDIA_TYPE.ociManifest);
    const config = await c.getBlobBytes(
      repo(r),
      { mediaType: MEDIA_TYPE.ociConfig, digest: img.configDigest, size: img.config.byteLength },
      1 << 20,
    );
    expect(config.equals(img.config)).toBe(true);

    r.corrupt.add(img.manifestDigest);
    await expect(c.getManifest(repo(r), img.manifestDigest)).rejects.toBeInstanceOf(DigestMismatchError);
    r.corrupt.add('v1');
    await expect(c.getManifest(repo(r), 'v1')).rejects.toThrow(
      /Docker-Content-Digest .* does not match the content/,
    );

    r.corrupt.add(img.configDigest);
    await expect(
      c.getBlobBytes(
        repo(r),
        { mediaType: MEDIA_TYPE.ociConfig, digest: img.configDigest, size: img.config.byteLength },
        1 << 20,
      ),
    ).rejects.toThrow(/blob digest mismatch/);
    await expect(
      c.getBlobBytes(
        repo(r),
        { mediaType: MEDIA_TYPE.ociConfig, digest: img.configDigest, size: img.config.byteLength - 1 },
        1 << 20,
      ),
    ).rejects.toThrow(/larger than its declared/);
  });

  it('missing manifests are RegistryErrors with the registry code', async () => {
    const r = await registry();
    const e = await client()
      .getManifest(repo(r), 'nope')
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(RegistryError);
    expect((e as RegistryError).code).toBe('MANIFEST_UNKNOWN');
    expect((e as RegistryError).status).toBe(404);
  });

  it('refuses manifests over the size limit', async () => {
    const r = await registry();
    r.putManifest('ns/app', 'huge', Buffer.alloc(5 * 1024 * 1024, 0x20), MEDIA_TYPE.ociManifest);
    await expect(client().getManifest(repo(r), 'huge')).rejects.toThrow(/larger than 4194304 bytes/);
  });
});

describe('authentication', () => {
  const b64 = (s: string) => Buffer.from(s).toString('base64');

  it('Basic: fails without credentials, works with an auth file', async () => {
    const r = await registry({ kind: 'basic', username: 'alice', password: 's3cret' });
    const img = await sampleImage();
    r.putManifest('ns/app', 'v1', img.manifest, MEDIA_TYPE.ociManifest);
    const e = await client()
      .getManifest(repo(r), 'v1')
      .catch((x: unknown) => x);
    expect((e as RegistryError).status).toBe(401);
    const ok = await client({ auths: { [r.host]: { auth: b64('alice:s3cret') } } }).getManifest(
      repo(r),
      'v1',
    );
    expect(ok.digest).toBe(img.manifestDigest);
  });

  it('Bearer: anonymous tokens are fetched once per scope and reused', async () => {
    const r = await registry({ kind: 'bearer' });
    const c = client();
    const img = await sampleImage();
    await pushImage(c, repo(r), 'v1', img);
    const before = r.tokenRequests;
    await c.getManifest(repo(r), 'v1');
    await c.getManifest(repo(r), img.manifestDigest);
    await c.getBlobBytes(
      repo(r),
      { mediaType: MEDIA_TYPE.ociConfig, digest: img.configDigest, size: img.config.byteLength },
      1 << 20,
    );
    expect(r.tokenRequests - before).toBe(1);
    expect([...r.tokens.values()]).toContain('repository:ns/app:pull');
    expect([...r.tokens.values()]).toContain('repository:ns/app:pull,push');
  });

  it('Bearer with Basic credentials at the token endpoint', async () => {
    const r = await registry({ kind: 'bearer', username: 'bob', password: 'pw' });
    const img = await sampleImage();
    r.putManifest('ns/app', 'v1', img.manifest, MEDIA_TYPE.ociManifest);
    await expect(client().getManifest(repo(r), 'v1')).rejects.toThrow(/token request to .* failed: HTTP 401/);
    const ok = await client({ auths: { [`${r.host}/ns`]: { auth: b64('bob:pw') } } }).getManifest(
      repo(r),
      'v1',
    );
    expect(ok.digest).toBe(img.manifestDigest);
    expect(r.requests.filter((q) => q.server === 'token').at(-1)?.authorization).toBe(
      `Basic ${b64('bob:pw')}`,
    );
  });

  it('Bearer with an identity token (OAuth2 refresh grant)', async () => {
    const r = await registry({ kind: 'bearer', identityToken: 'refresh-me' });
    const img = await sampleImage();
    r.putManifest('ns/app', 'v1', img.manifest, MEDIA_TYPE.ociManifest);
    const ok = await client({
      auths: { [r.host]: { auth: b64('<token>:'), identitytoken: 'refresh-me' } },
    }).getManifest(repo(r), 'v1');
    expect(ok.digest).toBe(img.manifestDigest);
    expect(r.requests.some((q) => q.server === 'token' && q.method === 'POST')).toBe(true);
  });

  it('redirected blob downloads never carry the registry credentials', async () => {
    const r = await registry({ kind: 'bearer' }, true);
    const c = client();
    const img = await sampleImage();
    await pushImage(c, repo(r), 'v1', img);
    const layer = img.layers[0];
    if (layer === undefined) throw new Error('layer');
    const stream = await c.getBlob(repo(r), {
      mediaType: layer.mediaType,
      digest: layer.digest,
      size: layer.blob.byteLength,
    });
    expect((await readBody(stream, 1 << 20)).equals(layer.blob)).toBe(true);
    const registryGet = r.requests
      .filter((q) => q.server === 'registry' && q.method === 'GET' && q.path.includes('/blobs/'))
      .at(-1);
    expect(registryGet?.authorization).toMatch(/^Bearer /);
    const cdn = r.requests.filter((q) => q.server === 'cdn');
    expect(cdn.length).toBe(1);
    expect(cdn[0]?.authorization).toBeUndefined();
  });
});

describe('sigstore attachments', () => {
  it('are written, appended and read back; a missing .sig means no signatures', async () => {
    const r = await registry({ kind: 'bearer' });
    const c = client();
    const img = await sampleImage();
    await pushImage(c, repo(r), 'v1', img);
    expect(await fetchSigstoreSignatures(c, repo(r), img.manifestDigest)).toEqual([]);
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const s1 = createSigstoreSignature(privateKey, {
      manifestDigest: img.manifestDigest,
      dockerReference: `${r.host}/ns/app`,
    });
    const s2 = createSigstoreSignature(privateKey, {
      manifestDigest: img.manifestDigest,
      dockerReference: `${r.host}/ns/app:v1`,
    });
    await pushSigstoreSignatures(c, repo(r), img.manifestDigest, [s1]);
    await pushSigstoreSignatures(c, repo(r), img.manifestDigest, [s1, s2]);
    const back = await fetchSigstoreSignatures(c, repo(r), img.manifestDigest);
    expect(back).toHaveLength(2);
    expect(back[0]).toEqual({ ...s1, payload: Buffer.from(s1.payload) });
  });

  it('an attachment manifest of another type is an error', async () => {
    const r = await registry();
    const tag = `${digestOf(Buffer.from('x')).replace(':', '-')}.sig`;
    r.putManifest('ns/app', tag, Buffer.from('{"schemaVersion":2,"manifests":[]}'), MEDIA_TYPE.ociIndex);
    await expect(fetchSigstoreSignatures(client(), repo(r), digestOf(Buffer.from('x')))).rejects.toThrow(
      /unexpected MIME type for sigstore attachment manifest/,
    );
  });
});

describe('pullImage against the fake registry', () => {
  let keys: ReturnType<typeof generateKeyPairSync>;
  beforeAll(() => {
    keys = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  });
  const pem = () => keys.publicKey.export({ type: 'spki', format: 'pem' }).toString();

  async function workDir() {
    return mkdtemp(join(tmpdir(), 'pull-'));
  }

  it('chooses the platform of an index, verifies the signature, unpacks, and reports progress', async () => {
    const r = await registry({ kind: 'bearer' });
    const c = client();
    const amd = buildImage({ layers: [await buildLayer([{ name: 'arch', content: 'amd64' }])] });
    const arm = buildImage({
      layers: [await buildLayer([{ name: 'arch', content: 'arm64' }], 'zstd')],
      platform: { os: 'linux', architecture: 'arm64', variant: 'v8' },
    });
    await pushImage(c, repo(r), 'amd', amd);
    await pushImage(c, repo(r), 'arm', arm);
    const index = buildIndex([
      { image: amd, platform: { os: 'linux', architecture: 'amd64' } },
      { image: arm, platform: { os: 'linux', architecture: 'arm64', variant: 'v8' } },
    ]);
    await c.putManifest(repo(r), 'multi', index.bytes, MEDIA_TYPE.ociIndex);
    await pushSigstoreSignatures(c, repo(r), arm.manifestDigest, [
      createSigstoreSignature(keys.privateKey, {
        manifestDigest: arm.manifestDigest,
        dockerReference: `${r.host}/ns/app`,
      }),
    ]);
    const policy = parsePolicy(
      JSON.stringify({
        default: [{ type: 'reject' }],
        transports: {
          docker: {
            [`${r.host}/ns`]: [
              {
                type: 'sigstoreSigned',
                keyData: Buffer.from(pem()).toString('base64'),
                signedIdentity: { type: 'matchRepository' },
              },
            ],
          },
        },
      }),
    );
    const events: PullProgressEvent[] = [];
    const dir = await workDir();
    const res = await pullImage(`${r.host}/ns/app:multi`, dir, {
      client: c,
      policy,
      platform: { os: 'linux', architecture: 'arm64' },
      onProgress: (e) => events.push(e),
    });
    expect(res.manifestDigest).toBe(arm.manifestDigest);
    expect(res.indexDigest).toBe(index.digest);
    expect(readFileSync(join(dir, 'rootfs/arch'), 'utf8')).toBe('arm64');
    expect(await readdir(dir)).toEqual(['rootfs']);
    expect(events.map((e) => e.kind)).toEqual(['manifest', 'policy', 'layer', 'layer', 'layer']);
    expect(events.at(-1)).toMatchObject({ kind: 'layer', done: true });

    // amd64 has no signature, nor has the index: refused, with image-rs' words, before any layer is fetched.
    const before = r.requests.length;
    const dir2 = await workDir();
    const e = (await pullImage(`${r.host}/ns/app:multi`, dir2, {
      client: c,
      policy,
      platform: { os: 'linux', architecture: 'amd64' },
    }).catch((x: unknown) => x)) as ImagePullError;
    expect(e).toBeInstanceOf(ImagePullError);
    expect(e.message).toBe('Image policy rejected: Denied by policy: rejected by `sigstoreSigned` rule');
    expect(e.detail).toBe('A signature was required, but no signature exists');
    const after = r.requests.slice(before).filter((q) => q.path.includes('/blobs/'));
    expect(after).toEqual([]);
    expect(await readdir(dir2)).toEqual([]);

    // Signed on the index only: accepted by default (image-rs), refused under containers/image's rule.
    await pushSigstoreSignatures(c, repo(r), index.digest, [
      createSigstoreSignature(keys.privateKey, {
        manifestDigest: index.digest,
        dockerReference: `${r.host}/ns/app`,
      }),
    ]);
    const strictDir = await workDir();
    const strict = (await pullImage(`${r.host}/ns/app:multi`, strictDir, {
      client: c,
      policy,
      platform: { os: 'linux', architecture: 'amd64' },
      indexSignatures: false,
    }).catch((x: unknown) => x)) as ImagePullError;
    expect(strict).toBeInstanceOf(ImagePullError);
    expect(strict.detail).toBe('A signature was required, but no signature exists');
    expect(await readdir(strictDir)).toEqual([]);
    const dir3 = await workDir();
    const viaIndex = await pullImage(`${r.host}/ns/app:multi`, dir3, {
      client: c,
      policy,
      platform: { os: 'linux', architecture: 'amd64' },
    });
    expect(viaIndex.manifestDigest).toBe(amd.manifestDigest);
    expect(viaIndex.indexDigest).toBe(index.digest);
    expect(viaIndex.decision?.verdicts[0]?.signature?.dockerManifestDigest).toBe(index.digest);
    expect(readFileSync(join(dir3, 'rootfs/arch'), 'utf8')).toBe('amd64');
  });

  it('a reject default names the image; a tampered layer leaves nothing behind', async () => {
    const r = await registry();
    const c = client();
    const img = await sampleImage();
    await pushImage(c, repo(r), 'v1', img);
    const dir = await workDir();
    const rejectAll = parsePolicy('{"default":[{"type":"reject"}]}');
    await expect(pullImage(`${r.host}/ns/app:v1`, dir, { client: c, policy: rejectAll })).rejects.toThrow(
      `Image policy rejected: Denied by policy: Policy \`reject\` rejects image ${r.host}/ns/app:v1`,
    );
    const layer = img.layers[0];
    if (layer === undefined) throw new Error('layer');
    r.corrupt.add(layer.digest);
    const e = (await pullImage(`${r.host}/ns/app:v1`, dir, { client: c }).catch(
      (x: unknown) => x,
    )) as ImagePullError;
    expect(e.message).toMatch(
      /^Errors happened when pulling image: Failed to async pull blob stream: blob digest mismatch/,
    );
    expect(await readdir(dir)).toEqual([]);
    expect(existsSync(join(dir, 'rootfs'))).toBe(false);
    await rm(dir, { recursive: true });
  });

  it('a diff_id that does not match is refused', async () => {
    const r = await registry();
    const c = client();
    const layer = await buildLayer([{ name: 'f', content: 'f' }]);
    const wrong = digestOf(Buffer.from('not the tar'));
    const img = buildImage({ layers: [layer], diffIds: [wrong] });
    await pushImage(c, repo(r), 'bad', img);
    const dir = await workDir();
    await expect(pullImage(`${r.host}/ns/app:bad`, dir, { client: c })).rejects.toThrow(
      `Errors happened when pulling image: unequal uncompressed digest ${layer.diffId} config diff_id ${wrong}`,
    );
    expect(await readdir(dir)).toEqual([]);
  });

  it('reference and manifest failures use upstream wording', async () => {
    const r = await registry();
    const dir = await workDir();
    await expect(pullImage('UPPER/case', dir)).rejects.toThrow(/^Illegal image reference: /);
    await expect(pullImage(`${r.host}/ns/none:v1`, dir, { client: client() })).rejects.toThrow(
      /^Failed to pull image manifest: reading manifest v1 in .*MANIFEST_UNKNOWN/,
    );
  });
});
