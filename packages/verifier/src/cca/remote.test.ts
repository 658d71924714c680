// CCA remote mode against a local mock Veraison: the exchange trustee's client runs, the EAR checks.
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { VerificationError } from '../errors.js';
import type { ExpectedData } from '../verifier.js';
import { CcaVerifier } from './index.js';
import { type MockVeraison, startMockVeraison } from './mock-veraison.js';
import { CCA_MEDIA_TYPE } from './remote.js';
import { parseRvStore, parseTaStore } from './stores.js';
import { parseCcaToken } from './token.js';

const file = (name: string) => readFileSync(vector(`trustee/cca/${name}`));
const TOKEN = file('cca-example-token.cbor');
const STORES = {
  trustAnchors: parseTaStore(file('tastore.json').toString()),
  platformRefValues: parseRvStore(file('rvstore.json').toString()),
};
const CHALLENGE = parseCcaToken(TOKEN).realmClaims.challenge;
const verifier = new CcaVerifier();
const dir = mkdtempSync(join(tmpdir(), 'cca-remote-'));
let veraison: MockVeraison;

beforeAll(async () => {
  veraison = await startMockVeraison(STORES);
});
afterAll(async () => {
  await veraison.close();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  veraison.tamper = undefined;
  veraison.submissions.length = 0;
});

const remote = (): ExpectedData => ({
  reportData: CHALLENGE,
  cca: { remote: { address: veraison.address } },
});

async function failure(exp: ExpectedData): Promise<VerificationError> {
  const e = await verifier.evaluate({ token: [...TOKEN] }, exp).then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(VerificationError);
  return e as VerificationError;
}

describe('cca remote mode (Veraison)', () => {
  it('gives the same claims as local verification of trustee example token', async () => {
    const [local] = await verifier.evaluate(
      { token: [...TOKEN] },
      { reportData: CHALLENGE, cca: { stores: STORES } },
    );
    const [r] = await verifier.evaluate({ token: [...TOKEN] }, remote());
    expect(r!.claims).toStrictEqual(local!.claims);
    expect(veraison.submissions).toEqual([
      { contentType: CCA_MEDIA_TYPE, nonce: CHALLENGE.toString('base64url') },
    ]);
  });

  it('is selected by a CCA config file of type remote', async () => {
    writeFileSync(
      join(dir, 'config.json'),
      JSON.stringify({ 'cca-verifier': { type: 'remote', address: veraison.address } }),
    );
    await expect(
      verifier.evaluate(
        { token: [...TOKEN] },
        { reportData: CHALLENGE, cca: { configPath: join(dir, 'config.json') } },
      ),
    ).resolves.toHaveLength(1);
  });

  it('an EAR not signed by the discovered key is refused', async () => {
    veraison.tamper = { signWith: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey };
    const e = await failure(remote());
    expect(e.code).toBe('COLLATERAL_INVALID');
    expect(e.message).toMatch(/EAR signature/);
  });

  it('an EAR with another nonce is refused', async () => {
    veraison.tamper = { eatNonce: Buffer.alloc(64, 1).toString('base64url') };
    expect((await failure(remote())).code).toBe('REPORT_DATA_MISMATCH');
  });

  it('a session that does not complete, or a service that cannot appraise the token, fails closed', async () => {
    veraison.tamper = { status: 'processing' };
    expect((await failure(remote())).code).toBe('COLLATERAL_UNAVAILABLE');
    const other = await startMockVeraison({ trustAnchors: [], platformRefValues: [] });
    try {
      const e = await failure({ reportData: CHALLENGE, cca: { remote: { address: other.address } } });
      expect(e.message).toMatch(/failed/);
    } finally {
      await other.close();
    }
  });

  it('an unreachable service fails closed, naming the URL', async () => {
    const e = await failure({ reportData: CHALLENGE, cca: { remote: { address: 'http://127.0.0.1:1' } } });
    expect(e.code).toBe('COLLATERAL_UNAVAILABLE');
    expect(e.message).toMatch(/127\.0\.0\.1:1\/\.well-known\/veraison\/verification/);
  });
});
