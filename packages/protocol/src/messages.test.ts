import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.js';
import { generateTeeKeyPair } from './jwe.js';
import { parseTeePubKey, teePubKeyToKeyObject } from './jwk.js';
import { parseAttestation, parseChallenge, parseJson, parseKbsRequest } from './messages.js';
import { isTee, PROTOCOL_VERSION, TEES } from './tee.js';

const ec = generateTeeKeyPair().publicJwk;
const ecJwk = ec as { kty: 'EC'; crv: 'P-256'; alg: string; x: string; y: string };
const rsaPub = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ format: 'jwk' });

function expectField(fn: () => unknown, field: string | RegExp): void {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ProtocolError);
    const f = (e as ProtocolError).field;
    if (typeof field === 'string') expect(f).toBe(field);
    else expect(f).toMatch(field);
    return;
  }
  expect.fail('expected a ProtocolError');
}

describe('Tee', () => {
  it('lists the kbs-types names and matches case-sensitively', () => {
    expect(TEES).toHaveLength(13);
    expect(isTee('az-snp-vtpm')).toBe(true);
    expect(isTee('sample')).toBe(true);
    expect(isTee('Sample')).toBe(false);
    expect(isTee('AzSnpVtpm')).toBe(false);
    expect(isTee(1)).toBe(false);
    expect(PROTOCOL_VERSION).toBe('0.4.0');
  });
});

describe('parseKbsRequest', () => {
  const guest = {
    version: '0.4.0',
    tee: 'sample',
    'extra-params': { 'supported-hash-algorithms': ['sha256', 'sha384', 'sha512', 'sm3'] },
  };

  it('accepts what the guest sends', () => {
    expect(parseKbsRequest(guest)).toEqual(guest);
    expect(parseKbsRequest({ ...guest, 'extra-params': '' })['extra-params']).toBe('');
  });

  it('accepts semver build metadata, which =0.4.0 ignores', () => {
    expect(parseKbsRequest({ ...guest, version: '0.4.0+build.1' }).version).toBe('0.4.0+build.1');
  });

  it.each(['0.1.1', '0.4.1', '0.4', '0.4.0-rc1', ' 0.4.0', '0.4.0\n', 'v0.4.0', '00.4.0', '0.4.0+', ''])(
    'rejects version %j',
    (version) => {
      expectField(() => parseKbsRequest({ ...guest, version }), 'version');
    },
  );

  it.each([
    ['a non-object body', 'x', 'request'],
    ['null', null, 'request'],
    ['an array', [guest], 'request'],
    ['a numeric version', { ...guest, version: 0.4 }, 'version'],
    ['an oversize version', { ...guest, version: `0.4.0+${'a'.repeat(100)}` }, 'version'],
    ['an unknown tee', { ...guest, tee: 'sev' }, 'tee'],
    ['an uppercase tee', { ...guest, tee: 'TDX' }, 'tee'],
    ['a numeric tee', { ...guest, tee: 3 }, 'tee'],
    ['missing extra-params', { version: '0.4.0', tee: 'tdx' }, 'extra-params'],
  ])('rejects %s', (_n, body, field) => {
    expectField(() => parseKbsRequest(body), field);
  });
});

describe('parseChallenge', () => {
  it('accepts the KBS challenge forms', () => {
    const nonce = Buffer.alloc(32, 1).toString('base64');
    expect(parseChallenge({ nonce, 'extra-params': '' })).toEqual({ nonce, 'extra-params': '' });
    const se = { nonce, 'extra-params': { 'selected-hash-algorithm': 'sha512' } };
    expect(parseChallenge(se)).toEqual(se);
  });
  it.each([
    [{ 'extra-params': '' }, 'nonce'],
    [{ nonce: '', 'extra-params': '' }, 'nonce'],
    [{ nonce: 5, 'extra-params': '' }, 'nonce'],
    [{ nonce: 'a'.repeat(1025), 'extra-params': '' }, 'nonce'],
    [{ nonce: 'abc' }, 'extra-params'],
    ['text', 'challenge'],
  ])('rejects %j', (body, field) => {
    expectField(() => parseChallenge(body), field);
  });
});

describe('parseAttestation', () => {
  const good = {
    'init-data': null,
    'runtime-data': { nonce: 'bm9uY2U=', 'tee-pubkey': ec },
    'tee-evidence': { primary_evidence: { svn: '1', report_data: 'AA==' }, additional_evidence: '' },
  };

  it('accepts the guest body and keeps the evidence verbatim', () => {
    expect(parseAttestation(good)).toEqual(good);
  });

  it('treats a missing init-data as null and keeps a TOML init-data', () => {
    const { 'init-data': _, ...rest } = good;
    expect(parseAttestation(rest)['init-data']).toBeNull();
    const withInit = { ...good, 'init-data': { format: 'toml', body: 'version = "0.1.0"' } };
    expect(parseAttestation(withInit)['init-data']).toEqual({ format: 'toml', body: 'version = "0.1.0"' });
  });

  it('drops unknown JWK members of the TEE key', () => {
    const body = {
      ...good,
      'runtime-data': { nonce: 'n', 'tee-pubkey': { ...ec, use: 'enc', kid: 'k', d: 'secret' } },
    };
    expect(parseAttestation(body)['runtime-data']['tee-pubkey']).toEqual(ec);
  });

  it.each([
    ['not an object', 42, 'attestation'],
    ['init-data not an object', { ...good, 'init-data': 'toml' }, 'init-data'],
    ['init-data without body', { ...good, 'init-data': { format: 'toml' } }, 'init-data.body'],
    ['missing runtime-data', { ...good, 'runtime-data': undefined }, 'runtime-data'],
    ['runtime-data an array', { ...good, 'runtime-data': [] }, 'runtime-data'],
    ['nonce a number', { ...good, 'runtime-data': { nonce: 1, 'tee-pubkey': ec } }, 'runtime-data.nonce'],
    ['missing tee-pubkey', { ...good, 'runtime-data': { nonce: 'n' } }, 'runtime-data.tee-pubkey'],
    [
      'bad tee-pubkey',
      { ...good, 'runtime-data': { nonce: 'n', 'tee-pubkey': { kty: 'oct' } } },
      /^runtime-data\.tee-pubkey/,
    ],
    ['missing tee-evidence', { ...good, 'tee-evidence': undefined }, 'tee-evidence'],
    [
      'missing primary_evidence',
      { ...good, 'tee-evidence': { additional_evidence: '' } },
      'tee-evidence.primary_evidence',
    ],
    [
      'non-string additional_evidence',
      { ...good, 'tee-evidence': { primary_evidence: {}, additional_evidence: {} } },
      'tee-evidence.additional_evidence',
    ],
  ])('rejects %s', (_n, body, field) => {
    expectField(() => parseAttestation(body), field);
  });
});

describe('parseTeePubKey', () => {
  it('accepts the guest EC and RSA forms and returns only known members', () => {
    expect(parseTeePubKey(ec)).toEqual(ec);
    const rsa = { kty: 'RSA', alg: 'RSA-OAEP-256', n: rsaPub.n, e: rsaPub.e, ext: true };
    expect(parseTeePubKey(rsa)).toEqual({ kty: 'RSA', alg: 'RSA-OAEP-256', n: rsaPub.n, e: rsaPub.e });
    expect(Object.keys(parseTeePubKey({ ...ec, extra: 1 }))).toEqual(['kty', 'crv', 'alg', 'x', 'y']);
  });

  it('builds a working KeyObject', () => {
    const key = teePubKeyToKeyObject(ec);
    expect(key.type).toBe('public');
    expect(key.export({ format: 'jwk' })).toMatchObject({ x: ecJwk.x, y: ecJwk.y });
  });

  it('accepts P-384 and P-521 points', () => {
    for (const namedCurve of ['secp384r1', 'secp521r1']) {
      const j = generateKeyPairSync('ec', { namedCurve }).publicKey.export({ format: 'jwk' });
      expect(parseTeePubKey({ kty: 'EC', crv: j.crv, alg: 'ECDH-ES+A256KW', x: j.x, y: j.y }).kty).toBe('EC');
    }
  });

  const offCurveY = (() => {
    const y = Buffer.from(ecJwk.y, 'base64url');
    y[31] = (y[31] ?? 0) ^ 1;
    return y.toString('base64url');
  })();
  // 32 bytes take 43 characters whose last one has two unused low bits; setting one is non-canonical.
  const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const nonCanonicalX = ecJwk.x.slice(0, -1) + B64URL[B64URL.indexOf(ecJwk.x.slice(-1)) | 1];
  const p = Buffer.from('ffffffff00000001000000000000000000000000ffffffffffffffffffffffff', 'hex').toString(
    'base64url',
  );
  const evenN = (() => {
    const n = Buffer.from(rsaPub.n ?? '', 'base64url');
    n[n.length - 1] = (n[n.length - 1] ?? 0) & 0xfe;
    return n.toString('base64url');
  })();

  it.each([
    ['a string', 'jwk', 'tee-pubkey'],
    ['an array', [], 'tee-pubkey'],
    ['missing kty', { crv: 'P-256', x: ecJwk.x, y: ecJwk.y, alg: 'a' }, 'tee-pubkey.kty'],
    ['kty oct', { kty: 'oct', k: 'AAAA' }, 'tee-pubkey.kty'],
    ['kty OKP', { kty: 'OKP', crv: 'X25519', x: 'AAAA' }, 'tee-pubkey.kty'],
    ['lowercase kty', { ...ec, kty: 'ec' }, 'tee-pubkey.kty'],
    ['unknown curve', { ...ec, crv: 'secp256k1' }, 'tee-pubkey.crv'],
    ['missing alg', { kty: 'EC', crv: 'P-256', x: ecJwk.x, y: ecJwk.y }, 'tee-pubkey.alg'],
    ['oversize alg', { ...ec, alg: 'A'.repeat(65) }, 'tee-pubkey.alg'],
    ['padded x', { ...ec, x: `${ecJwk.x}=` }, 'tee-pubkey.x'],
    ['standard-alphabet x', { ...ec, x: `+${ecJwk.x.slice(1)}` }, 'tee-pubkey.x'],
    ['non-canonical trailing bits', { ...ec, x: nonCanonicalX }, 'tee-pubkey.x'],
    ['short x', { ...ec, x: ecJwk.x.slice(0, 40) }, 'tee-pubkey.x'],
    ['P-521 length on P-256', { ...ec, y: Buffer.alloc(66, 1).toString('base64url') }, 'tee-pubkey.y'],
    ['an off-curve point', { ...ec, y: offCurveY }, 'tee-pubkey'],
    ['x = p', { ...ec, x: p }, 'tee-pubkey'],
    ['the zero point', { ...ec, x: 'A'.repeat(43), y: 'A'.repeat(43) }, 'tee-pubkey'],
    ['RSA without n', { kty: 'RSA', alg: 'RSA-OAEP-256', e: 'AQAB' }, 'tee-pubkey.n'],
    [
      'RSA 1024-bit',
      { kty: 'RSA', alg: 'RSA-OAEP-256', n: Buffer.alloc(128, 0xff).toString('base64url'), e: 'AQAB' },
      'tee-pubkey.n',
    ],
    ['RSA even modulus', { kty: 'RSA', alg: 'RSA-OAEP-256', n: evenN, e: 'AQAB' }, 'tee-pubkey.n'],
    ['RSA e = 1', { kty: 'RSA', alg: 'RSA-OAEP-256', n: rsaPub.n, e: 'AQ' }, 'tee-pubkey.e'],
    ['RSA even e', { kty: 'RSA', alg: 'RSA-OAEP-256', n: rsaPub.n, e: 'AQAA' }, 'tee-pubkey.e'],
    ['RSA huge e', { kty: 'RSA', alg: 'RSA-OAEP-256', n: rsaPub.n, e: 'AQAAAAAB' }, 'tee-pubkey.e'],
    ['RSA oversize n', { kty: 'RSA', alg: 'RSA-OAEP-256', n: 'A'.repeat(20000), e: 'AQAB' }, 'tee-pubkey.n'],
  ])('rejects %s', (_n, jwk, field) => {
    expectField(() => parseTeePubKey(jwk), field);
  });
});

describe('parseJson', () => {
  it('parses text and bytes', () => {
    expect(parseJson('{"a":1}')).toEqual({ a: 1 });
    expect(parseJson(Buffer.from('[1]'))).toEqual([1]);
  });
  it('rejects oversize, invalid UTF-8 and malformed JSON with ProtocolError', () => {
    expectField(() => parseJson('[1]', 2), 'body');
    expectField(() => parseJson(Buffer.from([0x22, 0xff, 0x22])), 'body');
    expectField(() => parseJson('{"a":'), 'body');
    expectField(() => parseJson(''), 'body');
  });
});
