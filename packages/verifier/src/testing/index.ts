// Test helpers: builders of test evidence and roots per TEE (SGX PKI and quotes, AMD roots and VEKs,
// CCA tokens, NVIDIA devices, Azure TDX vTPM evidence) and mock collateral services (Intel PCCS, AMD
// KDS, Veraison, NRAS) over HTTPS with a throwaway TLS identity. Import as `@broker/verifier/testing`;
// never used by production code.

export {
  type AzTdxTestEvidenceOptions,
  buildTdxHclReport,
  makeAzTdxTestEvidence,
  quoteFromTdReport,
} from '../az-tdx-vtpm/test-evidence.js';
export { type MockVeraison, startMockVeraison } from '../cca/mock-veraison.js';
export {
  type ClaimsMap,
  createTestCcaPlatform,
  encodeCcaToken,
  rawPublicPoint,
  type TestCcaKeys,
  type TestCcaPlatform,
} from '../cca/test-token.js';
export { type MockNras, signEs384Jwt, startMockNras } from '../nvidia/mock-nras.js';
export {
  createTestDevice,
  type TestDevice,
  type TestDeviceOptions,
  type TestDeviceParts,
  testDeviceFromParts,
} from '../nvidia/test-device.js';
export {
  createTestAmdRoots,
  issueTestVek,
  signSnpReport,
  type TestAmdRoots,
  type TestCertificate,
  type TestRootOptions,
  type TestVekOptions,
  vekExtensions,
} from '../snp/test-roots.js';
export {
  createTestQuotingEnclave,
  createTestSgxPki,
  issueTestPck,
  sgxExtensionValue,
  signCollateral,
  signTestCrl,
  signTestQuote,
  TEST_QE,
  type TestCollateralOptions,
  type TestCrlOptions,
  type TestPkiOptions,
  type TestPlatform,
  type TestQeIdentity,
  type TestQuotingEnclave,
  type TestSgxPki,
  testQeIdentity,
  testTcbInfo,
} from '../tdx/test-pki.js';
export { type MockKdsContent, signTestAmdCrl, startMockKds, type TestAmdCrlOptions } from './mock-kds.js';
export {
  MOCK_PCCS_PATHS,
  type MockPccsCollateral,
  startMockPccs,
  TCB_INFO_CHAIN_HEADER,
  type TestPccsOptions,
  testPccsCollateral,
} from './mock-pccs.js';
export { type MockAnswer, MockHttpsService, type MockOverride, type MockReply } from './mock-service.js';
export { createTestTlsIdentity, type TestTlsIdentity } from './tls.js';
