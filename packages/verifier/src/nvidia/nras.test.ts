// Remote mode against a local mock NRAS: the request trustee sends, the tokens' checks, the nonce.
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { verificationFailure } from '../testing/failure.js';
import { NvidiaVerifier } from './index.js';
import { type MockNras, startMockNras } from './mock-nras.js';

const text = (name: string) => readFileSync(vector(`trustee/nvidia/${name}`), 'utf8');
const REPORT = text('hopperAttestationReport.txt');
const CHAIN_B64 = Buffer.from(text('hopper_cert_chain_case1.txt')).toString('base64');
const NONCE = Buffer.from('931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb', 'hex');
const EVIDENCE = { device_evidence_list: [{ arch: 'HOPPER', evidence: REPORT, certificate: CHAIN_B64 }] };

let nras: MockNras;
beforeAll(async () => {
  nras = await startMockNras();
});
afterAll(async () => {
  await nras.close();
});
beforeEach(() => {
  nras.tamper = undefined;
  nras.requests.length = 0;
});

const verifier = new NvidiaVerifier();
const expected = (reportData = NONCE) => ({
  reportData,
  nvidia: { remote: { verifierUrl: nras.url, jwksUrl: nras.jwksUrl } },
});

describe('nvidia remote mode (NRAS)', () => {
  it("sends trustee's request and returns the device token claims with the overall result", async () => {
    const [r] = await verifier.evaluate(EVIDENCE, expected());
    expect(r!.class).toBe('gpu');
    expect(r!.claims).toMatchObject({
      'x-nvidia-gpu-attestation-report-nonce-match': true,
      'x-nvidia-overall-att-result': true,
      iss: 'https://nras.mock',
    });
    expect(nras.requests).toEqual([
      {
        nonce: NONCE.toString('hex'),
        arch: 'HOPPER',
        evidence_list: [{ evidence: Buffer.from(REPORT, 'hex').toString('base64'), certificate: CHAIN_B64 }],
        claims_version: '3.0',
      },
    ]);
  });

  it('a nonce NRAS reports as not matching fails the report data check', async () => {
    const e = await verificationFailure(verifier.evaluate(EVIDENCE, expected(Buffer.alloc(32, 1))));
    expect(e.code).toBe('REPORT_DATA_MISMATCH');
  });

  it('tokens signed by a key outside the JWKS, with an unknown kid, or expired, are refused', async () => {
    nras.tamper = { signWith: generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey };
    expect((await verificationFailure(verifier.evaluate(EVIDENCE, expected()))).message).toMatch(
      /signature does not verify/,
    );
    nras.tamper = { kid: 'other' };
    expect((await verificationFailure(verifier.evaluate(EVIDENCE, expected()))).message).toMatch(
      /kid is not in/,
    );
    nras.tamper = { payload: { exp: 1000 } };
    expect((await verificationFailure(verifier.evaluate(EVIDENCE, expected()))).message).toMatch(
      /device token expired/,
    );
    nras.tamper = { payload: { nbf: 'soon' } };
    expect((await verificationFailure(verifier.evaluate(EVIDENCE, expected()))).message).toMatch(
      /integer exp, iat, nbf/,
    );
  });

  it('answers not in NRAS shape are refused', async () => {
    for (const answer of ['{}', '[["JWT","a.b.c"],{}]', '[["JWT","a.b.c"],{"a":"x","b":"y"}]', 'not json']) {
      nras.tamper = { answer };
      const e = await verificationFailure(verifier.evaluate(EVIDENCE, expected()));
      expect(e.code).toBe('COLLATERAL_INVALID');
    }
  });

  it('an unreachable NRAS fails closed, naming the URL', async () => {
    const e = await verificationFailure(
      verifier.evaluate(EVIDENCE, {
        reportData: NONCE,
        nvidia: { remote: { verifierUrl: 'http://127.0.0.1:1/v4/attest', jwksUrl: nras.jwksUrl } },
      }),
    );
    expect(e.code).toBe('COLLATERAL_UNAVAILABLE');
    expect(e.message).toMatch(/127\.0\.0\.1:1\/v4\/attest\/gpu/);
  });
});
