// Token verification as trustee's JwtVerifier does it (kbs/src/crypto/jwt.rs), shared by the attestation
// token check on resource requests and the admin bearer tokens:
//  - a header `jwk` is used as-is only in insecure mode; otherwise its x5c chain must reach a trusted cert;
//  - without a header `jwk`, the header `kid` selects a key from the trusted JWK sets;
//  - the algorithm is the key's `alg` (required) and the header must name the same one;
//  - when no key can be selected that way, trusted PEM keys are tried with the header's algorithm;
//  - `exp` is required with 60 s leeway.
import { createPublicKey, type KeyObject, type X509Certificate } from 'node:crypto';
import { BoundedCache, type CacheLimits, type CacheUsage } from '@broker/kv-storage';
import {
  checkExpiry,
  type DecodedJwt,
  decodeJwt,
  headerAlgorithm,
  isJwsAlgorithm,
  type JwsAlgorithm,
  JwtVerificationError,
  keyFitsAlgorithm,
  type PublicJwk,
  publicKeyFromJwk,
  verifySignature,
} from './jws.js';
import { readJwkSet, readSource, TrustMaterialError } from './sources.js';
import { certificatesFromPem, verifyX5cEndorsement } from './x5c.js';

export interface JwtVerifierOptions {
  /** JWK set sources (paths, file:// or https://); tokens select a key by `kid`. */
  readonly trustedJwkSets?: readonly string[];
  /** PEM files of trusted certificates, anchors for header-JWK x5c chains. */
  readonly trustedCertsPaths?: readonly string[];
  /** PEM public keys (paths, file:// or https://), tried with the header's algorithm. */
  readonly trustedPemKeys?: readonly string[];
  /** Accept a header JWK without checking who endorsed it. For tests only. */
  readonly insecureHeaderJwk?: boolean;
  /** Clock in epoch milliseconds. */
  readonly now?: () => number;
}

export interface TrustMaterial {
  readonly jwks: readonly PublicJwk[];
  readonly certs: readonly X509Certificate[];
  readonly pemKeys: readonly KeyObject[];
  readonly insecureHeaderJwk: boolean;
}

interface SelectedKey {
  readonly key: KeyObject;
  readonly alg: JwsAlgorithm;
}

/** A header JWK parsed (and endorsed) for this token, to be cached once the token's signature verified. */
interface NewHeaderKey extends SelectedKey {
  readonly id: string;
  readonly until: number;
}

export interface VerifierCacheUsage {
  readonly verified: CacheUsage;
  readonly headerKeys: CacheUsage;
}

/**
 * Header JWKs whose token verified (parsed and, when endorsed, chain-checked), by their JSON. Only a key
 * that has just verified a token's signature is kept, so a client without a trusted signer cannot place
 * anything here.
 */
const HEADER_KEY_CACHE: CacheLimits = { maxEntries: 1024, maxBytes: 8 * 1024 * 1024 };
/** Longer header JWKs (a long x5c chain) are checked every time rather than kept. */
const MAX_CACHED_HEADER_KEY_LENGTH = 16 * 1024;
/** Rough memory of a parsed key (KeyObject, its wrapper and the map entry) on top of its JSON text. */
const HEADER_KEY_OVERHEAD = 1024;
/** How long an x5c endorsement is reused before the chain is checked again. */
const ENDORSEMENT_TTL_MS = 60_000;
/**
 * Tokens whose signature verified, by their exact text: a guest presents the same token for each resource
 * it fetches, and the signature check is the dearest step. Expiry is still checked on every use, and an
 * entry is dropped after ENDORSEMENT_TTL_MS so the key selection (x5c chain validity) is redone as often as
 * without the cache. Only successes are kept; a token that differs in any character is verified afresh.
 * Nothing is cached before the signature verified: a token that fails leaves no trace here.
 */
const VERIFIED_CACHE: CacheLimits = { maxEntries: 4096, maxBytes: 32 * 1024 * 1024 };
/** Longer tokens are verified every time rather than held in memory (EAR tokens are a few KiB). */
const MAX_CACHED_TOKEN_LENGTH = 16 * 1024;
/**
 * Estimated bytes of a verified entry per token character: the token text plus its parsed claims, which
 * take a few times the JSON they came from.
 */
const VERIFIED_BYTES_PER_CHAR = 4;
const VERIFIED_OVERHEAD = 256;

function deepFreeze(v: unknown): void {
  if (typeof v !== 'object' || v === null || Object.isFrozen(v)) return;
  Object.freeze(v);
  for (const x of Object.values(v)) deepFreeze(x);
}

function keyAlgorithm(jwk: Record<string, unknown>): JwsAlgorithm {
  const alg = jwk.alg;
  if (alg === undefined) throw new JwtVerificationError('Failed to find key_algorithm in Jwk');
  if (!isJwsAlgorithm(alg)) {
    throw new JwtVerificationError(
      `Jwk alg ${JSON.stringify(String(alg).slice(0, 16))} is not an allowed signature algorithm`,
    );
  }
  return alg;
}

export class JwtVerifier {
  private readonly material: TrustMaterial;
  private readonly now: () => number;
  /** Parsed (and, when endorsed, checked) header JWKs, keyed by their JSON. */
  private readonly headerKeys = new BoundedCache<string, SelectedKey & { readonly until: number }>(
    HEADER_KEY_CACHE,
  );
  /** From the trust material, fixed at start. */
  private readonly kidKeys = new Map<string, SelectedKey>();
  private readonly verified = new BoundedCache<string, { claims: Record<string, unknown>; until: number }>(
    VERIFIED_CACHE,
  );

  constructor(material: TrustMaterial, now: () => number = Date.now) {
    this.material = material;
    this.now = now;
    for (const jwk of material.jwks) {
      if (typeof jwk.kid !== 'string' || this.kidKeys.has(jwk.kid)) continue;
      // Encryption keys and keys without a signature algorithm cannot verify a token.
      if (jwk.use === 'enc' || !isJwsAlgorithm(jwk.alg)) continue;
      let key: KeyObject;
      try {
        key = publicKeyFromJwk(jwk);
      } catch (e) {
        throw new TrustMaterialError(`trusted JWK ${JSON.stringify(jwk.kid)}: ${(e as Error).message}`);
      }
      if (!keyFitsAlgorithm(key, jwk.alg)) {
        throw new TrustMaterialError(
          `trusted JWK ${JSON.stringify(jwk.kid)}: key type does not fit alg ${jwk.alg}`,
        );
      }
      this.kidKeys.set(jwk.kid, { key, alg: jwk.alg });
    }
  }

  /** Loads the trust material; throws TrustMaterialError naming the source that failed. */
  static async create(options: JwtVerifierOptions): Promise<JwtVerifier> {
    const jwks: PublicJwk[] = [];
    for (const uri of options.trustedJwkSets ?? []) jwks.push(...(await readJwkSet(uri)));
    const certs: X509Certificate[] = [];
    for (const path of options.trustedCertsPaths ?? []) {
      const pem = (await readSource(path)).toString('utf8');
      try {
        certs.push(...certificatesFromPem(pem, path));
      } catch (e) {
        throw new TrustMaterialError((e as Error).message);
      }
    }
    const pemKeys: KeyObject[] = [];
    for (const uri of options.trustedPemKeys ?? []) {
      try {
        pemKeys.push(createPublicKey((await readSource(uri)).toString('utf8')));
      } catch (e) {
        if (e instanceof TrustMaterialError) throw e;
        throw new TrustMaterialError(
          `${uri} is not a PEM public key (EC, RSA or Ed25519): ${(e as Error).message}`,
        );
      }
    }
    const insecureHeaderJwk = options.insecureHeaderJwk ?? false;
    if (jwks.length === 0 && certs.length === 0 && pemKeys.length === 0 && !insecureHeaderJwk) {
      throw new TrustMaterialError(
        'Cannot verify token since no trusted verification materials are provided. Please provide at least one of trusted JWK sets, trusted PEM public keys, or trusted certificates.',
      );
    }
    return new JwtVerifier({ jwks, certs, pemKeys, insecureHeaderJwk }, options.now);
  }

  /** What the caches hold now; nothing from a token whose signature did not verify. */
  get cacheUsage(): VerifierCacheUsage {
    return { verified: this.verified.usage, headerKeys: this.headerKeys.usage };
  }

  private headerJwkKey(jwk: unknown): SelectedKey | NewHeaderKey {
    if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) {
      throw new JwtVerificationError('header jwk is not a JWK');
    }
    const id = JSON.stringify(jwk);
    const now = this.now();
    const cached = this.headerKeys.get(id);
    if (cached !== undefined && cached.until > now) return cached;
    const m = jwk as Record<string, unknown>;
    const key = publicKeyFromJwk(m);
    if (!this.material.insecureHeaderJwk) {
      if (this.material.certs.length === 0)
        throw new JwtVerificationError('Cannot verify token since trusted cert is empty');
      verifyX5cEndorsement(key, m.x5c, this.material.certs, new Date(now));
    }
    return {
      id,
      key,
      alg: keyAlgorithm(m),
      until: this.material.insecureHeaderJwk ? Number.POSITIVE_INFINITY : now + ENDORSEMENT_TTL_MS,
    };
  }

  /** Keeps a header key that has just verified a token, so the next token under it skips the x5c check. */
  private rememberHeaderKey(k: NewHeaderKey): void {
    if (k.id.length > MAX_CACHED_HEADER_KEY_LENGTH) return;
    this.headerKeys.set(k.id, { key: k.key, alg: k.alg, until: k.until }, k.id.length + HEADER_KEY_OVERHEAD);
  }

  private selectKey(header: Record<string, unknown>): SelectedKey | NewHeaderKey {
    if (header.jwk !== undefined) return this.headerJwkKey(header.jwk);
    if (this.material.jwks.length === 0)
      throw new JwtVerificationError('Cannot verify token since trusted JWK Set is empty');
    const kid = header.kid;
    if (typeof kid !== 'string') throw new JwtVerificationError('Failed to decode kid in the token header');
    const k = this.kidKeys.get(kid);
    if (k === undefined)
      throw new JwtVerificationError(
        `Failed to find Jwk with kid ${JSON.stringify(kid.slice(0, 64))} in JwkSet`,
      );
    return k;
  }

  /** The key the token names and its header algorithm; undefined when only PEM keys can be tried. */
  private keyFor(jwt: DecodedJwt): {
    alg: JwsAlgorithm;
    selected?: SelectedKey | NewHeaderKey;
    selectError?: unknown;
  } {
    const alg = headerAlgorithm(jwt.header);
    try {
      const selected = this.selectKey(jwt.header);
      if (selected.alg !== alg) {
        throw new JwtVerificationError(`token alg ${alg} does not match the key's alg ${selected.alg}`);
      }
      return { alg, selected };
    } catch (e) {
      // A selected key whose alg disagrees is final, as in trustee (no fallback to PEM keys).
      if (e instanceof JwtVerificationError && e.message.startsWith('token alg ')) throw e;
      return { alg, selectError: e };
    }
  }

  private viaPemKeys(jwt: DecodedJwt, alg: JwsAlgorithm, selectError: unknown): Record<string, unknown> {
    if (this.material.pemKeys.length === 0) {
      throw selectError instanceof JwtVerificationError
        ? selectError
        : new JwtVerificationError(`Cannot verify token: ${(selectError as Error).message}`);
    }
    const nowSeconds = Math.floor(this.now() / 1000);
    let last: unknown;
    for (const key of this.material.pemKeys) {
      try {
        verifySignature(jwt, key, alg);
        checkExpiry(jwt.payload, nowSeconds);
        return jwt.payload;
      } catch (e) {
        last = e;
      }
    }
    throw new JwtVerificationError(`Cannot verify token with any provided key (${(last as Error).message})`);
  }

  /** The verified claims (frozen); JwtVerificationError (or JwtExpired) says why not. */
  verify(token: string): Record<string, unknown> {
    const now = this.now();
    const hit = this.verified.get(token);
    if (hit !== undefined) {
      if (hit.until > now) {
        checkExpiry(hit.claims, Math.floor(now / 1000));
        return hit.claims;
      }
      this.verified.delete(token);
    }
    const claims = this.verifyUncached(token);
    // Only now, with the signature verified, may anything of the token be kept.
    deepFreeze(claims);
    if (typeof token === 'string' && token.length <= MAX_CACHED_TOKEN_LENGTH) {
      this.verified.set(
        token,
        { claims, until: now + ENDORSEMENT_TTL_MS },
        token.length * VERIFIED_BYTES_PER_CHAR + VERIFIED_OVERHEAD,
      );
    }
    return claims;
  }

  private verifyUncached(token: string): Record<string, unknown> {
    const jwt = decodeJwt(token);
    const { alg, selected, selectError } = this.keyFor(jwt);
    if (selected === undefined) return this.viaPemKeys(jwt, alg, selectError);
    verifySignature(jwt, selected.key, alg);
    checkExpiry(jwt.payload, Math.floor(this.now() / 1000));
    if ('id' in selected) this.rememberHeaderKey(selected);
    return jwt.payload;
  }
}
