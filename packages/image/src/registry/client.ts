/**
 * An OCI distribution (Docker registry v2) client: manifests and blobs, read
 * and written, with anonymous, Basic and Bearer-token authentication. Every
 * manifest and blob is checked against its digest (and size) before the
 * caller may trust it; blob bodies are streamed, never held whole.
 */

import { Readable, Transform, type TransformCallback } from 'node:stream';
import { Digester, digestAlgorithm, digestOf, parseDigest } from '../digest.js';
import { ImageError, type ImageErrorCode } from '../errors.js';
import { type Descriptor, MANIFEST_ACCEPT } from '../manifest.js';
import { registryHost } from '../reference.js';
import {
  type BearerToken,
  basicAuthorization,
  type Challenge,
  type CredentialLookup,
  type Credentials,
  MAX_TOKEN_RESPONSE_BYTES,
  parseChallenges,
  parseTokenResponse,
  RegistryAuthError,
} from './auth.js';
import { discardBody, HttpClient, type HttpRequest, type HttpResponse, readBody, redact } from './http.js';
import type { ProxySettings } from './proxy.js';

/** containers/image `iolimits.MaxManifestBodySize`. */
export const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
/** Largest registry error body read. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

/** A repository on a registry: `domain` as in a reference (`docker.io` is served by `registry-1.docker.io`). */
export interface Repository {
  readonly domain: string;
  readonly path: string;
}

/** A registry answer other than success. */
export class RegistryError extends ImageError<string | undefined> {
  override readonly name: string = 'RegistryError';
  readonly status: number;
  /** The first error code of the body (`MANIFEST_UNKNOWN`, `UNAUTHORIZED`, …). */
  override readonly code: string | undefined;
  constructor(message: string, status: number, code?: string, options?: ErrorOptions) {
    super(message, options);
    this.status = status;
    this.code = code;
  }
}

/** Content whose digest or size is not the one asked for. */
export class DigestMismatchError extends ImageError {
  override readonly code: ImageErrorCode = 'DIGEST_MISMATCH';
  override readonly name: string = 'DigestMismatchError';
}

export interface RegistryClientOptions {
  /** Credentials per repository (e.g. from `--authfile`); anonymous when absent. */
  readonly credentials?: CredentialLookup;
  /** Registries (host[:port]) reached over plain HTTP. */
  readonly insecure?: (host: string) => boolean;
  /** Extra PEM certificates trusted besides the system roots. */
  readonly ca?: readonly string[];
  readonly userAgent?: string;
  readonly idleTimeoutMs?: number;
  /** Proxies for every request (`https_proxy`, `http_proxy`, `no_proxy`); direct when absent. */
  readonly proxy?: ProxySettings;
}

export interface FetchedManifest {
  readonly bytes: Buffer;
  /** The `Content-Type` the registry sent. */
  readonly contentType: string;
  /** sha256 of the bytes (or the algorithm of the digest asked for). */
  readonly digest: string;
}

type Actions = 'pull' | 'pull,push';

interface CachedAuth {
  readonly header: string;
  readonly expiresAt: number;
}

/** Streams a blob through, failing at the end (or as soon as it is too long) unless size and digest match. */
export class VerifyingStream extends Transform {
  readonly #digester: Digester;
  readonly #expected: Descriptor;
  constructor(expected: Descriptor) {
    super();
    this.#expected = expected;
    this.#digester = new Digester(digestAlgorithm(expected.digest));
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.#digester.update(chunk);
    if (this.#digester.bytes > this.#expected.size) {
      cb(
        new DigestMismatchError(
          `blob ${this.#expected.digest} is larger than its declared ${this.#expected.size} bytes`,
        ),
      );
      return;
    }
    cb(null, chunk);
  }
  override _flush(cb: TransformCallback): void {
    if (this.#digester.bytes !== this.#expected.size) {
      cb(
        new DigestMismatchError(
          `blob ${this.#expected.digest}: got ${this.#digester.bytes} bytes, expected ${this.#expected.size}`,
        ),
      );
      return;
    }
    const actual = this.#digester.digest();
    if (actual !== this.#expected.digest) {
      cb(new DigestMismatchError(`blob digest mismatch: expected ${this.#expected.digest}, got ${actual}`));
      return;
    }
    cb();
  }
}

export class RegistryClient {
  readonly #http: HttpClient;
  readonly #options: RegistryClientOptions;
  readonly #auth = new Map<string, CachedAuth>();
  readonly #tokens = new Map<string, Promise<BearerToken>>();

  constructor(options: RegistryClientOptions = {}) {
    this.#options = options;
    this.#http = new HttpClient({
      ...(options.ca !== undefined ? { ca: options.ca } : {}),
      ...(options.idleTimeoutMs !== undefined ? { idleTimeoutMs: options.idleTimeoutMs } : {}),
      ...(options.userAgent !== undefined ? { userAgent: options.userAgent } : {}),
      ...(options.proxy !== undefined ? { proxy: options.proxy } : {}),
    });
  }

  close(): void {
    this.#http.close();
  }

  /** The CAs and proxies this client connects with (for other HTTP it makes on a pull's behalf). */
  get connectionOptions(): { readonly ca?: readonly string[]; readonly proxy?: ProxySettings } {
    return {
      ...(this.#options.ca !== undefined ? { ca: this.#options.ca } : {}),
      ...(this.#options.proxy !== undefined ? { proxy: this.#options.proxy } : {}),
    };
  }

  /** `https://host` (or `http://` for insecure registries). */
  baseUrl(repo: Repository): string {
    const host = registryHost(repo.domain);
    return `${this.#options.insecure?.(host) === true ? 'http' : 'https'}://${host}`;
  }

  /**
   * A manifest by tag or digest. By digest, the bytes must hash to it; by
   * tag, a `Docker-Content-Digest` header, when sent, must match the bytes.
   */
  async getManifest(
    repo: Repository,
    reference: string,
    options: { accept?: readonly string[]; maxBytes?: number; signal?: AbortSignal } = {},
  ): Promise<FetchedManifest> {
    const byDigest = reference.includes(':');
    if (byDigest) parseDigest(reference);
    const url = new URL(`${this.baseUrl(repo)}/v2/${repo.path}/manifests/${reference}`);
    const res = await this.#send(repo, 'pull', {
      method: 'GET',
      url,
      headers: { accept: (options.accept ?? MANIFEST_ACCEPT).join(', ') },
      ...(options.signal !== undefined ? { signal: options.signal } : {}),
    });
    if (res.status !== 200)
      throw await this.#failure(res, `reading manifest ${reference} in ${repoName(repo)}`);
    const bytes = await readBody(res.body, options.maxBytes ?? MAX_MANIFEST_BYTES, `manifest ${reference}`);
    const algorithm = byDigest ? digestAlgorithm(reference) : 'sha256';
    const digest = digestOf(bytes, algorithm);
    if (byDigest && digest !== reference) {
      throw new DigestMismatchError(`manifest digest mismatch: expected ${reference}, got ${digest}`);
    }
    const header = res.headers['docker-content-digest'];
    if (typeof header === 'string' && header !== '') {
      let claimed: string | undefined;
      try {
        claimed = parseDigest(header);
      } catch {
        claimed = undefined;
      }
      if (claimed !== undefined && digestOf(bytes, digestAlgorithm(claimed)) !== claimed) {
        throw new DigestMismatchError(
          `manifest ${reference}: Docker-Content-Digest ${claimed} does not match the content`,
        );
      }
    }
    return { bytes, contentType: String(res.headers['content-type'] ?? ''), digest };
  }

  /**
   * Whether the registry offers containers/image's signature API extension:
   * its `/v2/` answer (200 or 401) carries `X-Registry-Supports-Signatures: 1`.
   */
  async supportsSignatureExtension(repo: Repository): Promise<boolean> {
    const res = await this.#http.request({ method: 'GET', url: new URL(`${this.baseUrl(repo)}/v2/`) });
    await discardBody(res.body);
    return res.headers['x-registry-supports-signatures'] === '1';
  }

  /**
   * The body of `GET /extensions/v2/<repo>/signatures/<digest>` (the
   * signature API extension), at most `limit` bytes. Any status but 200 fails.
   */
  async getSignatureExtension(repo: Repository, digest: string, limit: number): Promise<Buffer> {
    const url = new URL(`${this.baseUrl(repo)}/extensions/v2/${repo.path}/signatures/${parseDigest(digest)}`);
    const res = await this.#send(repo, 'pull', { method: 'GET', url });
    if (res.status !== 200)
      throw await this.#failure(res, `downloading signatures for ${digest} in ${repoName(repo)}`);
    return readBody(res.body, limit, `signature list of ${digest}`);
  }

  /** A blob as a stream that errors unless its size and digest match `descriptor`. */
  async getBlob(repo: Repository, descriptor: Descriptor, signal?: AbortSignal): Promise<Readable> {
    const url = new URL(`${this.baseUrl(repo)}/v2/${repo.path}/blobs/${descriptor.digest}`);
    const res = await this.#send(repo, 'pull', {
      method: 'GET',
      url,
      ...(signal !== undefined ? { signal } : {}),
    });
    if (res.status !== 200)
      throw await this.#failure(res, `fetching blob ${descriptor.digest} of ${repoName(repo)}`);
    const verify = new VerifyingStream(descriptor);
    res.body.on('error', (e) => verify.destroy(e));
    return res.body.pipe(verify);
  }

  /** A small blob (config, signature payload) read whole, at most `limit` bytes, and verified. */
  async getBlobBytes(repo: Repository, descriptor: Descriptor, limit: number): Promise<Buffer> {
    if (descriptor.size > limit)
      throw new ImageError(
        `blob ${descriptor.digest} of ${descriptor.size} bytes exceeds the limit of ${limit}`,
        {
          code: 'BLOB_TOO_LARGE',
        },
      );
    return readBody(await this.getBlob(repo, descriptor), limit, `blob ${descriptor.digest}`);
  }

  /** True when the registry has the blob. */
  async blobExists(repo: Repository, digest: string, actions: Actions = 'pull'): Promise<boolean> {
    const url = new URL(`${this.baseUrl(repo)}/v2/${repo.path}/blobs/${parseDigest(digest)}`);
    const res = await this.#send(repo, actions, { method: 'HEAD', url });
    res.body.resume();
    if (res.status === 200) return true;
    if (res.status === 404) return false;
    throw await this.#failure(res, `checking blob ${digest} in ${repoName(repo)}`);
  }

  /**
   * Uploads a blob (monolithic: POST for a session, PUT with the content),
   * unless the registry has it already. `content` is bytes, or a factory of
   * streams with the digest and size known beforehand.
   */
  async pushBlob(
    repo: Repository,
    content: Uint8Array | { readonly digest: string; readonly size: number; readonly open: () => Readable },
  ): Promise<Descriptor> {
    const digest = content instanceof Uint8Array ? digestOf(content) : parseDigest(content.digest);
    const size = content instanceof Uint8Array ? content.byteLength : content.size;
    const descriptor: Descriptor = { mediaType: 'application/octet-stream', digest, size };
    if (await this.blobExists(repo, digest, 'pull,push')) return descriptor;
    const start = await this.#send(repo, 'pull,push', {
      method: 'POST',
      url: new URL(`${this.baseUrl(repo)}/v2/${repo.path}/blobs/uploads/`),
      headers: { 'content-length': '0' },
    });
    if (start.status !== 202) throw await this.#failure(start, `starting an upload to ${repoName(repo)}`);
    start.body.resume();
    const location = start.headers.location;
    if (location === undefined)
      throw new RegistryError(`upload to ${repoName(repo)}: no Location`, start.status);
    const target = new URL(location, start.url);
    if (target.origin !== start.url.origin)
      throw new RegistryError(`upload to ${repoName(repo)}: Location on another origin`, 202);
    target.searchParams.set('digest', digest);
    const res = await this.#send(repo, 'pull,push', {
      method: 'PUT',
      url: target,
      headers: { 'content-type': 'application/octet-stream', 'content-length': String(size) },
      body: content instanceof Uint8Array ? content : content.open,
    });
    if (res.status !== 201) throw await this.#failure(res, `uploading blob ${digest} to ${repoName(repo)}`);
    res.body.resume();
    return descriptor;
  }

  /** Stores a manifest under a tag or digest; returns its digest. */
  async putManifest(
    repo: Repository,
    reference: string,
    bytes: Uint8Array,
    mediaType: string,
  ): Promise<string> {
    const res = await this.#send(repo, 'pull,push', {
      method: 'PUT',
      url: new URL(`${this.baseUrl(repo)}/v2/${repo.path}/manifests/${reference}`),
      headers: { 'content-type': mediaType },
      body: bytes,
    });
    if (res.status !== 201 && res.status !== 200) {
      throw await this.#failure(res, `writing manifest ${reference} to ${repoName(repo)}`);
    }
    res.body.resume();
    return digestOf(bytes);
  }

  /** Sends with cached authorization; on 401, answers the challenge and sends once more. */
  async #send(repo: Repository, actions: Actions, req: HttpRequest): Promise<HttpResponse> {
    const host = registryHost(repo.domain);
    const key = `${host}|${repo.path}|${actions}`;
    const cached = this.#auth.get(key);
    const withAuth = (header: string | undefined): HttpRequest =>
      header === undefined ? req : { ...req, headers: { ...req.headers, authorization: header } };
    const usable = cached !== undefined && cached.expiresAt > Date.now() ? cached.header : undefined;
    const res = await this.#http.request(withAuth(usable));
    if (res.status !== 401) return res;
    const challenges = parseChallenges(res.headers['www-authenticate']);
    await discardBody(res.body);
    const auth = await this.#answer(repo, actions, challenges);
    if (auth === undefined) {
      throw new RegistryError(
        `${req.method} ${redact(req.url)}: authentication required (HTTP 401)`,
        401,
        'UNAUTHORIZED',
      );
    }
    this.#auth.set(key, auth);
    return this.#http.request(withAuth(auth.header));
  }

  async #answer(
    repo: Repository,
    actions: Actions,
    challenges: Challenge[],
  ): Promise<CachedAuth | undefined> {
    const creds = this.#options.credentials?.(repo.domain, repo.path);
    const bearer = challenges.find((c) => c.scheme === 'bearer');
    if (bearer !== undefined) {
      const token = await this.#token(bearer, repo, actions, creds);
      return { header: `Bearer ${token.token}`, expiresAt: token.expiresAt };
    }
    if (challenges.some((c) => c.scheme === 'basic') && creds?.kind === 'basic') {
      return {
        header: basicAuthorization(creds.username, creds.password),
        expiresAt: Number.POSITIVE_INFINITY,
      };
    }
    return undefined;
  }

  #token(
    challenge: Challenge,
    repo: Repository,
    actions: Actions,
    creds: Credentials | undefined,
  ): Promise<BearerToken> {
    const realm = challenge.params.realm;
    if (realm === undefined || realm === '') throw new RegistryAuthError('Bearer challenge without a realm');
    let realmUrl: URL;
    try {
      realmUrl = new URL(realm);
    } catch {
      throw new RegistryAuthError(`Bearer challenge with an invalid realm ${JSON.stringify(realm)}`);
    }
    if (realmUrl.protocol !== 'https:' && realmUrl.protocol !== 'http:') {
      throw new RegistryAuthError(`Bearer realm ${realmUrl.origin} is not http(s)`);
    }
    const service = challenge.params.service ?? '';
    const scope = `repository:${repo.path}:${actions}`;
    const key = `${realmUrl.href}|${service}|${scope}|${creds?.username ?? ''}`;
    const cached = this.#tokens.get(key);
    if (cached !== undefined) {
      return cached.then((t) =>
        t.expiresAt > Date.now() ? t : this.#refreshToken(key, realmUrl, service, scope, creds),
      );
    }
    return this.#refreshToken(key, realmUrl, service, scope, creds);
  }

  #refreshToken(
    key: string,
    realm: URL,
    service: string,
    scope: string,
    creds: Credentials | undefined,
  ): Promise<BearerToken> {
    const p = this.#fetchToken(realm, service, scope, creds).catch((e: unknown) => {
      this.#tokens.delete(key);
      throw e;
    });
    this.#tokens.set(key, p);
    return p;
  }

  async #fetchToken(
    realm: URL,
    service: string,
    scope: string,
    creds: Credentials | undefined,
  ): Promise<BearerToken> {
    let res: HttpResponse;
    if (creds?.kind === 'identityToken') {
      const form = new URLSearchParams({
        grant_type: 'refresh_token',
        refresh_token: creds.identityToken,
        client_id: 'containers/image',
        scope,
        ...(service !== '' ? { service } : {}),
      });
      res = await this.#http.request({
        method: 'POST',
        url: realm,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: Buffer.from(form.toString()),
      });
    } else {
      const url = new URL(realm);
      if (service !== '') url.searchParams.set('service', service);
      url.searchParams.append('scope', scope);
      const headers: Record<string, string> = {};
      if (creds?.kind === 'basic') headers.authorization = basicAuthorization(creds.username, creds.password);
      res = await this.#http.request({ method: 'GET', url, headers });
    }
    if (res.status !== 200) {
      await discardBody(res.body);
      throw new RegistryAuthError(
        `token request to ${realm.origin}${realm.pathname} failed: HTTP ${res.status}`,
      );
    }
    return parseTokenResponse(await readBody(res.body, MAX_TOKEN_RESPONSE_BYTES, 'token response'));
  }

  async #failure(res: HttpResponse, what: string): Promise<RegistryError> {
    let code: string | undefined;
    let detail = '';
    try {
      const body = await readBody(res.body, MAX_ERROR_BODY_BYTES);
      const doc = JSON.parse(body.toString('utf8')) as { errors?: { code?: unknown; message?: unknown }[] };
      const first = doc.errors?.[0];
      if (first !== undefined) {
        code = typeof first.code === 'string' ? first.code : undefined;
        const message = typeof first.message === 'string' ? first.message : '';
        detail = `${code ?? ''}${message !== '' ? `: ${message}` : ''}`;
      }
    } catch {
      res.body.destroy();
    }
    const text = detail !== '' ? detail.slice(0, 512) : `HTTP ${res.status}`;
    return new RegistryError(
      `${what}: ${text}${detail !== '' ? ` (HTTP ${res.status})` : ''}`,
      res.status,
      code,
    );
  }
}

function repoName(repo: Repository): string {
  return `${repo.domain}/${repo.path}`;
}

/** True when an error means "no such manifest" (containers/image `isManifestUnknownError`). */
export function isManifestUnknown(e: unknown): boolean {
  if (!(e instanceof RegistryError)) return false;
  if (e.code === 'MANIFEST_UNKNOWN' || e.status === 404) return true;
  return e.code === 'UNKNOWN' && e.message.toLowerCase().includes('not found');
}

/** Bytes as a one-shot stream factory for `pushBlob`. */
export function bytesSource(bytes: Uint8Array): () => Readable {
  return () => Readable.from([bytes]);
}
