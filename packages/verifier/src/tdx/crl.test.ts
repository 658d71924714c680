// Revocation through offline CRLs: the PCK CA's and the root CA's.
import { X509Certificate } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { VerificationError } from '../errors.js';
import type { TestCertificate } from '../snp/test-roots.js';
import { parseCrl } from './crl.js';
import { TdxVerifier } from './index.js';
import { PCK_PLATFORM_CA_CN } from './pck.js';
import {
  createTestQuotingEnclave,
  createTestSgxPki,
  issueTestPck,
  signCollateral,
  signTestCrl,
  signTestQuote,
  type TestPlatform,
  type TestSgxPki,
  testQeIdentity,
  testTcbInfo,
} from './test-pki.js';
import type { TdxVerifierOptions } from './verify.js';

const PLATFORM: TestPlatform = {
  fmspc: Buffer.from('00906ed50000', 'hex'),
  tcbComponents: Array(16).fill(2),
  pceSvn: 11,
};
const ROOT_CN = 'Broker Test SGX Root CA';
const REPORT_DATA = Buffer.alloc(64, 5);
let pki: TestSgxPki;
let pck: TestCertificate;
let quote: Buffer;

const serialOf = (c: TestCertificate) => new X509Certificate(c.der).serialNumber;

function options(crls: { pckCrl?: Buffer | string; rootCaCrl?: Buffer | string }): TdxVerifierOptions {
  return {
    trustedSgxRoots: [pki.root.pem],
    collateral: {
      tcbInfos: [
        signCollateral('tcbInfo', testTcbInfo(PLATFORM, Array(16).fill(0)), pki.tcbSigning.privateKey),
      ],
      qeIdentity: signCollateral('enclaveIdentity', testQeIdentity(), pki.tcbSigning.privateKey),
      signingCerts: [pki.tcbSigning.pem],
      ...crls,
    },
  };
}

async function run(o: TdxVerifierOptions): Promise<Record<string, unknown> | string> {
  try {
    const [r] = await new TdxVerifier().evaluate(
      { quote: quote.toString('base64') },
      { reportData: REPORT_DATA, tdx: o },
    );
    return r!.claims;
  } catch (e) {
    if (e instanceof VerificationError) return e.code;
    throw e;
  }
}

beforeAll(() => {
  pki = createTestSgxPki();
  pck = issueTestPck(pki, PLATFORM);
  quote = signTestQuote(createTestQuotingEnclave(pki, pck), { reportData: REPORT_DATA });
});

describe('CRLs', () => {
  it('pass when nothing is revoked, and give the CRL numbers', async () => {
    const claims = await run(
      options({
        pckCrl: signTestCrl(PCK_PLATFORM_CA_CN, pki.pckCa.privateKey, ['7f'], { crlNumber: 3 }),
        rootCaCrl: signTestCrl(ROOT_CN, pki.root.privateKey, [], { crlNumber: 9 }),
      }),
    );
    expect(claims).toMatchObject({ tcb_status: 'UpToDate', pck_crl_num: 3, root_ca_crl_num: 9 });
  });

  it('refuse a revoked PCK, PCK CA or collateral signer', async () => {
    expect(
      await run(options({ pckCrl: signTestCrl(PCK_PLATFORM_CA_CN, pki.pckCa.privateKey, [serialOf(pck)]) })),
    ).toBe('CERT_REVOKED');
    expect(
      await run(options({ rootCaCrl: signTestCrl(ROOT_CN, pki.root.privateKey, [serialOf(pki.pckCa)]) })),
    ).toBe('CERT_REVOKED');
    expect(
      await run(
        options({ rootCaCrl: signTestCrl(ROOT_CN, pki.root.privateKey, [serialOf(pki.tcbSigning)]) }),
      ),
    ).toBe('CERT_REVOKED');
  });

  it('refuse CRLs of another issuer, or from the future', async () => {
    expect(await run(options({ pckCrl: signTestCrl(PCK_PLATFORM_CA_CN, pki.root.privateKey, []) }))).toBe(
      'COLLATERAL_INVALID',
    );
    const future = new Date(Date.now() + 5 * 86_400_000);
    expect(
      await run(
        options({ rootCaCrl: signTestCrl(ROOT_CN, pki.root.privateKey, [], { thisUpdate: future }) }),
      ),
    ).toBe('COLLATERAL_INVALID');
  });

  it('mark collateral past a CRL nextUpdate as expired', async () => {
    const old = new Date(Date.now() - 10 * 86_400_000);
    const claims = await run(
      options({
        pckCrl: signTestCrl(PCK_PLATFORM_CA_CN, pki.pckCa.privateKey, [], {
          thisUpdate: old,
          nextUpdate: new Date(Date.now() - 86_400_000),
        }),
      }),
    );
    expect(claims).toMatchObject({ collateral_expiration_status: '1' });
  });

  it('read DER, PEM and hex, and refuse garbage', () => {
    const der = signTestCrl(ROOT_CN, pki.root.privateKey, ['01', 'abcdef'], { crlNumber: 2 });
    const pem = `-----BEGIN X509 CRL-----\n${der.toString('base64')}\n-----END X509 CRL-----\n`;
    for (const form of [der, pem, der.toString('hex')]) {
      const crl = parseCrl(form);
      expect([...crl.revoked]).toEqual(['1', 'abcdef']);
      expect(crl.crlNumber).toBe(2);
    }
    const code = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return (e as VerificationError).code;
      }
      return 'ok';
    };
    expect(code(() => parseCrl('garbage'))).toBe('COLLATERAL_INVALID');
    expect(code(() => parseCrl(der.subarray(0, der.length - 3)))).toBe('COLLATERAL_INVALID');
    expect(code(() => parseCrl(Buffer.concat([der, Buffer.from([0])])))).toBe('COLLATERAL_INVALID');
    for (let n = 0; n < der.length; n += 11)
      expect(code(() => parseCrl(der.subarray(0, n)))).toBe('COLLATERAL_INVALID');
  });
});
