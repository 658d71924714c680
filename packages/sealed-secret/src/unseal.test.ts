// Unsealing with an in-memory resource getter: kid resolution (KBS URI or key file with upstream's
// path rules), vault and envelope providers, the version check, and upstream's error chains.
import { createCipheriv, randomBytes } from 'node:crypto';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { decryptData, encryptData, kbsEnvelopePayload, unwrapKey, wrapKey } from './envelope.js';
import { KeyFetchFailed, KeyFileError, SealedSecretParseFailed, SecretVersionError } from './errors.js';
import { type EnvelopeSecret, parsePayload, serializePayload, vaultPayload } from './payload.js';
import { sealSecret, unsignedSealedSecret } from './pointer.js';
import { fixture, fixtureJson, tempDir } from './testing/helpers.js';
import { isKbsUri, resolveSigningKey, unsealPayload, unsealSecret } from './unseal.js';

let dir: string;
let cleanup: () => Promise<void>;
beforeEach(async () => {
  ({ dir, cleanup } = await tempDir());
});
afterEach(() => cleanup());

function resources(entries: Record<string, string | Uint8Array>) {
  const map = new Map(
    Object.entries(entries).map(([k, v]) => [k, typeof v === 'string' ? Buffer.from(v) : v]),
  );
  const getResource = vi.fn(async (uri: string) => {
    const v = map.get(uri);
    if (v === undefined) throw new Error(`KBS resource not found: ${uri}`);
    return v;
  });
  return { map, getResource };
}

async function failure(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a failure');
}

describe('isKbsUri (upstream ResourceUri::try_from decides KBS or key file)', () => {
  it.each([
    ['kbs:///default/key/jwk', true],
    ['kbs://kbs.example:8080/a/b/c', true],
    ['KBS:///a/b/c', true],
    ['kbs+pkcs11:///a/b/c', true],
    ['kbs+:///a/b/c', false],
    ['test-key', false],
    ['/abs/path', false],
    ['file:///a/b/c', false],
    ['https://kbs/a/b/c', false],
  ])('%s → %s', (kid, expected) => {
    expect(isKbsUri(kid)).toBe(expected);
  });
});

describe('resolving the kid', () => {
  it('fetches a kbs:/// kid from the KBS', async () => {
    const { getResource } = resources({ 'kbs:///default/signing/jwk_public': '{"kty":"EC"}' });
    const key = await resolveSigningKey('kbs:///default/signing/jwk_public', { getResource });
    expect(Buffer.from(key).toString()).toBe('{"kty":"EC"}');
  });

  it('reports a KBS failure with upstream wording', async () => {
    const { getResource } = resources({});
    const e = await failure(resolveSigningKey('kbs:///default/signing/missing', { getResource }));
    expect(e).toBeInstanceOf(KeyFetchFailed);
    expect(e.message).toBe(
      'Failed to get key from KMS: Kbs client error: get resource failed: KBS resource not found: kbs:///default/signing/missing',
    );
  });

  it('refuses an illegal KBS URI before any request', async () => {
    const { getResource } = resources({});
    const e = await failure(resolveSigningKey('kbs:///default/../x', { getResource }));
    expect(e.message).toBe(
      'Failed to get key from KMS: Kbs client error: illegal kbs resource uri: kbs:///default/../x',
    );
    expect(getResource).not.toHaveBeenCalled();
  });

  it('reads a key file below the sealed-secret folder', async () => {
    const keys = join(dir, 'sealed-secret');
    await mkdir(join(keys, 'sub'), { recursive: true });
    await writeFile(join(keys, 'test-key'), 'K1');
    await writeFile(join(keys, 'sub', 'k2'), 'K2');
    const { getResource } = resources({});
    const read = (kid: string) => resolveSigningKey(kid, { getResource, signingKeyDir: keys });
    expect(Buffer.from(await read('test-key')).toString()).toBe('K1');
    expect(Buffer.from(await read('sub/k2')).toString()).toBe('K2');
    expect(Buffer.from(await read('sub/../test-key')).toString()).toBe('K1');
    expect(Buffer.from(await read(join(keys, 'test-key'))).toString()).toBe('K1');
    expect(getResource).not.toHaveBeenCalled();
  });

  it('refuses paths that leave the folder: `..`, absolute paths, symlinks', async () => {
    const keys = join(dir, 'sealed-secret');
    const outside = join(dir, 'outside');
    await mkdir(keys);
    await mkdir(outside);
    await writeFile(join(outside, 'key'), 'OUT');
    await writeFile(join(dir, 'sibling-key'), 'OUT');
    await symlink(join(outside, 'key'), join(keys, 'link-to-file'));
    await symlink(outside, join(keys, 'link-to-dir'));
    await mkdir(join(dir, 'sealed-secret-evil'));
    await writeFile(join(dir, 'sealed-secret-evil', 'key'), 'OUT');
    const { getResource } = resources({});
    for (const kid of [
      '../sibling-key',
      '../outside/key',
      join(outside, 'key'),
      'link-to-file',
      'link-to-dir/key',
      // Symlinks resolve before `..` (canonicalize): link-to-dir/.. is `dir`, not the key folder.
      'link-to-dir/../sibling-key',
      '../sealed-secret-evil/key',
    ]) {
      const e = await failure(resolveSigningKey(kid, { getResource, signingKeyDir: keys }));
      expect(e, kid).toBeInstanceOf(SealedSecretParseFailed);
      expect(e.message).toBe('parse SealedSecret failed: Invalid KID Key Path');
    }
  });

  it('reports a missing key file, the folder itself, and a missing folder with upstream wording', async () => {
    const keys = join(dir, 'sealed-secret');
    await mkdir(keys);
    const { getResource } = resources({});
    const missing = await failure(resolveSigningKey('nope', { getResource, signingKeyDir: keys }));
    expect(missing).toBeInstanceOf(KeyFileError);
    expect(missing.message).toMatch(/^IO Operation Failed: ENOENT/);
    const folder = await failure(resolveSigningKey('.', { getResource, signingKeyDir: keys }));
    expect(folder).toBeInstanceOf(KeyFileError);
    const noDir = await failure(resolveSigningKey('k', { getResource, signingKeyDir: join(dir, 'absent') }));
    expect(noDir.message).toBe(
      'parse SealedSecret failed: KID is invalid. Must be a KBS URI or a credential path.',
    );
  });

  it('refuses a key file larger than 64 KiB', async () => {
    const keys = join(dir, 'sealed-secret');
    await mkdir(keys);
    await writeFile(join(keys, 'big'), Buffer.alloc(64 * 1024 + 1, 0x20));
    const e = await failure(
      resolveSigningKey('big', { getResource: resources({}).getResource, signingKeyDir: keys }),
    );
    expect(e).toBeInstanceOf(KeyFileError);
    expect(e.message).toMatch(/larger than 65536 bytes/);
  });
});

describe('unsealing a vault secret', () => {
  it('verifies with the kid from the KBS, then fetches `name`', async () => {
    const key = await fixtureJson('test-key.json');
    const { d: _d, ...pub } = key;
    const { getResource } = resources({
      'kbs:///default/signing/jwk_public': JSON.stringify(pub),
      'kbs:///default/app/password': 'hunter2',
    });
    const pointer = sealSecret(vaultPayload('kbs:///default/app/password'), {
      kid: 'kbs:///default/signing/jwk_public',
      privateJwk: key,
    });
    expect(Buffer.from(await unsealSecret(pointer, { getResource })).toString()).toBe('hunter2');
    expect(getResource.mock.calls.map((c) => c[0])).toEqual([
      'kbs:///default/signing/jwk_public',
      'kbs:///default/app/password',
    ]);
  });

  it('verifies with a key file (upstream test layout) and treats the provider name case-insensitively', async () => {
    const key = await fixtureJson('test-key.json');
    const keys = join(dir, 'sealed-secret');
    await mkdir(keys);
    await writeFile(join(keys, 'test-key'), await fixture('test-key.json'));
    const { getResource } = resources({ 'kbs:///one/2/trois': 'three' });
    const pointer = sealSecret(vaultPayload('kbs:///one/2/trois', { provider: 'KBS' }), {
      kid: 'test-key',
      privateJwk: key,
    });
    expect(Buffer.from(await unsealSecret(pointer, { getResource, signingKeyDir: keys })).toString()).toBe(
      'three',
    );
  });

  it('does not fetch `name` when the signature fails', async () => {
    const key2 = await fixtureJson('test-key-2.json');
    const key = await fixtureJson('test-key.json');
    const { getResource } = resources({
      'kbs:///s/k/jwk': JSON.stringify(key),
      'kbs:///one/2/trois': 'three',
    });
    const pointer = sealSecret(vaultPayload('kbs:///one/2/trois'), {
      kid: 'kbs:///s/k/jwk',
      privateJwk: key2,
    });
    await expect(unsealSecret(pointer, { getResource })).rejects.toThrow('Signature Error: signature error');
    expect(getResource.mock.calls.map((c) => c[0])).toEqual(['kbs:///s/k/jwk']);
  });

  it('refuses version 0.2.0 after verification (upstream checks it when unsealing)', async () => {
    const json = serializePayload({ ...vaultPayload('kbs:///a/b/c'), version: '0.2.0' });
    const e = await failure(
      unsealSecret(unsignedSealedSecret(json), {
        skipVerification: true,
        getResource: resources({}).getResource,
      }),
    );
    expect(e).toBeInstanceOf(SecretVersionError);
    expect(e.message).toBe('version not supported, only 0.1.0 supported');
  });

  it('gives upstream error chains for providers and names', async () => {
    const { getResource } = resources({});
    const aliyun = await failure(unsealPayload(parsePayload(await fixture('vault-1.json')), getResource));
    expect(aliyun.message).toMatch(
      /^unseal vault secret failed: kms interface when create kms provider: Unsupported provider: aliyun \(/,
    );
    const missing = await failure(unsealPayload(parsePayload(await fixture('vault-2.json')), getResource));
    expect(missing.message).toBe(
      'unseal vault secret failed: kms interface when get secret from provider: Kbs client error: get resource failed: KBS resource not found: kbs:///one/2/trois',
    );
    const illegal = await failure(unsealPayload(vaultPayload('xxx'), getResource));
    expect(illegal.message).toBe(
      'unseal vault secret failed: kms interface when get secret from provider: Kbs client error: illegal kbs resource uri: xxx',
    );
    expect(getResource).toHaveBeenCalledTimes(1);
  });

  it('unseals kata CI fake secret in skip mode only', async () => {
    const fake = unsignedSealedSecret(
      `${JSON.stringify(vaultPayload('kbs:///default/type/tag'), null, 2)}\n`,
    );
    const { getResource } = resources({ 'kbs:///default/type/tag': "that's the unsealed secret" });
    expect(Buffer.from(await unsealSecret(fake, { skipVerification: true, getResource })).toString()).toBe(
      "that's the unsealed secret",
    );
    await expect(unsealSecret(fake, { getResource })).rejects.toThrow(
      'parse SealedSecret failed: Failed to parse JWS',
    );
  });
});

describe('envelopes and the kbs key provider', () => {
  const KEK_URI = 'kbs:///default/kek/one';

  it('AES Key Wrap matches RFC 3394 §4.6 (256-bit KEK, 256-bit key)', () => {
    const kek = Buffer.from('000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F', 'hex');
    const key = Buffer.from('00112233445566778899AABBCCDDEEFF000102030405060708090A0B0C0D0E0F', 'hex');
    const wrapped = wrapKey(kek, key);
    expect(wrapped.toString('hex').toUpperCase()).toBe(
      '28C9F404C4B810F4CBCCB35CFB87F8263F5786E2D80ED326CBC7F0E71A99F43BFB988B9B7A02DD21',
    );
    expect(unwrapKey(kek, wrapped)).toEqual(key);
    expect(() => unwrapKey(randomBytes(32), wrapped)).toThrow(/key unwrap failed/);
  });

  it('AES-256-GCM data is ciphertext ‖ tag (the aes-gcm crate layout); CTR is a plain stream', () => {
    const dek = randomBytes(32);
    const iv = randomBytes(12);
    const out = encryptData(dek, Buffer.from('secret'), iv, 'A256GCM');
    expect(out).toHaveLength(6 + 16);
    const c = createCipheriv('aes-256-gcm', dek, iv);
    const manual = Buffer.concat([c.update('secret'), c.final(), c.getAuthTag()]);
    expect(out).toEqual(manual);
    expect(decryptData(dek, out, iv, 'A256GCM').toString()).toBe('secret');
    const ctrIv = randomBytes(16);
    expect(
      decryptData(
        dek,
        encryptData(dek, Buffer.from('x'.repeat(40)), ctrIv, 'A256CTR'),
        ctrIv,
        'A256CTR',
      ).toString(),
    ).toBe('x'.repeat(40));
    expect(() => decryptData(dek, out, randomBytes(16), 'A256GCM')).toThrow(
      'Failed to convert array to nonce',
    );
  });

  it.each(['A256GCM', 'A256CTR'] as const)(
    'seals and unseals a %s envelope through the KBS KEK',
    async (wrapType) => {
      const key = await fixtureJson('test-key.json');
      const { d: _d, ...pub } = key;
      const kek = randomBytes(32);
      const { getResource } = resources({ [KEK_URI]: kek, 'kbs:///s/k/jwk': JSON.stringify(pub) });
      const payload = kbsEnvelopePayload(Buffer.from('db password'), { keyId: KEK_URI, kek, wrapType });
      expect(Buffer.from(payload.iv, 'base64')).toHaveLength(wrapType === 'A256GCM' ? 12 : 16);
      expect(Buffer.from(payload.encrypted_key, 'base64')).toHaveLength(40);
      const pointer = sealSecret(payload, { kid: 'kbs:///s/k/jwk', privateJwk: key });
      expect(Buffer.from(await unsealSecret(pointer, { getResource })).toString()).toBe('db password');
    },
  );

  it('reports each failing step with upstream envelope wording', async () => {
    const kek = randomBytes(32);
    const base = kbsEnvelopePayload(Buffer.from('v'), { keyId: KEK_URI, kek });
    const { getResource } = resources({ [KEK_URI]: kek });
    const run = (p: Partial<EnvelopeSecret>) => failure(unsealPayload({ ...base, ...p }, getResource));

    expect((await run({ encrypted_key: 'yyy' })).message).toBe(
      'unseal envelope secret failed: base64 decoding failed when decode `encrypted_key`: not canonical standard base64',
    );
    expect((await run({ provider: 'aliyun' })).message).toMatch(
      /^unseal envelope secret failed: kms interface when create KMS provider: Unsupported provider: aliyun \(/,
    );
    expect((await run({ key_id: 'kbs:///default/kek/missing' })).message).toBe(
      'unseal envelope secret failed: kms interface when decrypt encryption key: Kbs client error: get resource failed: KBS resource not found: kbs:///default/kek/missing',
    );
    expect(
      (await run({ encrypted_key: wrapKey(randomBytes(32), randomBytes(32)).toString('base64') })).message,
    ).toMatch(/^unseal envelope secret failed: kms interface when decrypt encryption key: key unwrap failed/);
    expect((await run({ iv: 'www' })).message).toBe(
      'unseal envelope secret failed: base64 decoding failed when decode iv: not canonical standard base64',
    );
    const data = Buffer.from(base.encrypted_data, 'base64');
    data[0] = (data[0] as number) ^ 1;
    expect((await run({ encrypted_data: data.toString('base64') })).message).toBe(
      'unseal envelope secret failed: decrypt envelope: aes-256-gcm decrypt failed: Error',
    );
    expect((await run({ iv: Buffer.alloc(16).toString('base64') })).message).toBe(
      'unseal envelope secret failed: decrypt envelope: Failed to convert array to nonce',
    );
  });

  it("fails upstream's envelope fixture at its first step, as upstream (base64 of `encrypted_key`)", async () => {
    const e = await failure(
      unsealPayload(parsePayload(await fixture('envelope-1.json')), resources({}).getResource),
    );
    expect(e.message).toMatch(
      /^unseal envelope secret failed: base64 decoding failed when decode `encrypted_key`/,
    );
  });

  it('refuses a KEK resource that is not 32 bytes', async () => {
    const kek = randomBytes(32);
    const base = kbsEnvelopePayload(Buffer.from('v'), { keyId: KEK_URI, kek });
    const { getResource } = resources({ [KEK_URI]: kek.subarray(0, 16) });
    await expect(unsealPayload(base, getResource)).rejects.toThrow(
      /key-encryption key is 16 bytes, expected 32/,
    );
  });
});
