// A mock Intel PCCS: the four collateral endpoints trustee's PCS client asks, answering with
// collateral signed by a test PKI and the issuer chains in Intel's response headers.
import type { TestSgxPki } from '../tdx/test-pki.js';
import {
  signCollateral,
  signTestCrl,
  TEST_QE,
  type TestCollateralOptions,
  type TestCrlOptions,
  type TestPlatform,
  type TestQeIdentity,
  testQeIdentity,
  testTcbInfo,
} from '../tdx/test-pki.js';
import { type MockAnswer, MockHttpsService } from './mock-service.js';
import type { TestTlsIdentity } from './tls.js';

export interface MockPccsCollateral {
  /** The TCB info document (`{"tcbInfo":…,"signature":…}`) served for an FMSPC (upper-case hex). */
  readonly tcbInfo: (fmspc: string) => string | undefined;
  /** The TD QE identity document. */
  readonly qeIdentity: string;
  /** TCB signing certificate then root (PEM): `TCB-Info-Issuer-Chain`, `SGX-Enclave-Identity-Issuer-Chain`. */
  readonly signingChainPem: string;
  /** PCK CA then root (PEM): `SGX-PCK-CRL-Issuer-Chain`. */
  readonly pckCrlChainPem: string;
  /** DER CRLs of the PCK CAs. */
  readonly pckCrl: { readonly platform?: Buffer; readonly processor?: Buffer };
  /** DER CRL of the root CA. */
  readonly rootCaCrl: Buffer;
}

/** Intel's PCS answers tdx TCB info with this header name; a PCCS may use the SGX one. */
export const TCB_INFO_CHAIN_HEADER = 'TCB-Info-Issuer-Chain';

export const MOCK_PCCS_PATHS = Object.freeze({
  tcb: '/tdx/certification/v4/tcb',
  qeIdentity: '/tdx/certification/v4/qe/identity',
  pckCrl: '/sgx/certification/v4/pckcrl',
  rootCaCrl: '/sgx/certification/v4/rootcacrl',
});

/** Serves `collateral` (a mutable object: tests may swap members while it runs). */
export function startMockPccs(
  tls: TestTlsIdentity,
  collateral: { current: MockPccsCollateral },
): Promise<MockHttpsService> {
  return MockHttpsService.start(tls, (url): MockAnswer | undefined => {
    const c = collateral.current;
    const chain = (pem: string) => encodeURIComponent(pem);
    switch (url.pathname) {
      case MOCK_PCCS_PATHS.tcb: {
        const doc = c.tcbInfo((url.searchParams.get('fmspc') ?? '').toUpperCase());
        if (doc === undefined) return undefined;
        return {
          status: 200,
          headers: { 'content-type': 'application/json', [TCB_INFO_CHAIN_HEADER]: chain(c.signingChainPem) },
          body: doc,
        };
      }
      case MOCK_PCCS_PATHS.qeIdentity:
        return {
          status: 200,
          headers: {
            'content-type': 'application/json',
            'SGX-Enclave-Identity-Issuer-Chain': chain(c.signingChainPem),
          },
          body: c.qeIdentity,
        };
      case MOCK_PCCS_PATHS.pckCrl: {
        const ca = url.searchParams.get('ca');
        const crl =
          ca === 'platform' ? c.pckCrl.platform : ca === 'processor' ? c.pckCrl.processor : undefined;
        if (crl === undefined) return undefined;
        return {
          status: 200,
          headers: {
            'content-type': 'application/pkix-crl',
            'SGX-PCK-CRL-Issuer-Chain': chain(c.pckCrlChainPem),
          },
          body: crl,
        };
      }
      case MOCK_PCCS_PATHS.rootCaCrl:
        return { status: 200, headers: { 'content-type': 'application/pkix-crl' }, body: c.rootCaCrl };
      default:
        return undefined;
    }
  });
}

/** CNs createTestSgxPki gives its CAs (CRL issuer names). */
const PCK_CA_CN = 'Intel SGX PCK Platform CA';
const ROOT_CN = 'Broker Test SGX Root CA';

export interface TestPccsOptions extends TestCollateralOptions {
  readonly qe?: TestQeIdentity;
  /** Serials (hex) the PCK CA's CRL revokes. */
  readonly revokedPcks?: readonly string[];
  /** Serials (hex) the root CA's CRL revokes. */
  readonly revokedCas?: readonly string[];
  readonly crl?: TestCrlOptions;
}

/** Collateral for one test platform under a test PKI, rating it UpToDate. */
export function testPccsCollateral(
  pki: TestSgxPki,
  platform: TestPlatform,
  teeTcbSvn: readonly number[],
  options: TestPccsOptions = {},
): MockPccsCollateral {
  const key = pki.tcbSigning.privateKey;
  const tcb = signCollateral('tcbInfo', testTcbInfo(platform, teeTcbSvn, options), key);
  const fmspc = Buffer.from(platform.fmspc).toString('hex').toUpperCase();
  return {
    tcbInfo: (f) => (f === fmspc ? tcb : undefined),
    qeIdentity: signCollateral('enclaveIdentity', testQeIdentity(options.qe ?? TEST_QE, options), key),
    signingChainPem: pki.tcbSigning.pem + pki.root.pem,
    pckCrlChainPem: pki.pckCa.pem + pki.root.pem,
    pckCrl: {
      platform: signTestCrl(PCK_CA_CN, pki.pckCa.privateKey, options.revokedPcks ?? [], options.crl),
    },
    rootCaCrl: signTestCrl(ROOT_CN, pki.root.privateKey, options.revokedCas ?? [], options.crl),
  };
}
