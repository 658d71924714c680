// trustee's gRPC services as TypeScript: messages, codecs, service definitions and clients, all
// generated from protos/ by scripts/generate.mjs (ts-proto). Nothing here is written by hand.
export * as attestation from './generated/attestation.gen.js';
export * as plugin from './generated/plugin.gen.js';
export * as reference from './generated/reference.gen.js';
