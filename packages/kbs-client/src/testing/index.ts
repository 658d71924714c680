// Test helpers other packages' tests use: import as `@broker/kbs-client/testing`; never production code.
export { type LoopbackCert, makeLoopbackCert } from './loopback-cert.js';
