// Test helpers: mock collateral services (Intel PCCS, AMD KDS) over HTTPS with a throwaway TLS
// identity. Import as `@broker/verifier/testing`; never used by production code.

export { type MockVeraison, startMockVeraison } from '../cca/mock-veraison.js';
export { type MockNras, signEs384Jwt, startMockNras } from '../nvidia/mock-nras.js';
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
