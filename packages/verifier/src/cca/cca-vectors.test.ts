// trustee's CCA example token verifies with its CPAK (TA store) and RV store and gives trustee's
// claims; tampering with a signed byte, the binding, the reference values or the challenge fails.
import { createPrivateKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { decode, type Tag } from 'cbor2';
import { afterAll, describe, expect, it } from 'vitest';
import { VerificationError } from '../errors.js';
import { getVerifier } from '../registry.js';
import type { ExpectedData } from '../verifier.js';
import { CcaVerifier } from './index.js';
import { parseRvStore, parseTaStore } from './stores.js';
import { type ClaimsMap, encodeCcaToken, rawPublicPoint } from './test-token.js';
import { parseCcaToken } from './token.js';

const file = (name: string) => readFileSync(vector(`trustee/cca/${name}`));
const TOKEN = file('cca-example-token.cbor');
const STORES = {
  trustAnchors: parseTaStore(file('tastore.json').toString()),
  platformRefValues: parseRvStore(file('rvstore.json').toString()),
};
const CHALLENGE = parseCcaToken(TOKEN).realmClaims.challenge;
const jwkKey = (name: string): KeyObject =>
  createPrivateKey({ key: JSON.parse(file(name).toString()), format: 'jwk' });
const CPAK = jwkKey('cpak-priv.json');
const RAK = jwkKey('rak-priv.json');
const verifier = new CcaVerifier();

const evidence = (token: Uint8Array) => ({ token: [...token] });
const expected = (extra: Partial<ExpectedData> = {}): ExpectedData => ({
  reportData: CHALLENGE,
  cca: { stores: STORES },
  ...extra,
});

async function failure(token: Uint8Array, exp: ExpectedData = expected()): Promise<VerificationError> {
  const e = await verifier.evaluate(evidence(token), exp).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(VerificationError);
  return e as VerificationError;
}

/** The example's claims, decoded, to change and re-sign with trustee's test CPAK and RAK. */
function exampleClaims(): { platform: ClaimsMap; realm: ClaimsMap } {
  const collection = (decode(TOKEN, { preferMap: true }) as Tag).contents as Map<number, Uint8Array>;
  const payload = (label: number) => {
    const sign1 = (decode(collection.get(label)!, { preferMap: true }) as Tag).contents as Uint8Array[];
    return decode(sign1[2]!, { preferMap: true }) as ClaimsMap;
  };
  return { platform: payload(44234), realm: payload(44241) };
}

function flipAt(bytes: Buffer, needleHex: string): Buffer {
  const out = Buffer.from(bytes);
  const at = out.indexOf(Buffer.from(needleHex, 'hex'));
  expect(at).toBeGreaterThan(0);
  out[at]! ^= 0x01;
  return out;
}

const dir = mkdtempSync(join(tmpdir(), 'cca-vectors-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('trustee CCA example token', () => {
  it('the registry serves the cca verifier', () => {
    expect(getVerifier('cca')).toBeInstanceOf(CcaVerifier);
  });

  it('verifies with its CPAK and RV store and gives the claims trustee names', async () => {
    const ta = JSON.parse(file('tastore.json').toString())[0];
    const rv = JSON.parse(file('rvstore.json').toString()).realm[0];
    const [r] = await verifier.evaluate(evidence(TOKEN), expected());
    expect(r!.class).toBe('cpu');
    const b64 = (hex: string) => Buffer.from(hex, 'hex').toString('base64');
    expect(r!.claims).toStrictEqual({
      realm: {
        'cca-realm-challenge': CHALLENGE.toString('base64'),
        'cca-realm-extensible-measurements': rv['extensible-measurements'].map(b64),
        'cca-realm-hash-algo-id': 'sha-512',
        'cca-realm-initial-measurement': b64(rv['initial-measurement']),
        'cca-realm-personalization-value': b64(rv['personalization-value']),
      },
      platform: {
        'cca-platform-instance-id': b64(ta['instance-id']),
        'cca-platform-implementation-id': b64(ta['implementation-id']),
      },
      report_data: CHALLENGE.toString('hex'),
      init_data: rv['personalization-value'],
    });
  });

  it('reads the stores through trustee config file (CCA config, local type)', async () => {
    writeFileSync(join(dir, 'tastore.json'), file('tastore.json'));
    writeFileSync(join(dir, 'rvstore.json'), file('rvstore.json'));
    const config = JSON.parse(file('cca-config-local.json').toString());
    config['cca-verifier']['ta-store'] = join(dir, 'tastore.json');
    config['cca-verifier']['rv-store'] = join(dir, 'rvstore.json');
    writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
    await expect(
      verifier.evaluate(evidence(TOKEN), {
        reportData: CHALLENGE,
        cca: { configPath: join(dir, 'config.json') },
      }),
    ).resolves.toHaveLength(1);
    const e = await failure(TOKEN, { reportData: CHALLENGE, cca: { configPath: join(dir, 'missing.json') } });
    expect(e.code).toBe('COLLATERAL_UNAVAILABLE');
  });

  it('the CPAK file equals the TA store key', () => {
    const pub = JSON.parse(file('cpak-pub.json').toString());
    expect(STORES.trustAnchors[0]!.key.export({ format: 'jwk' })).toMatchObject({ x: pub.x, y: pub.y });
  });

  it('re-signing the unchanged claims with trustee test keys verifies (the builder is faithful)', async () => {
    const { platform, realm } = exampleClaims();
    await expect(
      verifier.evaluate(evidence(encodeCcaToken(platform, realm, CPAK, RAK)), expected()),
    ).resolves.toHaveLength(1);
  });

  it('a flipped byte in the platform token fails its signature', async () => {
    const e = await failure(flipAt(TOKEN, '7f454c4602010100'));
    expect(e.code).toBe('REPORT_SIGNATURE_INVALID');
    expect(e.message).toMatch(/platform token signature .* CPAK/);
  });

  it('a flipped byte in the realm token fails its signature', async () => {
    const e = await failure(flipAt(TOKEN, CHALLENGE.subarray(0, 8).toString('hex')));
    expect(e.code).toBe('REPORT_SIGNATURE_INVALID');
    expect(e.message).toMatch(/realm token signature .*\(RAK\)/);
  });

  it('a wrong challenge fails the report data check', async () => {
    const reportData = Buffer.from(CHALLENGE);
    reportData[63]! ^= 1;
    const e = await failure(TOKEN, expected({ reportData }));
    expect(e.code).toBe('REPORT_DATA_MISMATCH');
  });

  it('a realm token signed by another key than the bound RAK fails the binding', async () => {
    const { platform, realm } = exampleClaims();
    const other = generateKeyPairSync('ec', { namedCurve: 'P-384' });
    realm.set(44237, rawPublicPoint(other.publicKey));
    const e = await failure(encodeCcaToken(platform, realm, CPAK, other.privateKey));
    expect(e.code).toBe('CERT_CHAIN_INVALID');
    expect(e.message).toMatch(/RAK not bound/);
  });

  it('a platform token signed by another key than the CPAK fails', async () => {
    const { platform, realm } = exampleClaims();
    const other = generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey;
    const e = await failure(encodeCcaToken(platform, realm, other, RAK));
    expect(e.code).toBe('REPORT_SIGNATURE_INVALID');
  });

  it('an unknown instance ID has no CPAK', async () => {
    const e = await failure(TOKEN, expected({ cca: { stores: { ...STORES, trustAnchors: [] } } }));
    expect(e.code).toBe('CERT_CHAIN_INVALID');
    expect(e.message).toMatch(/no CPAK/);
  });

  it('a signed platform whose sw-components differ from the RV store fails', async () => {
    const { platform, realm } = exampleClaims();
    const comps = platform.get(2399) as Map<number, unknown>[];
    platform.set(2399, comps.slice(0, -1));
    const e = await failure(encodeCcaToken(platform, realm, CPAK, RAK));
    expect(e.code).toBe('TCB_NOT_SUPPORTED');
    const e2 = await failure(TOKEN, expected({ cca: { stores: { ...STORES, platformRefValues: [] } } }));
    expect(e2.message).toMatch(/implementation-id .* no reference value/);
  });

  it('initdata is compared with the personalization value as is, as trustee does', async () => {
    await expect(
      verifier.evaluate(evidence(TOKEN), expected({ initDataHash: Buffer.alloc(64) })),
    ).resolves.toHaveLength(1);
    const e = await failure(TOKEN, expected({ initDataHash: Buffer.alloc(32) }));
    expect(e.code).toBe('INIT_DATA_MISMATCH');
  });

  it('a token sent as a base64 string (not serde bytes) is malformed', async () => {
    const e = await verifier
      .evaluate({ token: TOKEN.toString('base64') }, expected())
      .catch((x: unknown) => x);
    expect((e as VerificationError).code).toBe('EVIDENCE_MALFORMED');
  });
});
