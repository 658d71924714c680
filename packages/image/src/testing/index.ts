// Test helpers of the image library: a registry in memory, a throwaway GnuPG home, running the
// peer tools (skopeo, gpg). Import as `@broker/image/testing`; never used by production code.
export { FakeRegistry } from './fake-registry.js';
export { createGpgHome, type GpgHome } from './gpg.js';
export { runTool } from './tools.js';
