// Encrypted layers through pullImage (dir: images): ocicrypt's JWE key protocol with RSA and EC keys,
// flattened and general JSON, and each way an encrypted image can be wrong: altered ciphertext (the
// HMAC refuses it before a byte is unpacked), wrong and missing keys (refused before any download), a
// manifest that lies about encryption, hostile public and private options. Nothing of a refused image
// stays in the bundle. Interop with skopeo's encryption is test/encrypted-image-e2e.test.ts.

import { generateKeyPairSync, type KeyObject, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GeneralEncrypt } from 'jose';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type BuiltLayer, buildLayer, writeDirImage } from '../build.js';
import { digestOf } from '../digest.js';
import { openDirImage } from '../dir-image.js';
import { ImagePullError, type PullImageOptions, pullImage } from '../pull.js';
import { encryptLayerBytes } from './block-cipher.js';
import {
  buildAnnotatedImage,
  type EncryptedLayer,
  encryptLayer,
  jweWrapper,
  type KeyWrapper,
} from './encrypt.js';
import { jweUnwrapper, parseJwePrivateKey } from './jwe.js';
import { KEYS_ANNOTATION_PREFIX, PUBOPTS_ANNOTATION } from './layer-info.js';

const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const otherRsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const PREFIX = 'Errors happened when pulling image: Failed to decrypt layer: ';
const UNWRAP = `${PREFIX}Failed to decrypt the image layer, please ensure that the decryption key is placed and correct`;

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ocicrypt-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function plainLayers(): Promise<[BuiltLayer, BuiltLayer]> {
  return [
    await buildLayer(
      [
        { name: 'etc/', type: 'directory' },
        { name: 'etc/base', content: 'base layer\n' },
      ],
      'gzip',
    ),
    await buildLayer([{ name: 'app/secret.txt', content: 'the confidential payload\n' }], 'none'),
  ];
}

async function dirImage(layers: readonly (BuiltLayer | EncryptedLayer)[]): Promise<string> {
  const src = join(dir, `image-${Math.random().toString(16).slice(2)}`);
  await writeDirImage(src, buildAnnotatedImage({ layers }));
  return src;
}

async function pullError(src: string, options: PullImageOptions): Promise<ImagePullError> {
  const e = await pullImage(await openDirImage(src), join(dir, 'bundle'), options).then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(ImagePullError);
  expect(existsSync(join(dir, 'bundle', 'rootfs'))).toBe(false);
  if (existsSync(join(dir, 'bundle'))) expect(await readdir(join(dir, 'bundle'))).toEqual([]);
  return e as ImagePullError;
}

/** A layer whose annotations are replaced by `edit`'s result. */
function withAnnotations(
  layer: EncryptedLayer,
  edit: (a: Record<string, string>) => Record<string, string>,
): EncryptedLayer {
  return { ...layer, annotations: edit({ ...layer.annotations }) };
}

function pubopts(o: unknown): string {
  return Buffer.from(JSON.stringify(o)).toString('base64');
}

/** A jwe wrapper that wraps whatever bytes `privateOptions` turns the real ones into. */
function hostileWrapper(key: KeyObject, rewrite: (o: Record<string, unknown>) => unknown): KeyWrapper {
  const inner = jweWrapper(key);
  return {
    protocol: 'jwe',
    wrap: (bytes) =>
      inner.wrap(Buffer.from(JSON.stringify(rewrite(JSON.parse(Buffer.from(bytes).toString('utf8')))))),
  };
}

describe('pulling ocicrypt-encrypted layers', () => {
  it('decrypts RSA-OAEP and ECDH-ES+A256KW wrapped layers next to a plain one', async () => {
    const [base, app] = await plainLayers();
    const src = await dirImage([
      base,
      await encryptLayer(app, [jweWrapper(ec.publicKey), jweWrapper(rsa.publicKey)]),
    ]);
    for (const key of [rsa.privateKey, ec.privateKey]) {
      await rm(join(dir, 'bundle'), { recursive: true, force: true });
      const result = await pullImage(await openDirImage(src), join(dir, 'bundle'), {
        decryption: [jweUnwrapper([otherRsa.privateKey, key])],
      });
      expect(await readFile(join(result.rootfs, 'app/secret.txt'), 'utf8')).toBe(
        'the confidential payload\n',
      );
      expect(await readFile(join(result.rootfs, 'etc/base'), 'utf8')).toBe('base layer\n');
    }
  });

  it('reads the general JSON serialization (several recipients in one JWE)', async () => {
    const [, app] = await plainLayers();
    const general: KeyWrapper = {
      protocol: 'jwe',
      async wrap(bytes) {
        const jwe = await new GeneralEncrypt(bytes)
          .setProtectedHeader({ enc: 'A256GCM' })
          .addRecipient(otherRsa.publicKey)
          .setUnprotectedHeader({ alg: 'RSA-OAEP' })
          .addRecipient(ec.publicKey)
          .setUnprotectedHeader({ alg: 'ECDH-ES+A256KW' })
          .encrypt();
        return Buffer.from(JSON.stringify(jwe));
      },
    };
    const src = await dirImage([await encryptLayer(app, [general])]);
    const result = await pullImage(await openDirImage(src), join(dir, 'bundle'), {
      decryption: [jweUnwrapper([ec.privateKey])],
    });
    expect(await readFile(join(result.rootfs, 'app/secret.txt'), 'utf8')).toBe('the confidential payload\n');
  });

  it('refuses altered ciphertext on its HMAC before a byte is unpacked', async () => {
    const [base, app] = await plainLayers();
    const enc = await encryptLayer(app, [jweWrapper(rsa.publicKey)]);
    const blob = Buffer.from(enc.blob);
    blob[100] = (blob[100] ?? 0) ^ 0x01;
    // The registry's digest is of the altered blob: only the HMAC can tell.
    const src = await dirImage([base, { ...enc, blob, digest: digestOf(blob) }]);
    const e = await pullError(src, { decryption: [jweUnwrapper([rsa.privateKey])] });
    expect(e.message).toBe(
      `${PREFIX}the HMAC of the encrypted layer does not match its pubopts (ciphertext altered or wrong key)`,
    );
    // The plain base layer before it was unpacked; nothing of the altered one.
    expect(e.unpacked).toMatchObject({ files: 1 });
  });

  it('refuses a wrong key and a missing key before anything is downloaded', async () => {
    const [, app] = await plainLayers();
    const src = await dirImage([await encryptLayer(app, [jweWrapper(rsa.publicKey)])]);
    const wrong = await pullError(src, { decryption: [jweUnwrapper([otherRsa.privateKey, ec.privateKey])] });
    expect(wrong.message.startsWith(UNWRAP)).toBe(true);
    expect(wrong.message).toContain('jwe: ');
    const missing = await pullError(src, {});
    expect(missing.message).toBe(
      `${UNWRAP} (no decryption key for the layer's key protocols (jwe); none configured)`,
    );
    expect(missing.unpacked).toBeUndefined();
  });

  it('refuses a layer only an unknown key provider can open', async () => {
    const [, app] = await plainLayers();
    const enc = await encryptLayer(app, [
      { protocol: 'provider.unknown', wrap: async () => Buffer.from('{}') },
    ]);
    const e = await pullError(await dirImage([enc]), { decryption: [jweUnwrapper([rsa.privateKey])] });
    expect(e.message).toBe(
      `${UNWRAP} (no decryption key for the layer's key protocols (provider.unknown); configured: jwe)`,
    );
  });
});

describe('manifests that lie about encryption', () => {
  it('refuses encryption annotations on a plain media type', async () => {
    const [, app] = await plainLayers();
    const enc = await encryptLayer(app, [jweWrapper(rsa.publicKey)]);
    const src = await dirImage([{ ...app, annotations: enc.annotations } as EncryptedLayer]);
    const e = await pullError(src, { decryption: [jweUnwrapper([rsa.privateKey])] });
    expect(e.message).toMatch(
      /^Errors happened when pulling image: Failed to decrypt layer: layer sha256:[0-9a-f]{64} carries encryption annotations \(org\.opencontainers\.image\.enc\.keys\.jwe, org\.opencontainers\.image\.enc\.pubopts\) but its media type application\/vnd\.oci\.image\.layer\.v1\.tar is not encrypted$/,
    );
  });

  it('refuses an encrypted media type without keys, without pubopts, or of an unknown base', async () => {
    const [, app] = await plainLayers();
    const enc = await encryptLayer(app, [jweWrapper(rsa.publicKey)]);
    const options = { decryption: [jweUnwrapper([rsa.privateKey])] };
    const noKeys = withAnnotations(enc, (a) => ({ [PUBOPTS_ANNOTATION]: a[PUBOPTS_ANNOTATION] ?? '' }));
    expect((await pullError(await dirImage([noKeys]), options)).message).toMatch(
      /has the encrypted media type application\/vnd\.oci\.image\.layer\.v1\.tar\+encrypted but no org\.opencontainers\.image\.enc\.keys\.\* annotation$/,
    );
    const noPubopts = withAnnotations(enc, (a) => ({
      [`${KEYS_ANNOTATION_PREFIX}jwe`]: a[`${KEYS_ANNOTATION_PREFIX}jwe`] ?? '',
    }));
    expect((await pullError(await dirImage([noPubopts]), options)).message).toMatch(
      /has no org\.opencontainers\.image\.enc\.pubopts annotation \(the HMAC\)$/,
    );
    const docker = { ...enc, mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip+encrypted' };
    expect((await pullError(await dirImage([docker]), options)).message).toBe(
      `${PREFIX}unhandled media type: application/vnd.docker.image.rootfs.diff.tar.gzip+encrypted`,
    );
  });

  it('refuses hostile public options', async () => {
    const [, app] = await plainLayers();
    const enc = await encryptLayer(app, [jweWrapper(rsa.publicKey)]);
    const options = { decryption: [jweUnwrapper([rsa.privateKey])] };
    const cases: [string, string][] = [
      [
        pubopts({ cipher: 'AES_128_GCM', hmac: randomBytes(32).toString('base64') }),
        'unsupported layer cipher "AES_128_GCM" (only AES_256_CTR_HMAC_SHA256)',
      ],
      [
        pubopts({ cipher: 'AES_256_CTR_HMAC_SHA256', hmac: randomBytes(16).toString('base64') }),
        'public options: "hmac" has 16 bytes, expected 32',
      ],
      [pubopts({ cipher: 'AES_256_CTR_HMAC_SHA256' }), 'public options: "hmac" is missing or not a string'],
      [pubopts([1, 2]), 'public options are not a JSON object'],
      ['!!!!', 'public options are not base64: illegal base64 data at input byte 0'],
      [Buffer.from('{"cipher":').toString('base64'), 'public options are not JSON: '],
    ];
    for (const [value, reason] of cases) {
      const layer = withAnnotations(enc, (a) => ({ ...a, [PUBOPTS_ANNOTATION]: value }));
      expect((await pullError(await dirImage([layer]), options)).message).toContain(`: ${reason}`);
    }
  });

  it('refuses hostile private options inside a valid JWE', async () => {
    const [, app] = await plainLayers();
    const cases: [(o: Record<string, unknown>) => unknown, string][] = [
      [
        (o) => ({ ...o, cipheroptions: { nonce: randomBytes(12).toString('base64') } }),
        '"nonce" has 12 bytes, expected 16',
      ],
      [(o) => ({ ...o, cipheroptions: null }), '"cipheroptions" is missing or not an object'],
      [(o) => ({ ...o, symkey: randomBytes(16).toString('base64') }), '"symkey" has 16 bytes, expected 32'],
      [() => 'a string', 'private options are not a JSON object'],
    ];
    for (const [rewrite, reason] of cases) {
      const enc = await encryptLayer(app, [hostileWrapper(rsa.publicKey, rewrite)]);
      const e = await pullError(await dirImage([enc]), { decryption: [jweUnwrapper([rsa.privateKey])] });
      expect(e.message.startsWith(UNWRAP)).toBe(true);
      expect(e.message).toContain(reason);
    }
  });

  it('does not quote undecodable private options (decrypted bytes) in the error', async () => {
    const [, app] = await plainLayers();
    const inner = jweWrapper(rsa.publicKey);
    const raw: KeyWrapper = {
      protocol: 'jwe',
      wrap: () => inner.wrap(Buffer.from('{"symkey": SECRET-DERIVED')),
    };
    const e = await pullError(await dirImage([await encryptLayer(app, [raw])]), {
      decryption: [jweUnwrapper([rsa.privateKey])],
    });
    expect(e.message).toBe(`${UNWRAP} (jwe: private options are not JSON)`);
    expect(e.message).not.toContain('SECRET');
  });

  it('refuses a JWE that is not JSON, and more wrapped keys than a layer can have', async () => {
    const [, app] = await plainLayers();
    const garbage = await encryptLayer(app, [{ protocol: 'jwe', wrap: async () => Buffer.from('not json') }]);
    const options = { decryption: [jweUnwrapper([rsa.privateKey])] };
    expect((await pullError(await dirImage([garbage]), options)).message).toContain(
      'jwe: the JWE is not JSON',
    );
    const many = withAnnotations(garbage, (a) => ({
      ...a,
      [`${KEYS_ANNOTATION_PREFIX}jwe`]: Array(65).fill('e30=').join(','),
    }));
    expect((await pullError(await dirImage([many]), options)).message).toMatch(
      /has more than 64 wrapped keys$/,
    );
  });
});

describe('the block cipher and keys', () => {
  it('AES-256-CTR uses the nonce as the full counter block (the 128-bit counter carries)', () => {
    const key = Buffer.alloc(32, 7);
    const nonce = Buffer.alloc(16, 0xff);
    const { ciphertext, hmac } = encryptLayerBytes(Buffer.alloc(48), key, nonce);
    // Block 2's counter wrapped around to zero: it equals AES-256-ECB(key, 0^128).
    const ecb = encryptLayerBytes(Buffer.alloc(16), key, Buffer.alloc(16));
    expect(ciphertext.subarray(16, 32)).toEqual(ecb.ciphertext);
    expect(hmac.byteLength).toBe(32);
  });

  it('reads private keys as PEM (PKCS#8, PKCS#1, SEC1), DER and JWK; refuses others', () => {
    const forms: Uint8Array[] = [
      Buffer.from(rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string),
      Buffer.from(rsa.privateKey.export({ type: 'pkcs1', format: 'pem' }) as string),
      Buffer.from(ec.privateKey.export({ type: 'sec1', format: 'pem' }) as string),
      rsa.privateKey.export({ type: 'pkcs8', format: 'der' }) as Buffer,
      ec.privateKey.export({ type: 'sec1', format: 'der' }) as Buffer,
      Buffer.from(JSON.stringify(ec.privateKey.export({ format: 'jwk' }))),
    ];
    for (const f of forms) expect(['rsa', 'ec']).toContain(parseJwePrivateKey(f).asymmetricKeyType);
    const ed = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    expect(() => parseJwePrivateKey(Buffer.from(ed), 'k.pem')).toThrow(
      /^k\.pem: not a usable RSA or EC private key: a ed25519 key/,
    );
    expect(() => parseJwePrivateKey(Buffer.from('garbage'), 'k.pem')).toThrow(
      /^k\.pem: not a usable RSA or EC private key/,
    );
  });
});
