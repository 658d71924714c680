// The pointer format against upstream's fixtures and rules: payload JSON, signing, verification,
// tampering, the skip-verification 4-piece form, and hostile input.
import { createPublicKey, generateKeyPairSync, sign } from 'node:crypto';
import { compactVerify, importJWK } from 'jose';
import { describe, expect, it, vi } from 'vitest';
import {
  KeyJsonError,
  SealedSecretParseFailed,
  SealFailed,
  SignatureVerificationFailed,
  SigningKeyError,
} from './errors.js';
import { MAX_JSON_DEPTH } from './json.js';
import { parsePayload, serializePayload, vaultPayload } from './payload.js';
import {
  describeSealedSecret,
  MAX_SEALED_SECRET_BYTES,
  parseSealedSecret,
  readSealedSecret,
  type SignedSealedSecret,
  sealSecret,
  stripSealedPrefix,
  unsignedSealedSecret,
  verifySealedSecret,
} from './pointer.js';
import { fixture, fixtureJson } from './testing/helpers.js';

const b64u = (s: string | Uint8Array) => Buffer.from(s).toString('base64url');

async function testKeys() {
  const key = await fixtureJson('test-key.json');
  const key2 = await fixtureJson('test-key-2.json');
  const { d: _d, ...pub } = key;
  return { key, key2, pub };
}

async function failure(p: Promise<unknown> | (() => unknown)): Promise<Error> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a failure');
}

/** Signs arbitrary header and payload text with test-key.json (for hand-made pointers). */
async function signRaw(header: string | Uint8Array, payload: string | Uint8Array): Promise<string> {
  const { key } = await testKeys();
  const privateKey = (await importJWK(key as never, 'ES256')) as unknown as Parameters<typeof sign>[2];
  const input = `${b64u(header)}.${b64u(payload)}`;
  const sig = sign('sha256', Buffer.from(input), {
    key: privateKey as never,
    dsaEncoding: 'ieee-p1363',
  });
  return `sealed.${input}.${b64u(sig)}`;
}

const VAULT_2 = vaultPayload('kbs:///one/2/trois');

describe('payload JSON (upstream fixtures)', () => {
  it.each([
    ['vault-1.json', { type: 'vault', name: 'xxx', provider: 'aliyun' }],
    ['vault-2.json', { type: 'vault', name: 'kbs:///one/2/trois', provider: 'kbs' }],
    [
      'envelope-1.json',
      {
        type: 'envelope',
        key_id: 'xxx',
        encrypted_key: 'yyy',
        encrypted_data: 'zzz',
        wrap_type: 'A256GCM',
        iv: 'www',
        provider: 'aliyun',
      },
    ],
  ])('%s parses, and serializes in upstream field order', async (name, expected) => {
    const bytes = await fixture(name);
    const parsed = parsePayload(bytes);
    expect(parsed).toEqual({ version: '0.1.0', provider_settings: {}, annotations: {}, ...expected });
    // The fixtures are pretty-printed in serde's field order: compact text must match byte for byte.
    expect(serializePayload(parsed)).toBe(JSON.stringify(JSON.parse(bytes.toString('utf8'))));
  });

  it('writes the vault payload exactly as serde_json::to_string', () => {
    expect(serializePayload(VAULT_2)).toBe(
      '{"version":"0.1.0","type":"vault","name":"kbs:///one/2/trois","provider":"kbs","provider_settings":{},"annotations":{}}',
    );
  });

  it('keeps the members of provider_settings and annotations in insertion order', () => {
    const p = vaultPayload('kbs:///a/b/c', {
      providerSettings: { z: 1, a: { y: [true, null] } },
      annotations: { k: 'v' },
    });
    expect(serializePayload(p)).toContain(
      '"provider_settings":{"z":1,"a":{"y":[true,null]}},"annotations":{"k":"v"}}',
    );
  });

  it('ignores members unknown to the variant, as serde without deny_unknown_fields', () => {
    const p = parsePayload(
      '{"version":"0.1.0","type":"vault","name":"n","provider":"kbs","provider_settings":{},"annotations":{},"extra":[1]}',
    );
    expect(p).toEqual(vaultPayload('n'));
  });

  it.each([
    [
      'missing provider_settings',
      '{"version":"0.1.0","type":"vault","name":"n","provider":"kbs","annotations":{}}',
    ],
    [
      'annotations null',
      '{"version":"0.1.0","type":"vault","name":"n","provider":"kbs","provider_settings":{},"annotations":null}',
    ],
    [
      'name a number',
      '{"version":"0.1.0","type":"vault","name":1,"provider":"kbs","provider_settings":{},"annotations":{}}',
    ],
    [
      'unknown type',
      '{"version":"0.1.0","type":"kms","name":"n","provider":"kbs","provider_settings":{},"annotations":{}}',
    ],
    ['no version', '{"type":"vault","name":"n","provider":"kbs","provider_settings":{},"annotations":{}}'],
    [
      'duplicate name',
      '{"version":"0.1.0","type":"vault","name":"a","name":"b","provider":"kbs","provider_settings":{},"annotations":{}}',
    ],
    ['an array', '[]'],
  ])('refuses a payload with %s', (_why, json) => {
    expect(() => parsePayload(json)).toThrow();
  });

  it('refuses an unknown wrap_type', async () => {
    const env = await fixtureJson('envelope-1.json');
    expect(() => parsePayload(JSON.stringify({ ...env, wrap_type: 'A128GCM' }))).toThrow(/wrap_type/);
  });
});

describe('sealing and verification with upstream test keys', () => {
  it('writes the header, payload and signature as upstream, and verifies', async () => {
    const { key, pub } = await testKeys();
    const pointer = sealSecret(VAULT_2, { kid: 'test-key', privateJwk: key });
    const [prefix, h, p, s, ...rest] = pointer.split('.');
    expect(prefix).toBe('sealed');
    expect(rest).toEqual([]);
    expect(Buffer.from(h as string, 'base64url').toString()).toBe('{"alg":"ES256","kid":"test-key"}');
    expect(Buffer.from(p as string, 'base64url').toString()).toBe(serializePayload(VAULT_2));
    expect(Buffer.from(s as string, 'base64url')).toHaveLength(64);
    expect(pointer).not.toMatch(/[=+/]/);

    const resolveKey = vi.fn(async () => Buffer.from(JSON.stringify(pub)));
    expect(await readSealedSecret(pointer, { resolveKey })).toEqual(VAULT_2);
    expect(resolveKey).toHaveBeenCalledWith('test-key');
  });

  it('produces a JWS that an independent implementation (jose) verifies', async () => {
    const { key, pub } = await testKeys();
    const pointer = sealSecret(VAULT_2, { kid: 'kbs:///default/signing/jwk_public', privateJwk: key });
    const { payload, protectedHeader } = await compactVerify(
      stripSealedPrefix(pointer),
      await importJWK(pub as never, 'ES256'),
    );
    expect(protectedHeader).toEqual({ alg: 'ES256', kid: 'kbs:///default/signing/jwk_public' });
    expect(JSON.parse(Buffer.from(payload).toString())).toEqual(VAULT_2);
  });

  it('verifies with the private JWK as the key file, as upstream tests do', async () => {
    const { key } = await testKeys();
    const pointer = sealSecret(VAULT_2, { kid: 'test-key', privateJwk: key });
    expect(await readSealedSecret(pointer, { resolveKey: async () => JSON.stringify(key) })).toEqual(VAULT_2);
  });

  it('refuses a pointer signed with the wrong key (test-key-2.json)', async () => {
    const { key, key2 } = await testKeys();
    const pointer = sealSecret(VAULT_2, { kid: 'test-key', privateJwk: key2 });
    const e = await failure(readSealedSecret(pointer, { resolveKey: async () => JSON.stringify(key) }));
    expect(e).toBeInstanceOf(SignatureVerificationFailed);
    expect(e.message).toBe('Signature Error: signature error');
  });

  it.each([50, 200, 250])('refuses a pointer tampered at upstream offset %i', async (offset) => {
    const { key } = await testKeys();
    const pointer = sealSecret(VAULT_2, { kid: 'test-key', privateJwk: key });
    const chars = [...pointer];
    chars[offset] = chars[offset] === 'X' ? 'Y' : 'X';
    await expect(
      readSealedSecret(chars.join(''), { resolveKey: async () => JSON.stringify(key) }),
    ).rejects.toThrow();
  });

  it('refuses every single-character change: header, payload, signature and prefix', async () => {
    const { key } = await testKeys();
    const pointer = sealSecret(VAULT_2, { kid: 'test-key', privateJwk: key });
    const h = pointer.indexOf('.', 7);
    const p = pointer.indexOf('.', h + 1);
    const kinds = new Set<string>();
    for (let i = 0; i < pointer.length; i++) {
      const chars = [...pointer];
      chars[i] = chars[i] === 'X' ? 'Y' : 'X';
      const e = await failure(
        readSealedSecret(chars.join(''), { resolveKey: async () => JSON.stringify(key) }),
      );
      expect(e.name).toMatch(/SealedSecretParseFailed|SignatureVerificationFailed|SigningKeyError/);
      kinds.add(`${i < 7 ? 'prefix' : i < h ? 'header' : i < p ? 'payload' : 'signature'}:${e.name}`);
    }
    // Each region is covered and signatures are actually checked in payload and signature.
    expect(kinds).toContain('payload:SignatureVerificationFailed');
    expect(kinds).toContain('signature:SignatureVerificationFailed');
    expect(kinds).toContain('header:SealedSecretParseFailed');
    expect(kinds).toContain('prefix:SealedSecretParseFailed');
  });

  it('strips repeated `sealed.` prefixes (trim_start_matches) and accepts a bare JWS', async () => {
    const { key } = await testKeys();
    const pointer = sealSecret(VAULT_2, { kid: 'test-key', privateJwk: key });
    const resolveKey = async () => JSON.stringify(key);
    expect(await readSealedSecret(`sealed.sealed.${pointer}`, { resolveKey })).toEqual(VAULT_2);
    expect(await readSealedSecret(stripSealedPrefix(pointer), { resolveKey })).toEqual(VAULT_2);
    expect(stripSealedPrefix('sealed.sealed.sealedx')).toBe('sealedx');
  });

  it('refuses a private JWK whose x/y do not belong to d, and keys that are not P-256', async () => {
    const { key, key2 } = await testKeys();
    expect(() => sealSecret(VAULT_2, { kid: 'k', privateJwk: { ...key, x: key2.x, y: key2.y } })).toThrow(
      SealFailed,
    );
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });
    expect(() => sealSecret(VAULT_2, { kid: 'k', privateJwk: rsa })).toThrow(
      'Signing key error: Key must be EC P256 private key',
    );
    const { d: _d, ...pubOnly } = key;
    expect(() => sealSecret(VAULT_2, { kid: 'k', privateJwk: pubOnly })).toThrow(SigningKeyError);
    expect(() => sealSecret(VAULT_2, { kid: '', privateJwk: key })).toThrow(SealFailed);
  });
});

describe('header and key checks, with upstream wording', () => {
  const payload = serializePayload(VAULT_2);

  it('requires ES256 and does not fetch a key for another alg', async () => {
    const pointer = await signRaw('{"alg":"HS256","kid":"test-key"}', payload);
    const resolveKey = vi.fn(async () => '{}');
    const e = await failure(readSealedSecret(pointer, { resolveKey }));
    expect(e.message).toBe('Signing key error: JWS algorithm must be ES256');
    expect(resolveKey).not.toHaveBeenCalled();
    expect(
      (await failure(readSealedSecret(await signRaw('{"alg":"none","kid":"k"}', payload), { resolveKey })))
        .message,
    ).toBe('Signing key error: JWS algorithm must be ES256');
  });

  it.each([
    ['an unknown alg', '{"alg":"ES257","kid":"k"}', 'parse SealedSecret failed: Failed to parse JWS'],
    [
      'a kid that is not a string',
      '{"alg":"ES256","kid":7}',
      'parse SealedSecret failed: Failed to parse JWS',
    ],
    ['no kid', '{"alg":"ES256"}', 'parse SealedSecret failed: Could not find kid'],
    ['a null kid', '{"alg":"ES256","kid":null}', 'parse SealedSecret failed: Could not find kid'],
    ['no alg', '{"kid":"k"}', 'parse SealedSecret failed: Could not get algorithm'],
    ['a header that is an array', '["ES256"]', 'parse SealedSecret failed: Failed to parse JWS'],
    ['a header that is not JSON', 'alg=ES256', 'parse SealedSecret failed: Failed to parse JWS'],
    [
      'crit that is not a list',
      '{"alg":"ES256","kid":"k","crit":"b64"}',
      'parse SealedSecret failed: Failed to parse JWS',
    ],
    [
      'b64 that is not a boolean',
      '{"alg":"ES256","kid":"k","b64":"no"}',
      'parse SealedSecret failed: Failed to parse JWS',
    ],
    [
      'kid given twice',
      '{"alg":"ES256","kid":"a","kid":"b"}',
      'parse SealedSecret failed: Failed to parse JWS',
    ],
  ])('refuses a header with %s', async (_why, header, message) => {
    const e = await failure(
      readSealedSecret(await signRaw(header, payload), { resolveKey: async () => '{}' }),
    );
    expect(e).toBeInstanceOf(SealedSecretParseFailed);
    expect(e.message).toBe(message);
  });

  it('accepts header members it does not use (typ, cty, x5t)', async () => {
    const { pub } = await testKeys();
    const pointer = await signRaw(
      '{"alg":"ES256","kid":"k","typ":"JWT","cty":"x","x5t":"AAAA","other":{"a":1}}',
      payload,
    );
    expect(await readSealedSecret(pointer, { resolveKey: async () => pub })).toEqual(VAULT_2);
  });

  it('refuses a signed pointer without payload: "Could not find JWS Payload"', async () => {
    const { pub } = await testKeys();
    const pointer = await signRaw('{"alg":"ES256","kid":"k"}', '');
    const e = await failure(readSealedSecret(pointer, { resolveKey: async () => pub }));
    expect(e.message).toBe('parse SealedSecret failed: Could not find JWS Payload');
  });

  it('refuses a signed payload that is not a Secret, with upstream wording', async () => {
    const { pub } = await testKeys();
    const pointer = await signRaw('{"alg":"ES256","kid":"k"}', '{"version":"0.1.0","type":"vault"}');
    const e = await failure(readSealedSecret(pointer, { resolveKey: async () => pub }));
    expect(e.message).toBe(
      'parse SealedSecret failed: malformed input sealed secret format (json deserialization failed)',
    );
  });

  it.each([
    [
      'an RSA key',
      () => generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ format: 'jwk' }),
      'Signing key error: Key must be P256',
    ],
    [
      'a P-384 key',
      () => generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey.export({ format: 'jwk' }),
      'Signing key error: Key must be P256',
    ],
    ['an oct key', () => ({ kty: 'oct', k: 'AAAA' }), 'Signing key error: Key must be P256'],
    [
      'a point off the curve',
      () => ({ kty: 'EC', crv: 'P-256', x: b64u(Buffer.alloc(32, 1)), y: b64u(Buffer.alloc(32, 2)) }),
      'Signing key error: Could not parse verification key.',
    ],
    [
      'a short x',
      () => ({ kty: 'EC', crv: 'P-256', x: b64u(Buffer.alloc(31, 1)), y: b64u(Buffer.alloc(32, 2)) }),
      'Signing key error: Could not parse verification key.',
    ],
  ])('refuses %s as verification key', async (_why, jwk, message) => {
    const pointer = await signRaw('{"alg":"ES256","kid":"k"}', payload);
    const e = await failure(readSealedSecret(pointer, { resolveKey: async () => JSON.stringify(jwk()) }));
    expect(e.message).toBe(message);
  });

  it('reports a key that is not JSON without quoting it (a key file may hold a private key)', async () => {
    const pointer = await signRaw('{"alg":"ES256","kid":"k"}', payload);
    const e = await failure(readSealedSecret(pointer, { resolveKey: async () => '{"d":"TOPSECRETVALUE",' }));
    expect(e).toBeInstanceOf(KeyJsonError);
    expect(e.message).toMatch(/^JSON Parsing Error: /);
    expect(e.message).not.toContain('TOPSECRET');
  });

  it('refuses a signature of the wrong length or with r, s out of range', async () => {
    const { pub } = await testKeys();
    const good = await signRaw('{"alg":"ES256","kid":"k"}', payload);
    const base = good.slice(0, good.lastIndexOf('.') + 1);
    for (const sig of [
      Buffer.alloc(63, 1),
      Buffer.alloc(65, 1),
      Buffer.alloc(64, 0),
      Buffer.alloc(64, 0xff),
      Buffer.alloc(0),
    ]) {
      const e = await failure(readSealedSecret(`${base}${b64u(sig)}`, { resolveKey: async () => pub }));
      expect(e.message).toBe('Signature Error: signature error');
    }
  });

  it('accepts the DER-free raw r‖s only: a DER signature is refused', async () => {
    const { key, pub } = await testKeys();
    const input = `${b64u('{"alg":"ES256","kid":"k"}')}.${b64u(payload)}`;
    const der = sign('sha256', Buffer.from(input), {
      key: (await importJWK(key as never, 'ES256')) as never,
    });
    const e = await failure(
      readSealedSecret(`sealed.${input}.${b64u(der)}`, { resolveKey: async () => pub }),
    );
    expect(e).toBeInstanceOf(SignatureVerificationFailed);
    // Sanity: the same key verifies its raw signature.
    expect(createPublicKey({ key: pub as never, format: 'jwk' }).asymmetricKeyType).toBe('ec');
  });
});

describe('skip_sealed_secret_verification: the unsigned 4-piece form', () => {
  // kata CI's fake secret, from kata and guest-components documentation.
  const KATA_FAKE =
    'sealed.fakeheader.ewogICJ2ZXJzaW9uIjogIjAuMS4wIiwKICAidHlwZSI6ICJ2YXVsdCIsCiAgIm5hbWUiOiAia2JzOi8vL2RlZmF1bHQvdHlwZS90YWciLAogICJwcm92aWRlciI6ICJrYnMiLAogICJwcm92aWRlcl9zZXR0aW5ncyI6IHt9LAogICJhbm5vdGF0aW9ucyI6IHt9Cn0K.fakesignature';

  it('builds kata CI fake secret for kbs:///default/type/tag byte for byte', () => {
    const json = `${JSON.stringify(vaultPayload('kbs:///default/type/tag'), null, 2)}\n`;
    expect(unsignedSealedSecret(json)).toBe(KATA_FAKE);
  });

  it('reads it only in skip mode', async () => {
    const parsed = parseSealedSecret(KATA_FAKE, { skipVerification: true });
    expect(parsed).toEqual({ kind: 'unsigned', payload: vaultPayload('kbs:///default/type/tag') });
    const e = await failure(readSealedSecret(KATA_FAKE, { resolveKey: async () => '{}' }));
    expect(e.message).toBe('parse SealedSecret failed: Failed to parse JWS');
  });

  it('reads a signed pointer in skip mode without checking the signature', async () => {
    const { key2 } = await testKeys();
    const pointer = sealSecret(VAULT_2, { kid: 'test-key', privateJwk: key2 });
    const resolveKey = vi.fn(async () => '{}');
    expect(await readSealedSecret(pointer, { skipVerification: true, resolveKey })).toEqual(VAULT_2);
    expect(resolveKey).not.toHaveBeenCalled();
  });

  it.each([
    ['3 pieces', 'sealed.fakeheader.e30', 'malformed input sealed secret'],
    ['5 pieces (no prefix stripping in skip mode)', `sealed.${KATA_FAKE}`, 'malformed input sealed secret'],
    ['padding', 'sealed.h.e30=.s', 'failed to decode secret body as base64 (URL-safe without padding)'],
    [
      'standard alphabet',
      'sealed.h.e+30.s',
      'failed to decode secret body as base64 (URL-safe without padding)',
    ],
    [
      'non-canonical trailing bits',
      'sealed.h.e31.s',
      'failed to decode secret body as base64 (URL-safe without padding)',
    ],
    [
      'a body that is not a Secret',
      `sealed.h.${b64u('{"version":"0.1.0"}')}.s`,
      'malformed input sealed secret format (json deserialization failed)',
    ],
  ])('refuses %s', (_why, text, reason) => {
    const e = (() => {
      try {
        parseSealedSecret(text, { skipVerification: true });
      } catch (err) {
        return err as Error;
      }
      throw new Error('expected a failure');
    })();
    expect(e.message).toBe(`parse SealedSecret failed: ${reason}`);
  });
});

describe('hostile input', () => {
  const resolveKey = async () => '{}';

  it('refuses a pointer over 1 MiB before parsing', async () => {
    const big = `sealed.${'A'.repeat(MAX_SEALED_SECRET_BYTES)}`;
    for (const skipVerification of [false, true]) {
      const e = await failure(readSealedSecret(big, { resolveKey, skipVerification }));
      expect(e.message).toBe(
        `parse SealedSecret failed: sealed secret is larger than ${MAX_SEALED_SECRET_BYTES} bytes`,
      );
    }
  });

  it('refuses bytes that are not UTF-8', async () => {
    const e = await failure(readSealedSecret(Buffer.from([0x73, 0x65, 0xff, 0xfe]), { resolveKey }));
    expect(e.message).toBe('parse SealedSecret failed: Secret string must be UTF-8');
  });

  it.each([
    ['empty', ''],
    ['the prefix only', 'sealed.'],
    ['dots only', 'sealed...'],
    ['garbage base64 in the header', 'sealed.@@@.e30.AAAA'],
    [
      'padding in the header',
      `sealed.${Buffer.from('{"alg":"ES256","kid":"k"}').toString('base64')}.e30.AAAA`,
    ],
    ['garbage base64 in the payload', `sealed.${b64u('{"alg":"ES256","kid":"k"}')}.!!!.AAAA`],
    ['garbage base64 in the signature', `sealed.${b64u('{"alg":"ES256","kid":"k"}')}.e30.*`],
    ['a header of NUL bytes', `sealed.${b64u(Buffer.alloc(40))}.e30.AAAA`],
    [
      'a header nested 10 000 levels',
      `sealed.${b64u(`${'['.repeat(10_000)}${']'.repeat(10_000)}`)}.e30.AAAA`,
    ],
    ['four pieces', `sealed.${b64u('{"alg":"ES256","kid":"k"}')}.e30.AAAA.AAAA`],
  ])('refuses %s', async (_why, text) => {
    const e = await failure(readSealedSecret(text, { resolveKey }));
    expect(e).toBeInstanceOf(SealedSecretParseFailed);
  });

  it('refuses a validly signed payload nested deeper than serde_json allows', async () => {
    const { pub } = await testKeys();
    const deep = `${'{"a":'.repeat(MAX_JSON_DEPTH)}1${'}'.repeat(MAX_JSON_DEPTH)}`;
    const payload = `{"version":"0.1.0","type":"vault","name":"n","provider":"kbs","provider_settings":${deep},"annotations":{}}`;
    const pointer = await signRaw('{"alg":"ES256","kid":"k"}', payload);
    const e = await failure(readSealedSecret(pointer, { resolveKey: async () => pub }));
    expect(e.message).toMatch(/json deserialization failed/);
    // One level less is fine.
    const ok = `${'{"a":'.repeat(MAX_JSON_DEPTH - 2)}1${'}'.repeat(MAX_JSON_DEPTH - 2)}`;
    const fine = await signRaw('{"alg":"ES256","kid":"k"}', payload.replace(deep, ok));
    expect((await readSealedSecret(fine, { resolveKey: async () => pub })).type).toBe('vault');
  });

  it('refuses a huge key document', async () => {
    const pointer = await signRaw('{"alg":"ES256","kid":"k"}', serializePayload(VAULT_2));
    const e = await failure(
      readSealedSecret(pointer, { resolveKey: async () => `{"kty":"EC","pad":"${'x'.repeat(100_000)}"}` }),
    );
    expect(e).toBeInstanceOf(KeyJsonError);
  });

  it('verifySealedSecret refuses a hand-built parse result with the wrong alg', async () => {
    const parsed: SignedSealedSecret = {
      kind: 'signed',
      header: {},
      alg: 'ES384',
      kid: 'k',
      signingInput: 'a.b',
      signature: Buffer.alloc(96),
      payload: null,
    };
    await expect(verifySealedSecret(parsed, async () => '{}')).rejects.toThrow(SigningKeyError);
  });
});

describe('describeSealedSecret (what the logs may show)', () => {
  it('gives kid and resource of signed and unsigned pointers, never more', async () => {
    const { key } = await testKeys();
    const pointer = sealSecret(VAULT_2, { kid: 'kbs:///default/k/jwk_public', privateJwk: key });
    expect(describeSealedSecret(pointer)).toEqual({
      kid: 'kbs:///default/k/jwk_public',
      type: 'vault',
      resource: 'kbs:///one/2/trois',
    });
    expect(describeSealedSecret(unsignedSealedSecret(serializePayload(VAULT_2)))).toEqual({
      type: 'vault',
      resource: 'kbs:///one/2/trois',
    });
    expect(describeSealedSecret('sealed.garbage')).toEqual({});
    expect(describeSealedSecret(Buffer.from([0xff]))).toEqual({});
  });

  it('escapes control characters of an untrusted resource name', () => {
    const p = unsignedSealedSecret(serializePayload(vaultPayload('kbs:///a/b/c\n{"forged":"log"}')));
    expect(describeSealedSecret(p).resource).toBe('kbs:///a/b/c\\u000a{"forged":"log"}');
  });
});
