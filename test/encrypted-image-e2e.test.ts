// Encrypted images made by independent producers, pulled by our code.
//
// 1. umoci builds a two-layer image, Debian's skopeo (ocicrypt 1.0.3) encrypts it with
//    `--encryption-key jwe:pub.pem` (an openssl RSA key; also a P-256 key) into Debian's docker-registry, and our
//    `image-pull --decryption-key jwe:priv.pem` pulls, decrypts and unpacks it. A ciphertext byte flipped
//    (re-pushed with a matching digest), a wrong key and a missing key each fail with a clear error and
//    leave no rootfs; skopeo decrypting the same image shows the producer is sound.
// 2. The `attestation-agent` key provider: a Python script (Debian's python3-cryptography, none of our
//    code) encrypts a layer and wraps its key in coco-keyprovider's packet under a KEK stored in our KBS;
//    skopeo pushes it; the CDH (real guest processes) pulls it after attestation, fetching the KEK by kid.
//    A KEK the resource policy denies, a KEK the KBS lacks, a wrong KEK and an altered ciphertext each
//    fail with image-rs' text and leave no rootfs. The CDH's keyprovider.KeyProviderService/UnWrapKey
//    opens the same packet on its socket; WrapKey answers as upstream's ttrpc server. The CDH also
//    pulls the skopeo-encrypted jwe image with the key in `[image] decryption_keys`.
// 3. Our `image-policy encrypt`: skopeo decrypts its jwe output; the CDH pulls its provider output.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataHubClient } from '@broker/guest-api';
import { digestOf, MEDIA_TYPE, parseManifest, RegistryClient, requireTool } from '@broker/image';
import { type RunningRegistry, startDockerRegistry } from '@broker/image/testing';
import { imagePolicyMain, imagePullMain } from '@broker/image-tools';
import { Code, defineProto, messageCodec, TtrpcClient, TtrpcError } from '@broker/ttrpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type GuestHandle,
  type KbsHandle,
  mustSucceed,
  prepareKbs,
  SAMPLE_REFERENCE_VALUES,
  startGuest,
} from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-encrypted-image-'));
let registry: RunningRegistry;
// Debian's python3 (with python3-cryptography) by its path: a python3 earlier on PATH may lack the module.
const run = (cmd: string, args: string[]) =>
  execFileSync(cmd.startsWith('/') ? cmd : requireTool(cmd), args, { cwd: dir, stdio: 'pipe' });

async function pull(args: string[]): Promise<{ status: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const status = await imagePullMain(['--no-progress', '--plain-http', ...args], {
    stdout: (s: string) => {
      out += s;
    },
    stderr: (s: string) => {
      err += s;
    },
    env: {},
  } as unknown as Parameters<typeof imagePullMain>[1]);
  return { status, out, err };
}

beforeAll(async () => {
  registry = await startDockerRegistry();
  run('openssl', ['genrsa', '-out', 'priv.pem', '2048']);
  run('openssl', ['rsa', '-in', 'priv.pem', '-pubout', '-out', 'pub.pem']);
  run('openssl', ['genrsa', '-out', 'other.pem', '2048']);
  mkdirSync(join(dir, 'files/etc'), { recursive: true });
  writeFileSync(join(dir, 'files/etc/motd'), 'hello from an encrypted layer\n');
  writeFileSync(join(dir, 'files/secret.bin'), Buffer.alloc(200_000, 'confidential '));
  run('umoci', ['init', '--layout', 'oci']);
  run('umoci', ['new', '--image', 'oci:img']);
  run('umoci', ['insert', '--image', 'oci:img', 'files/etc', '/etc']);
  run('umoci', ['insert', '--image', 'oci:img', 'files/secret.bin', '/data/secret.bin']);
  run('skopeo', [
    'copy',
    '--dest-tls-verify=false',
    '--encryption-key',
    'jwe:pub.pem',
    'oci:oci:img',
    `docker://${registry.host}/enc/app:v1`,
  ]);
  // An EC (P-256) recipient: ocicrypt wraps with ECDH-ES+A256KW.
  run('openssl', ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', 'ec.pem']);
  run('openssl', ['pkey', '-in', 'ec.pem', '-pubout', '-out', 'ec.pub.pem']);
  run('skopeo', [
    'copy',
    '--dest-tls-verify=false',
    '--encryption-key',
    'jwe:ec.pub.pem',
    'oci:oci:img',
    `docker://${registry.host}/enc/ec:v1`,
  ]);
  // The same image unencrypted, for our own encrypting command.
  run('skopeo', ['copy', '--dest-tls-verify=false', 'oci:oci:img', `docker://${registry.host}/enc/plain:v1`]);
}, 120_000);

/** `image-policy encrypt` in-process; resolves to its exit status and output. */
async function encrypt(args: string[]): Promise<{ status: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const status = await imagePolicyMain(['encrypt', '--plain-http', ...args], {
    stdout: (s: string) => {
      out += s;
    },
    stderr: (s: string) => {
      err += s;
    },
    env: {},
  } as unknown as Parameters<typeof imagePolicyMain>[1]);
  return { status, out, err };
}

afterAll(async () => {
  await registry?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function expectNoRootfs(dest: string): void {
  expect(existsSync(join(dest, 'rootfs'))).toBe(false);
  if (existsSync(dest)) expect(readdirSync(dest)).toEqual([]);
}

describe('an image skopeo encrypted with jwe:pub.pem', () => {
  it('is pulled, decrypted and unpacked by image-pull --decryption-key jwe:priv.pem', async () => {
    // What skopeo wrote: every layer encrypted, with ocicrypt's annotations.
    const client = new RegistryClient({ insecure: () => true });
    try {
      const m = await client.getManifest({ domain: registry.host, path: 'enc/app' }, 'v1');
      const manifest = parseManifest(m.bytes, m.contentType);
      if (manifest.kind !== 'manifest') throw new Error('expected a manifest');
      expect(manifest.layers.map((l) => l.mediaType)).toEqual([
        `${MEDIA_TYPE.ociLayerGzip}+encrypted`,
        `${MEDIA_TYPE.ociLayerGzip}+encrypted`,
      ]);
      expect(Object.keys(manifest.layers[0]?.annotations ?? {}).sort()).toEqual([
        'org.opencontainers.image.enc.keys.jwe',
        'org.opencontainers.image.enc.pubopts',
      ]);
    } finally {
      client.close();
    }
    const dest = join(dir, 'pulled');
    const r = await pull([
      '--decryption-key',
      `jwe:${join(dir, 'other.pem')}`,
      '--decryption-key',
      `jwe:${join(dir, 'priv.pem')}`,
      `docker://${registry.host}/enc/app:v1`,
      dest,
    ]);
    expect(r.err).not.toMatch(/image-pull: /);
    expect(r.status).toBe(0);
    expect(r.out).toMatch(/^sha256:[0-9a-f]{64}\n$/);
    expect(readFileSync(join(dest, 'rootfs/etc/motd'), 'utf8')).toBe('hello from an encrypted layer\n');
    expect(readFileSync(join(dest, 'rootfs/data/secret.bin'))).toEqual(
      Buffer.alloc(200_000, 'confidential '),
    );
  });

  it('with an EC key (ECDH-ES+A256KW) is decrypted as well', async () => {
    const dest = join(dir, 'pulled-ec');
    const r = await pull([
      '--decryption-key',
      `jwe:${join(dir, 'ec.pem')}`,
      `docker://${registry.host}/enc/ec:v1`,
      dest,
    ]);
    expect(r.err).not.toMatch(/image-pull: /);
    expect(r.status).toBe(0);
    expect(readFileSync(join(dest, 'rootfs/etc/motd'), 'utf8')).toBe('hello from an encrypted layer\n');
  });

  it('is also what skopeo decrypts itself (the producer is sound)', () => {
    run('skopeo', [
      'copy',
      '--src-tls-verify=false',
      '--decryption-key',
      'priv.pem',
      `docker://${registry.host}/enc/app:v1`,
      'oci:decrypted:img',
    ]);
    const index = JSON.parse(readFileSync(join(dir, 'decrypted/index.json'), 'utf8')) as {
      manifests: { digest: string }[];
    };
    const digest = index.manifests[0]?.digest ?? '';
    const manifest = JSON.parse(
      readFileSync(join(dir, 'decrypted/blobs/sha256', digest.slice(7)), 'utf8'),
    ) as {
      layers: { mediaType: string }[];
    };
    expect(manifest.layers.map((l) => l.mediaType)).toEqual([
      MEDIA_TYPE.ociLayerGzip,
      MEDIA_TYPE.ociLayerGzip,
    ]);
  });

  it('fails with a wrong key and with no key, before any rootfs exists', async () => {
    const wrong = join(dir, 'wrong');
    const r = await pull([
      '--decryption-key',
      `jwe:${join(dir, 'other.pem')}`,
      `docker://${registry.host}/enc/app:v1`,
      wrong,
    ]);
    expect(r.status).toBe(1);
    expect(r.err).toContain(
      'image-pull: Errors happened when pulling image: Failed to decrypt layer: Failed to decrypt the image layer, please ensure that the decryption key is placed and correct (jwe: ',
    );
    expectNoRootfs(wrong);
    const none = join(dir, 'none');
    const n = await pull([`docker://${registry.host}/enc/app:v1`, none]);
    expect(n.status).toBe(1);
    expect(n.err).toContain("(no decryption key for the layer's key protocols (jwe); none configured)");
    expectNoRootfs(none);
  });

  it('what image-policy encrypt makes with jwe:pub.pem, skopeo decrypts with priv.pem', async () => {
    const r = await encrypt([
      '--encryption-key',
      `jwe:${join(dir, 'pub.pem')}`,
      `docker://${registry.host}/enc/plain:v1`,
      `docker://${registry.host}/enc/ours:v1`,
    ]);
    expect(r.err).toBe('');
    expect(r.status).toBe(0);
    run('skopeo', [
      'copy',
      '--src-tls-verify=false',
      '--decryption-key',
      'priv.pem',
      `docker://${registry.host}/enc/ours:v1`,
      'oci:ours-decrypted:img',
    ]);
    run('umoci', ['raw', 'unpack', '--image', 'ours-decrypted:img', 'ours-rootfs']);
    expect(readFileSync(join(dir, 'ours-rootfs/etc/motd'), 'utf8')).toBe('hello from an encrypted layer\n');
    expect(readFileSync(join(dir, 'ours-rootfs/data/secret.bin'))).toEqual(
      Buffer.alloc(200_000, 'confidential '),
    );
    // And skopeo with the other key cannot.
    expect(() =>
      run('skopeo', [
        'copy',
        '--src-tls-verify=false',
        '--decryption-key',
        'other.pem',
        `docker://${registry.host}/enc/ours:v1`,
        'oci:ours-other:img',
      ]),
    ).toThrow();
  });

  it('refuses a ciphertext byte flipped and re-pushed (digest matching) on the HMAC', async () => {
    const client = new RegistryClient({ insecure: () => true });
    const repo = { domain: registry.host, path: 'enc/app' };
    try {
      const m = await client.getManifest(repo, 'v1');
      const doc = JSON.parse(Buffer.from(m.bytes).toString('utf8')) as {
        layers: { digest: string; size: number; mediaType: string }[];
      };
      const last = doc.layers[1];
      if (last === undefined) throw new Error('expected two layers');
      const blob = Buffer.from(await client.getBlobBytes(repo, { ...last }, 16 * 1024 * 1024));
      blob[blob.byteLength >> 1] = (blob[blob.byteLength >> 1] ?? 0) ^ 0x80;
      last.digest = (await client.pushBlob(repo, blob)).digest;
      expect(last.digest).toBe(digestOf(blob));
      await client.putManifest(repo, 'flipped', Buffer.from(JSON.stringify(doc)), MEDIA_TYPE.ociManifest);
    } finally {
      client.close();
    }
    const dest = join(dir, 'flipped');
    const r = await pull([
      '--decryption-key',
      `jwe:${join(dir, 'priv.pem')}`,
      `docker://${registry.host}/enc/app:flipped`,
      dest,
    ]);
    expect(r.status).toBe(1);
    expect(r.err).toContain(
      'image-pull: Errors happened when pulling image: Failed to decrypt layer: the HMAC of the encrypted layer does not match its pubopts (ciphertext altered or wrong key)',
    );
    expectNoRootfs(dest);
  });
});

/** Re-tags `tag` of `repo` as `newTag` with one byte of its last layer flipped (digest matching the change). */
async function pushFlipped(repoPath: string, tag: string, newTag: string): Promise<void> {
  const client = new RegistryClient({ insecure: () => true });
  const repo = { domain: registry.host, path: repoPath };
  try {
    const m = await client.getManifest(repo, tag);
    const doc = JSON.parse(Buffer.from(m.bytes).toString('utf8')) as {
      layers: { digest: string; size: number; mediaType: string }[];
    };
    const last = doc.layers[doc.layers.length - 1];
    if (last === undefined) throw new Error('expected a layer');
    const blob = Buffer.from(await client.getBlobBytes(repo, { ...last }, 16 * 1024 * 1024));
    blob[blob.byteLength >> 1] = (blob[blob.byteLength >> 1] ?? 0) ^ 0x80;
    last.digest = (await client.pushBlob(repo, blob)).digest;
    await client.putManifest(repo, newTag, Buffer.from(JSON.stringify(doc)), MEDIA_TYPE.ociManifest);
  } finally {
    client.close();
  }
}

describe('an image encrypted for the attestation-agent key provider, pulled by the CDH', () => {
  const KEK_PATH = 'default/image-kek/app';
  const DENIED_PATH = 'default/denied-kek/app';
  const WRONG_PATH = 'default/image-kek/wrong';
  let kbs: KbsHandle;
  let guest: GuestHandle;
  let hub: DataHubClient;
  const UNWRAP =
    'Errors happened when pulling image: Failed to decrypt layer: Failed to decrypt the image layer, please ensure that the decryption key is placed and correct';

  /** Our KBS's resource policy: trustee's affirming one, except for the `denied-kek` type. */
  const RESOURCE_POLICY = `package policy
import rego.v1

default allow = false

allow if {
    not any_not_affirming
    count(input.submods) > 0
    data["resource-path"][1] != "denied-kek"
}

any_not_affirming if {
    some _, submod in input.submods
    submod["ear.status"] != "affirming"
}
`;

  async function setResource(path: string, content: Buffer): Promise<void> {
    const file = join(dir, `resource-${path.replaceAll('/', '_')}`);
    writeFileSync(file, content);
    await mustSucceed(kbs.admin('set-resource', '--path', path, '--resource-file', file));
  }

  /** Builds with the Python producer and pushes with skopeo to `coco/<name>:v1`. */
  function producePython(name: string, kekFile: string, kid: string): void {
    const out = join(dir, `py-${name}`);
    run('/usr/bin/python3', [
      join(import.meta.dirname, 'helpers/coco_encrypt_image.py'),
      out,
      'v1',
      kekFile,
      kid,
      'app/secret.txt=released only to an attested guest\n',
      'etc/motd=coco\n',
    ]);
    run('skopeo', [
      'copy',
      '--dest-tls-verify=false',
      `oci:${out}:v1`,
      `docker://${registry.host}/coco/${name}:v1`,
    ]);
  }

  async function refusal(url: string, bundle: string): Promise<string> {
    const e = await hub.pullImage(url, bundle).then(
      (digest) => new Error(`pulled (${String(digest)}) where a refusal was expected`),
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(TtrpcError);
    expectNoRootfs(bundle);
    return (e as TtrpcError).message;
  }

  const cdhError = (url: string, why: string) =>
    `[CDH] [ERROR]: Image Pull error: Failed to pull image ${url} from all mirror/mapping locations or original location: image: ${url}, error: ${why}`;

  beforeAll(async () => {
    const kbsDir = join(dir, 'kbs');
    mkdirSync(kbsDir);
    kbs = await prepareKbs(kbsDir);
    await kbs.start();
    const kek = join(dir, 'kek.bin');
    writeFileSync(kek, randomBytes(32));
    await setResource(KEK_PATH, readFileSync(kek));
    await setResource(DENIED_PATH, readFileSync(kek));
    await setResource(WRONG_PATH, randomBytes(32));
    for (const rv of SAMPLE_REFERENCE_VALUES)
      await mustSucceed(kbs.admin('set-sample-reference-value', ...rv));
    const policyFile = join(dir, 'resource-policy.rego');
    writeFileSync(policyFile, RESOURCE_POLICY);
    await mustSucceed(kbs.admin('set-resource-policy', '--policy-file', policyFile));

    producePython('app', kek, `kbs:///${KEK_PATH}`);
    producePython('denied', kek, `kbs:///${DENIED_PATH}`);
    producePython('absent', kek, 'kbs:///default/image-kek/absent');
    producePython('wrong', kek, `kbs:///${WRONG_PATH}`);
    await pushFlipped('coco/app', 'v1', 'flipped');

    const guestDir = join(dir, 'guest');
    guest = await startGuest(kbs, guestDir, {
      cdhTomlExtra: `[image]\nwork_dir = "${join(guestDir, 'image-work')}"\ndecryption_keys = ["jwe:${join(dir, 'priv.pem')}"]\n\n[[image.registry_config.registry]]\nlocation = "${registry.host}"\ninsecure = true\n`,
    });
    hub = await DataHubClient.connect(`unix://${guest.cdhSock}`, { timeoutMs: 60_000 });
  }, 180_000);

  afterAll(async () => {
    hub?.close();
    await guest?.stop();
    await kbs?.stop();
  });

  it('decrypts the layer with the KEK the KBS releases to the attested guest', async () => {
    const bundle = join(dir, 'cdh-app');
    const digest = await hub.pullImage(`${registry.host}/coco/app:v1`, bundle);
    expect(digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(readFileSync(join(bundle, 'rootfs/app/secret.txt'), 'utf8')).toBe(
      'released only to an attested guest\n',
    );
    expect(readFileSync(join(bundle, 'rootfs/etc/motd'), 'utf8')).toBe('coco\n');
    expect(kbs.process.output()).toContain(`"path":"/kbs/v0/resource/${KEK_PATH}"`);
  });

  it('decrypts the skopeo-encrypted jwe image with the key in [image] decryption_keys', async () => {
    const bundle = join(dir, 'cdh-jwe');
    await hub.pullImage(`${registry.host}/enc/app:v1`, bundle);
    expect(readFileSync(join(bundle, 'rootfs/etc/motd'), 'utf8')).toBe('hello from an encrypted layer\n');
  });

  it('decrypts what image-policy encrypt wrapped for the attestation-agent provider', async () => {
    const r = await encrypt([
      '--encryption-key',
      `provider:attestation-agent:keyid=kbs:///${KEK_PATH}::keypath=${join(dir, 'kek.bin')}`,
      `docker://${registry.host}/enc/plain:v1`,
      `docker://${registry.host}/coco/ours:v1`,
    ]);
    expect(r.status).toBe(0);
    const bundle = join(dir, 'cdh-ours');
    await hub.pullImage(`${registry.host}/coco/ours:v1`, bundle);
    expect(readFileSync(join(bundle, 'rootfs/etc/motd'), 'utf8')).toBe('hello from an encrypted layer\n');
    const bad = await encrypt([
      '--encryption-key',
      `provider:attestation-agent:keyid=/${KEK_PATH}::keypath=${join(dir, 'kek.bin')}`,
      `docker://${registry.host}/enc/plain:v1`,
      `docker://${registry.host}/coco/never:v1`,
    ]);
    expect(bad.status).toBe(1);
    expect(bad.err).toContain(
      'image-policy encrypt: --encryption-key: malwared AnnotationPacket format: kid',
    );
  });

  it('fails with image-rs text when the resource policy denies the KEK or the KBS lacks it', async () => {
    const denied = `${registry.host}/coco/denied:v1`;
    expect(await refusal(denied, join(dir, 'cdh-denied'))).toBe(
      cdhError(
        denied,
        `${UNWRAP} (provider.attestation-agent: Get resource failed: request unauthorized (PolicyDeny: Access denied by policy))`,
      ),
    );
    const absent = `${registry.host}/coco/absent:v1`;
    // trustee's KBS answers a missing resource as a plugin failure, as ours does.
    expect(await refusal(absent, join(dir, 'cdh-absent'))).toBe(
      cdhError(
        absent,
        `${UNWRAP} (provider.attestation-agent: Get resource failed: request unauthorized (PluginInternalError: Plugin internal error))`,
      ),
    );
  });

  it('fails on a KEK that does not open the packet, and on an altered ciphertext', async () => {
    const wrong = `${registry.host}/coco/wrong:v1`;
    expect(await refusal(wrong, join(dir, 'cdh-wrong'))).toBe(
      cdhError(
        wrong,
        `${UNWRAP} (provider.attestation-agent: the KEK kbs:///${WRONG_PATH} does not open the AnnotationPacket (GCM tag mismatch))`,
      ),
    );
    const flipped = `${registry.host}/coco/app:flipped`;
    expect(await refusal(flipped, join(dir, 'cdh-flipped'))).toBe(
      cdhError(
        flipped,
        'Errors happened when pulling image: Failed to decrypt layer: the HMAC of the encrypted layer does not match its pubopts (ciphertext altered or wrong key)',
      ),
    );
  });
  it('serves keyprovider.KeyProviderService/UnWrapKey on its socket for the same packet', async () => {
    // upstream keyprovider.proto's messages, written here from its field names and numbers.
    const root = defineProto(`syntax = "proto3"; package keyprovider;
      message KeyProviderKeyWrapProtocolInput { bytes KeyProviderKeyWrapProtocolInput = 1; }
      message KeyProviderKeyWrapProtocolOutput { bytes KeyProviderKeyWrapProtocolOutput = 1; }`);
    const input = messageCodec<{ KeyProviderKeyWrapProtocolInput: Uint8Array }>(
      root,
      'keyprovider.KeyProviderKeyWrapProtocolInput',
    );
    const output = messageCodec<{ KeyProviderKeyWrapProtocolOutput: Uint8Array }>(
      root,
      'keyprovider.KeyProviderKeyWrapProtocolOutput',
    );
    const layout = join(dir, 'py-app');
    const index = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8')) as {
      manifests: { digest: string }[];
    };
    const manifest = JSON.parse(
      readFileSync(join(layout, 'blobs/sha256', (index.manifests[0]?.digest ?? '').slice(7)), 'utf8'),
    ) as { layers: { annotations: Record<string, string> }[] };
    const annotation = Buffer.from(
      manifest.layers[0]?.annotations['org.opencontainers.image.enc.keys.provider.attestation-agent'] ?? '',
      'base64',
    );
    const client = await TtrpcClient.connect({ path: guest.cdhSock });
    try {
      const request = {
        op: 'keyunwrap',
        keywrapparams: {},
        keyunwrapparams: { dc: {}, annotation: [...annotation] },
      };
      const answer = output.decode(
        await client.call(
          'keyprovider.KeyProviderService',
          'UnWrapKey',
          input.encode({ KeyProviderKeyWrapProtocolInput: Buffer.from(JSON.stringify(request)) }),
        ),
      );
      const json = JSON.parse(Buffer.from(answer.KeyProviderKeyWrapProtocolOutput).toString('utf8')) as {
        keyunwrapresults: { optsdata: number[] };
      };
      const opts = JSON.parse(Buffer.from(json.keyunwrapresults.optsdata).toString('utf8')) as {
        symkey: string;
        cipheroptions: { nonce: string };
      };
      expect(Buffer.from(opts.symkey, 'base64').byteLength).toBe(32);
      expect(Buffer.from(opts.cipheroptions.nonce, 'base64').byteLength).toBe(16);
      const wrap = await client
        .call(
          'keyprovider.KeyProviderService',
          'WrapKey',
          input.encode({ KeyProviderKeyWrapProtocolInput: Buffer.from('{}') }),
        )
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(wrap).toBeInstanceOf(TtrpcError);
      expect((wrap as TtrpcError).code).toBe(Code.NOT_FOUND);
      expect((wrap as TtrpcError).message).toBe('/keyprovider.KeyProviderService/WrapKey is not supported');
    } finally {
      client.close();
    }
  });
});
