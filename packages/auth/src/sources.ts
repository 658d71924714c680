// Reading trust material named in the configuration: local paths, file:// URIs and https:// URLs
// (trustee also follows OpenID discovery for JWK sets).
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { AuthError, type AuthErrorCode } from './errors.js';
import { JwtVerificationError, type PublicJwk } from './jws.js';

const MAX_SOURCE_BYTES = 1024 * 1024;
const FETCH_TIMEOUT_MS = 10_000;

export class TrustMaterialError extends AuthError {
  override readonly name: string = 'TrustMaterialError';
  static readonly defaultCode: AuthErrorCode = 'TRUST_MATERIAL_UNAVAILABLE';
}

async function fetchBytes(url: string): Promise<Buffer> {
  const res = await fetch(url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), redirect: 'follow' });
  if (!res.ok) throw new TrustMaterialError(`GET ${url}: HTTP ${res.status}`);
  const body = Buffer.from(await res.arrayBuffer());
  if (body.length > MAX_SOURCE_BYTES)
    throw new TrustMaterialError(`${url} is larger than ${MAX_SOURCE_BYTES} bytes`);
  return body;
}

/** Bytes of a local path, `file://` URI or `https://` URL. */
export async function readSource(uri: string): Promise<Buffer> {
  let data: Buffer;
  try {
    if (uri.startsWith('https://')) return await fetchBytes(uri);
    if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(uri) && !uri.startsWith('file://')) {
      throw new TrustMaterialError(`unsupported scheme in ${uri} (use a path, file:// or https://)`);
    }
    data = await readFile(uri.startsWith('file://') ? fileURLToPath(uri) : uri);
  } catch (e) {
    if (e instanceof TrustMaterialError) throw e;
    throw new TrustMaterialError(`cannot read ${uri}: ${(e as Error).message}`, { cause: e });
  }
  if (data.length > MAX_SOURCE_BYTES)
    throw new TrustMaterialError(`${uri} is larger than ${MAX_SOURCE_BYTES} bytes`);
  return data;
}

function parseJwks(bytes: Buffer, uri: string): PublicJwk[] {
  let doc: unknown;
  try {
    doc = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new TrustMaterialError(`${uri} is not JSON (expected a JWK set {"keys": [...]})`);
  }
  const keys = (doc as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys)) throw new TrustMaterialError(`${uri} is not a JWK set: no "keys" array`);
  return keys.map((k, i) => {
    if (typeof k !== 'object' || k === null || typeof (k as { kty?: unknown }).kty !== 'string') {
      throw new TrustMaterialError(`${uri} keys[${i}] is not a JWK`);
    }
    return k as PublicJwk;
  });
}

/**
 * The keys of a JWK set. For https:// sources that do not answer with a non-empty set, trustee falls
 * back to `<uri>/.well-known/openid-configuration` and its `jwks_uri`; so do we.
 */
export async function readJwkSet(uri: string): Promise<PublicJwk[]> {
  if (!uri.startsWith('https://')) return parseJwks(await readSource(uri), uri);
  try {
    const keys = parseJwks(await fetchBytes(uri), uri);
    if (keys.length > 0) return keys;
  } catch {
    // fall through to discovery
  }
  const base = uri.endsWith('/') ? uri : `${uri}/`;
  const discovery = new URL('.well-known/openid-configuration', base).href;
  let jwksUri: unknown;
  try {
    jwksUri = (JSON.parse((await fetchBytes(discovery)).toString('utf8')) as { jwks_uri?: unknown }).jwks_uri;
  } catch (e) {
    throw new TrustMaterialError(
      `cannot load a JWK set from ${uri} nor its OpenID configuration: ${(e as Error).message}`,
    );
  }
  if (typeof jwksUri !== 'string' || !jwksUri.startsWith('https://')) {
    throw new TrustMaterialError(`${discovery} has no https jwks_uri`);
  }
  return parseJwks(await fetchBytes(jwksUri), jwksUri);
}

export function ensureJwtError(e: unknown): JwtVerificationError {
  return e instanceof JwtVerificationError ? e : new JwtVerificationError((e as Error).message);
}
