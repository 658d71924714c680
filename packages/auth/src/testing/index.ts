export { makeChain, type TestChain } from './pki.js';
export { b64url, publicJwk, signJwt } from './tokens.js';
