// trustee's ReportData::NotProvided (a request without runtime data, e.g. the attestation agent's
// coco_as token): trustee's cca verifier refuses it ("CCA verifier must provide report data field!")
// with local stores and with Veraison alike. The realm challenge a token carries without runtime
// data (64 zero bytes: the kernel pads the empty challenge) must not pass for "not provided", nor
// when runtime data is provided.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { verificationFailure } from '../testing/failure.js';
import type { ExpectedData } from '../verifier.js';
import { CcaVerifier } from './index.js';
import { type MockVeraison, startMockVeraison } from './mock-veraison.js';
import { parseRvStore, parseTaStore } from './stores.js';
import { createTestCcaPlatform } from './test-token.js';
import { parseCcaToken } from './token.js';

const platform = createTestCcaPlatform();
const stores = platform.stores;
/** A realm token requested without runtime data. */
const ZERO_CHALLENGE_TOKEN = { token: [...platform.token(new Uint8Array(0))] };
/** The KBS's report data: SHA-384 of the runtime data's canonical JSON. */
const REPORT_DATA = createHash('sha384').update('{"nonce":"n","tee-pubkey":{}}').digest();
const NOT_PROVIDED = { reportData: new Uint8Array(0), reportDataNotProvided: true } as const;

const verifier = new CcaVerifier();

describe('cca without runtime data (ReportData::NotProvided), local stores', () => {
  it('refuses a realm token with the all-zero challenge, as trustee does; provided runtime data still decides', async () => {
    expect(parseCcaToken(Buffer.from(ZERO_CHALLENGE_TOKEN.token)).realmClaims.challenge).toEqual(
      Buffer.alloc(64),
    );
    const e = await verificationFailure(
      verifier.evaluate(ZERO_CHALLENGE_TOKEN, { ...NOT_PROVIDED, cca: { stores } }),
    );
    expect(e.code).toBe('REPORT_DATA_MISMATCH');
    expect(e.message).toMatch(/needs runtime data: none was provided/);
    // The same token when runtime data was provided: bound to nothing, refused.
    const provided = await verificationFailure(
      verifier.evaluate(ZERO_CHALLENGE_TOKEN, { reportData: REPORT_DATA, cca: { stores } }),
    );
    expect(provided.code).toBe('REPORT_DATA_MISMATCH');
    expect(provided.message).toMatch(/realm challenge is not the expected report data/);
    // A token bound to the runtime data passes.
    const bound = { token: [...platform.token(REPORT_DATA)] };
    const [r] = await verifier.evaluate(bound, { reportData: REPORT_DATA, cca: { stores } });
    expect(r!.claims.report_data).toBe(Buffer.concat([REPORT_DATA, Buffer.alloc(16)]).toString('hex'));
  });

  it('the flag decides: even report data matching the challenge is not compared when marked not provided', async () => {
    const bound = { token: [...platform.token(REPORT_DATA)] };
    const e = await verificationFailure(
      verifier.evaluate(bound, { reportData: REPORT_DATA, reportDataNotProvided: true, cca: { stores } }),
    );
    expect(e.message).toMatch(/needs runtime data/);
  });

  it("refuses trustee's example token without runtime data, before reading a CCA config file", async () => {
    const file = (name: string) => readFileSync(vector(`trustee/cca/${name}`));
    const example = { token: [...file('cca-example-token.cbor')] };
    const trusteeStores = {
      trustAnchors: parseTaStore(file('tastore.json').toString()),
      platformRefValues: parseRvStore(file('rvstore.json').toString()),
    };
    const e = await verificationFailure(
      verifier.evaluate(example, { ...NOT_PROVIDED, cca: { stores: trusteeStores } }),
    );
    expect(e.message).toMatch(/needs runtime data/);
    const noConfig = await verificationFailure(
      verifier.evaluate(example, { ...NOT_PROVIDED, cca: { configPath: '/nonexistent/cca-config.json' } }),
    );
    expect(noConfig.code).toBe('REPORT_DATA_MISMATCH');
    expect(noConfig.message).toMatch(/needs runtime data/);
  });
});

describe('cca without runtime data, remote mode (Veraison)', () => {
  let veraison: MockVeraison;
  beforeAll(async () => {
    veraison = await startMockVeraison(stores);
  });
  afterAll(async () => {
    await veraison.close();
  });
  beforeEach(() => {
    veraison.submissions.length = 0;
  });
  const remote = (expected: Pick<ExpectedData, 'reportData' | 'reportDataNotProvided'>): ExpectedData => ({
    ...expected,
    cca: { remote: { address: veraison.address } },
  });

  it('refuses without opening a Veraison session, even for a token whose challenge is all zeros', async () => {
    const e = await verificationFailure(verifier.evaluate(ZERO_CHALLENGE_TOKEN, remote(NOT_PROVIDED)));
    expect(e.code).toBe('REPORT_DATA_MISMATCH');
    expect(e.message).toMatch(/needs runtime data/);
    expect(veraison.submissions).toHaveLength(0);
    // With runtime data, the session carries its 64 bytes as the nonce.
    const bound = { token: [...platform.token(REPORT_DATA)] };
    await expect(verifier.evaluate(bound, remote({ reportData: REPORT_DATA }))).resolves.toHaveLength(1);
    expect(veraison.submissions.map((s) => s.nonce)).toEqual([
      Buffer.concat([REPORT_DATA, Buffer.alloc(16)]).toString('base64url'),
    ]);
  });
});
