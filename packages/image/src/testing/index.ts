// Test helpers of the image library: a registry in memory, Debian's docker-registry and tinyproxy on
// loopback, a throwaway GnuPG home, running the peer tools (skopeo, gpg). Import as
// `@broker/image/testing`; never used by production code.

export {
  type DockerRegistryOptions,
  type RunningRegistry,
  startDockerRegistry,
} from '../registry/local-registry.js';
export { FakeRegistry } from './fake-registry.js';
export { createGpgHome, type GpgHome } from './gpg.js';
export { type RunningTinyproxy, startTinyproxy } from './tinyproxy.js';
export { runTool } from './tools.js';
