/**
 * The RCAR client of guest-components' `kbs_protocol`, in both of its modes:
 *
 * - background check: the client attests itself with an attester (auth →
 *   evidence → attest), keeps the session cookie and fetches resources on
 *   that session, re-attesting on 401;
 * - passport: the client holds a token made elsewhere (the attestation
 *   agent, or a file) and sends it as `Authorization: Bearer`.
 *
 * Either way the resource comes back as a JWE to the TEE key and is decrypted
 * here.
 */
import type { Attester } from '@broker/attester';
import {
  type Challenge,
  JweError,
  jweDecrypt,
  type KbsUri,
  kbsUriRequestPath,
  PROTOCOL_VERSION,
  ProtocolError,
  parseChallenge,
  parseKbsUri,
  parseReportDataHashAlgorithm,
  parseResourcePath,
  parseResourceUri,
  type ReportDataHashAlgorithm,
  type ResourcePath,
  type ResourceUri,
  runtimeDataDigest,
  SUPPORTED_HASH_ALGORITHMS,
  type TeePubKey,
} from '@broker/protocol';
import { CookieJar } from './cookies.js';
import {
  EvidenceFailed,
  InvalidHashAlgorithm,
  InvalidResourcePath,
  KbsBadResponse,
  KbsClientError,
  KbsRejected,
  type KbsRejection,
  KbsResourceMissing,
  KbsResourceNotFound,
  KbsUnauthorized,
  KbsUntrustedCertificate,
  RcarHandshakeFailed,
  ResourceDecryptionFailed,
} from './errors.js';
import { type HttpResponse, HttpTransport } from './http.js';
import { jsonBody, rejectionOf } from './response.js';
import { type TeeKeyAlgorithm, TeeKeyPair } from './tee-key.js';
import { type AttestationToken, isTokenValid, parseAttestationToken } from './token.js';

/** The User-Agent of guest-components' KBS client (crate version 0.1.0). */
export const KBS_CLIENT_USER_AGENT = 'attestation-agent-kbs-client/0.1.0';
export const KBS_PATH_PREFIX = '/kbs/v0';
export const SESSION_COOKIE_NAME = 'kbs-session-id';
/** RCAR handshake attempts and the pause between them (upstream `RCAR_MAX_ATTEMPT`, 1 s). */
export const RCAR_MAX_ATTEMPTS = 5;
export const RCAR_RETRY_DELAY_MS = 1000;
/** Resource GET attempts when the KBS answers 401 (upstream `KBS_GET_RESOURCE_MAX_ATTEMPT`). */
export const GET_RESOURCE_MAX_ATTEMPTS = 3;
/** Hash used for the report data when the challenge selects none. */
export const DEFAULT_HASH_ALGORITHM: ReportDataHashAlgorithm = 'sha384';
/** The only init-data format the KBS accepts. */
export const INIT_DATA_FORMAT = 'toml';

const MAX_CHALLENGE_BYTES = 64 * 1024;

/**
 * trustee's resource plugin answers a read of a path it has nothing at with 401
 * `PluginInternalError`; with `missingResourceIsFinal` that ends the request.
 */
function missingResource(path: string, rejection: KbsRejection): KbsResourceMissing {
  return new KbsResourceMissing(
    `get resource ${path}: no such resource at the KBS (or its resource storage failed)`,
    rejection,
  );
}
const MAX_ATTEST_RESPONSE_BYTES = 1024 * 1024;

export interface KbsClientLogger {
  debug(msg: string): void;
  info(msg: string): void;
  warn(msg: string): void;
}

/** A token and the TEE key it certifies. */
export interface TokenAndKey {
  readonly token: string;
  readonly teeKeyPair: TeeKeyPair;
}

/** Passport mode: where fresh tokens come from (the attestation agent's `GetToken("kbs")`). */
export interface TokenProvider {
  getToken(): Promise<TokenAndKey>;
}

export interface KbsClientOptions {
  /** KBS root URL; `/kbs/v0/...` is appended. */
  readonly url: string;
  /** PEM certificate(s) to trust in addition to the system roots (aa.toml `cert`, `--cert-file`). */
  readonly certPem?: string | readonly string[];
  /** Background-check mode: the primary attester. */
  readonly attester?: Attester;
  /** Additional devices attested along with the primary TEE (upstream `detect_attestable_devices`). */
  readonly additionalAttesters?: readonly Attester[];
  /** Passport mode: fresh tokens on demand, fetched again after a 401. */
  readonly tokenProvider?: TokenProvider;
  /**
   * A token obtained elsewhere, certifying `teeKeyPair` (`get-resource --attestation-token`).
   * Without an attester or provider it is sent as Bearer and not renewed.
   */
  readonly token?: string;
  /** The TEE key; generated with `teeKeyAlgorithm` when absent. */
  readonly teeKeyPair?: TeeKeyPair;
  readonly teeKeyAlgorithm?: TeeKeyAlgorithm;
  /** Init-data TOML text sent as `{"format":"toml","body":…}`; null or absent sends `"init-data": null`. */
  readonly initData?: string | null;
  readonly userAgent?: string;
  readonly logger?: KbsClientLogger;
  readonly timeoutMs?: number;
  /** Cap on a resource response body (default 16 MiB). */
  readonly maxResponseBytes?: number;
  /** Pause between handshake attempts; injectable for tests. */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Clock in epoch milliseconds, for token expiry and cookies. */
  readonly now?: () => number;
  /**
   * Whether a 401 `PluginInternalError` on a resource (trustee's answer for a path it has nothing at,
   * or whose storage failed) ends the request at once, as `KbsResourceMissing`. Default false: the
   * guest components' behaviour, which attest again and retry (a storage failure may pass); the
   * kbs-client command sets it, for a person waiting on the answer.
   */
  readonly missingResourceIsFinal?: boolean;
}

const silent: KbsClientLogger = { debug() {}, info() {}, warn() {} };

function defaultSleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Hash selected by the challenge's extra-params, as guest-components reads it. */
export function selectedHashAlgorithm(extraParams: unknown): ReportDataHashAlgorithm {
  if (typeof extraParams !== 'object' || extraParams === null || Array.isArray(extraParams)) {
    return DEFAULT_HASH_ALGORITHM;
  }
  if (!Object.hasOwn(extraParams, 'selected-hash-algorithm')) return DEFAULT_HASH_ALGORITHM;
  const v = (extraParams as Record<string, unknown>)['selected-hash-algorithm'];
  if (typeof v !== 'string') {
    throw new InvalidHashAlgorithm(
      `unexpected JSON data type: expected string, got ${JSON.stringify(v)?.slice(0, 64)}`,
    );
  }
  const alg = parseReportDataHashAlgorithm(v);
  if (alg === null)
    throw new InvalidHashAlgorithm(`invalid hash algorithm: ${JSON.stringify(v.slice(0, 64))}`);
  return alg;
}

function isKbsUri(r: ResourcePath | ResourceUri | KbsUri): r is KbsUri {
  return typeof (r as KbsUri).plugin === 'string' && Array.isArray((r as KbsUri).path);
}

/**
 * The `/kbs/v0/<plugin>/...` path (and query) of a resource given as `repo/type/tag`, as a `kbs://` or
 * `kbs+<plugin>://` URI (guest-components' mapping: `kbs+sample:///a/b?q` is `/kbs/v0/sample/a/b?q`), or as
 * an object.
 */
export function resourceRequestPath(resource: string | ResourcePath | ResourceUri | KbsUri): string {
  let r: KbsUri;
  try {
    if (typeof resource === 'string') {
      if (/^kbs(\+[^:]*)?:/.test(resource)) r = parseKbsUri(resource);
      else {
        const p = parseResourcePath(resource);
        r = { plugin: 'resource', path: [p.repository, p.type, p.tag] };
      }
    } else if (isKbsUri(resource)) {
      // Objects are validated the same way: their segments end up in a URL.
      const q = resource.query;
      const scheme = resource.plugin === 'resource' ? 'kbs' : `kbs+${resource.plugin}`;
      r = parseKbsUri(`${scheme}:///${resource.path.join('/')}${q !== undefined ? `?${q}` : ''}`);
    } else {
      const q = (resource as ResourceUri).query;
      const u = parseResourceUri(
        `kbs:///${resource.repository}/${resource.type}/${resource.tag}${q !== undefined ? `?${q}` : ''}`,
      );
      r = {
        plugin: 'resource',
        path: [u.repository, u.type, u.tag],
        ...(u.query !== undefined && { query: u.query }),
      };
    }
  } catch (cause) {
    throw new InvalidResourcePath(cause instanceof Error ? cause.message : String(cause), { cause });
  }
  // The URI's host is ignored, as upstream: the configured KBS is always the one asked.
  return `${KBS_PATH_PREFIX}/${kbsUriRequestPath(r)}`;
}

export class KbsClient {
  readonly #http: HttpTransport;
  readonly #jar: CookieJar;
  readonly #attester: Attester | undefined;
  readonly #additional: readonly Attester[];
  readonly #provider: TokenProvider | undefined;
  readonly #initData: string | null;
  readonly #log: KbsClientLogger;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #missingIsFinal: boolean;
  readonly #now: () => number;
  #key: TeeKeyPair;
  #token: AttestationToken | undefined;
  /** Bumped on every new token, so concurrent 401s re-attest once. */
  #generation = 0;
  /** The handshake or provider call in flight, shared by concurrent callers. */
  #handshake: Promise<void> | undefined;

  constructor(options: KbsClientOptions) {
    if (
      options.attester === undefined &&
      options.tokenProvider === undefined &&
      options.token === undefined
    ) {
      throw new TypeError('KbsClient needs an attester, a token provider or a token');
    }
    if (options.attester !== undefined && options.tokenProvider !== undefined) {
      throw new TypeError('KbsClient takes an attester or a token provider, not both');
    }
    if (options.token !== undefined && options.attester === undefined && options.teeKeyPair === undefined) {
      throw new TypeError('a token needs the TEE key pair it certifies (teeKeyPair)');
    }
    this.#now = options.now ?? Date.now;
    this.#jar = new CookieJar(this.#now);
    this.#http = new HttpTransport({
      url: options.url,
      userAgent: options.userAgent ?? KBS_CLIENT_USER_AGENT,
      cookieJar: this.#jar,
      ...(options.certPem !== undefined ? { certPem: options.certPem } : {}),
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      ...(options.maxResponseBytes !== undefined ? { maxResponseBytes: options.maxResponseBytes } : {}),
    });
    this.#attester = options.attester;
    this.#additional = options.additionalAttesters ?? [];
    this.#provider = options.tokenProvider;
    this.#initData = options.initData ?? null;
    this.#log = options.logger ?? silent;
    this.#sleep = options.sleep ?? defaultSleep;
    this.#missingIsFinal = options.missingResourceIsFinal === true;
    this.#key = options.teeKeyPair ?? TeeKeyPair.generate(options.teeKeyAlgorithm);
    this.#token = options.token !== undefined ? parseAttestationToken(options.token) : undefined;
  }

  /** `background-check` with an attester, else `passport`. */
  get mode(): 'background-check' | 'passport' {
    return this.#attester !== undefined ? 'background-check' : 'passport';
  }

  get teeKeyPair(): TeeKeyPair {
    return this.#key;
  }

  /** The KBS root URL in use (trailing `/` removed). */
  get url(): string {
    return this.#http.baseUrl;
  }

  /**
   * A token certifying the TEE key: the cached one while inside its exp/nbf
   * window, otherwise a fresh RCAR handshake (5 attempts, 1 s apart), or in
   * passport mode a fresh token from the provider.
   */
  async getToken(): Promise<TokenAndKey> {
    if (this.#token !== undefined && isTokenValid(this.#token, this.#now())) {
      return { token: this.#token.content, teeKeyPair: this.#key };
    }
    if (this.#attester !== undefined) {
      await this.#coalescedHandshake(this.#generation, RCAR_MAX_ATTEMPTS);
    } else {
      await this.#coalescedRefresh(this.#generation);
    }
    return this.#current();
  }

  /** A fresh RCAR handshake now, whatever is cached (5 attempts, 1 s apart). Background-check mode only. */
  async attest(): Promise<TokenAndKey> {
    if (this.#attester === undefined)
      throw new TypeError('attest() needs an attester (background-check mode)');
    await this.#coalescedHandshake(this.#generation, RCAR_MAX_ATTEMPTS);
    return this.#current();
  }

  /**
   * Fetch and decrypt a resource: `repo/type/tag`, `kbs:///repo/type/tag[?query]`,
   * `kbs+<plugin>:///<path>[?query]` (from `/kbs/v0/<plugin>/<path>`; the host part is ignored), a
   * ResourcePath or a KbsUri. Re-attests (or re-fetches the token) on 401, 3 attempts in all.
   */
  async getResource(resource: string | ResourcePath | ResourceUri | KbsUri): Promise<Buffer> {
    const path = resourceRequestPath(resource);
    return this.#attester !== undefined ? this.#getWithSession(path) : this.#getWithBearer(path);
  }

  /** Close idle keep-alive connections. */
  close(): void {
    this.#http.close();
  }

  #current(): TokenAndKey {
    if (this.#token === undefined)
      throw new KbsClientError('internal: no token after a successful handshake');
    return { token: this.#token.content, teeKeyPair: this.#key };
  }

  async #getWithSession(path: string): Promise<Buffer> {
    // Upstream sends the first GET without a session and attests on its 401; attesting first
    // saves that round trip and the KBS sees the same auth/attest/resource sequence.
    // Without a live session cookie (it expires at a fixed time after /auth) the GET would only earn a 401.
    if (
      this.#token === undefined ||
      !isTokenValid(this.#token, this.#now()) ||
      this.#jar.header() === undefined
    ) {
      await this.#coalescedHandshake(this.#generation, RCAR_MAX_ATTEMPTS);
    }
    let last: KbsRejection | undefined;
    for (let attempt = 1; attempt <= GET_RESOURCE_MAX_ATTEMPTS; attempt++) {
      const generation = this.#generation;
      const key = this.#key;
      const res = await this.#http.request({ method: 'GET', path, retryOnStaleConnection: true });
      if (res.status === 401) {
        last = rejectionOf(res);
        if (this.#missingIsFinal && last.kind === 'PluginInternalError') throw missingResource(path, last);
        this.#log.warn(
          `KBS refused the resource request (${last.kind ?? last.status}): ${last.detail}; new RCAR handshake`,
        );
        if (attempt < GET_RESOURCE_MAX_ATTEMPTS) await this.#coalescedHandshake(generation, 1);
        continue;
      }
      return this.#resourceResult(res, path, key);
    }
    throw new KbsUnauthorized(`get resource ${path}`, last as KbsRejection);
  }

  async #getWithBearer(path: string): Promise<Buffer> {
    let last: KbsRejection | undefined;
    for (let attempt = 1; attempt <= GET_RESOURCE_MAX_ATTEMPTS; attempt++) {
      if (this.#token === undefined || !isTokenValid(this.#token, this.#now())) {
        await this.#coalescedRefresh(this.#generation);
      }
      const generation = this.#generation;
      const token = this.#current();
      const res = await this.#http.request({
        method: 'GET',
        path,
        bearer: token.token,
        retryOnStaleConnection: true,
      });
      if (res.status === 401) {
        last = rejectionOf(res);
        if (this.#missingIsFinal && last.kind === 'PluginInternalError') throw missingResource(path, last);
        if (this.#provider === undefined) break; // a fixed token cannot get better by retrying
        this.#log.warn(
          `KBS refused the token (${last.kind ?? last.status}): ${last.detail}; fetching a new token`,
        );
        if (attempt < GET_RESOURCE_MAX_ATTEMPTS) await this.#coalescedRefresh(generation, true);
        continue;
      }
      return this.#resourceResult(res, path, token.teeKeyPair);
    }
    throw new KbsUnauthorized(`get resource ${path}`, last as KbsRejection);
  }

  #resourceResult(res: HttpResponse, path: string, key: TeeKeyPair): Buffer {
    if (res.status === 200) {
      const jwe = jsonBody(res, `get resource ${path}`);
      try {
        return jweDecrypt(jwe, key.privateKey);
      } catch (cause) {
        if (cause instanceof JweError) {
          throw new ResourceDecryptionFailed(`decrypt KBS response body failed: ${cause.message}`, { cause });
        }
        throw cause;
      }
    }
    if (res.status === 404) throw new KbsResourceNotFound(`KBS resource not found ${path}`, rejectionOf(res));
    throw new KbsRejected(`get resource ${path}`, rejectionOf(res));
  }

  /**
   * Passport mode: a new token from the provider, unless another caller got
   * one since `seenGeneration`; concurrent callers share one provider call.
   * `force` asks even when the cached token looks valid (the KBS refused it).
   */
  async #coalescedRefresh(seenGeneration: number, force = false): Promise<void> {
    while (this.#handshake !== undefined) {
      await this.#handshake.catch(() => {});
    }
    if (
      this.#generation !== seenGeneration &&
      this.#token !== undefined &&
      isTokenValid(this.#token, this.#now())
    ) {
      return;
    }
    if (!force && this.#token !== undefined && isTokenValid(this.#token, this.#now())) return;
    const run = this.#refreshFromProvider();
    this.#handshake = run;
    try {
      await run;
    } finally {
      this.#handshake = undefined;
    }
  }

  async #refreshFromProvider(): Promise<void> {
    if (this.#provider === undefined) {
      if (this.#token === undefined) throw new TypeError('no token and no token provider');
      return; // a fixed token is used as it is, even past its exp: the KBS decides
    }
    const { token, teeKeyPair } = await this.#provider.getToken();
    this.#token = parseAttestationToken(token);
    this.#key = teeKeyPair;
    this.#generation++;
  }

  /**
   * Run a handshake unless one already produced a newer token than the
   * caller saw; concurrent callers share one handshake, since a second
   * `/auth` would replace the session cookie under the first.
   */
  async #coalescedHandshake(seenGeneration: number, attempts: number): Promise<void> {
    while (this.#handshake !== undefined) {
      await this.#handshake.catch(() => {});
    }
    if (
      this.#generation !== seenGeneration &&
      this.#token !== undefined &&
      isTokenValid(this.#token, this.#now())
    ) {
      return;
    }
    const run = this.#repeatHandshake(attempts);
    this.#handshake = run;
    try {
      await run;
    } finally {
      this.#handshake = undefined;
    }
  }

  async #repeatHandshake(attempts: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#rcarHandshake();
        return;
      } catch (err) {
        // An untrusted certificate stays untrusted: no retry, and the caller sees it as it is.
        if (err instanceof KbsUntrustedCertificate) throw err;
        if (attempt >= attempts) throw new RcarHandshakeFailed(attempts, err);
        this.#log.warn(
          `RCAR handshake failed: ${err instanceof Error ? err.message : String(err)}, retry ${attempt}...`,
        );
        await this.#sleep(RCAR_RETRY_DELAY_MS);
      }
    }
  }

  async #rcarHandshake(): Promise<void> {
    const attester = this.#attester as Attester;
    const request = {
      version: PROTOCOL_VERSION,
      tee: attester.tee,
      'extra-params': { 'supported-hash-algorithms': [...SUPPORTED_HASH_ALGORITHMS] },
    };
    this.#log.debug(`RCAR auth as ${attester.tee} at ${this.#http.urlOf(`${KBS_PATH_PREFIX}/auth`)}`);
    const authRes = await this.#http.request({
      method: 'POST',
      path: `${KBS_PATH_PREFIX}/auth`,
      body: JSON.stringify(request),
      contentType: 'application/json',
      maxResponseBytes: MAX_CHALLENGE_BYTES,
      // A repeated /auth only makes a new challenge (and session) at the KBS.
      retryOnStaleConnection: true,
    });
    if (authRes.status === 401) throw new KbsUnauthorized('KBS request unauthorized', rejectionOf(authRes));
    if (authRes.status !== 200) throw new KbsRejected('KBS Server Internal Failed', rejectionOf(authRes));
    let challenge: Challenge;
    try {
      challenge = parseChallenge(jsonBody(authRes, 'auth'));
    } catch (cause) {
      if (cause instanceof ProtocolError)
        throw new KbsBadResponse(`auth: bad challenge: ${cause.message}`, { cause });
      throw cause;
    }
    const algorithm = selectedHashAlgorithm(challenge['extra-params']);

    const runtimeData: { nonce: string; 'tee-pubkey': TeePubKey } = {
      nonce: challenge.nonce,
      'tee-pubkey': this.#key.publicJwk,
    };
    // As upstream: SE puts the digest in its own request and cannot bind device evidence.
    if (attester.tee === 'se' && this.#additional.length > 0) {
      throw new EvidenceFailed('Cannot attest multiple devices on s390x platform.');
    }
    const additionalEvidence = await this.#additionalEvidence(runtimeData, algorithm);
    // The primary binding covers the devices' evidence too; with none it hashes "".
    const reportData = runtimeDataDigest(
      { ...runtimeData, 'additional-evidence': additionalEvidence },
      algorithm,
    );
    const primaryEvidence = await this.#evidence(attester, reportData);

    const attestation = {
      'init-data': this.#initData === null ? null : { format: INIT_DATA_FORMAT, body: this.#initData },
      'runtime-data': runtimeData,
      'tee-evidence': { primary_evidence: primaryEvidence, additional_evidence: additionalEvidence },
    };
    let body: string;
    try {
      body = JSON.stringify(attestation);
    } catch (cause) {
      throw new EvidenceFailed('evidence is not JSON-serializable', { cause });
    }
    const attestRes = await this.#http.request({
      method: 'POST',
      path: `${KBS_PATH_PREFIX}/attest`,
      body,
      contentType: 'application/json',
      maxResponseBytes: MAX_ATTEST_RESPONSE_BYTES,
      // The evidence answers a single-use nonce: a second /attest may not be sent blindly.
      retryOnStaleConnection: false,
    });
    if (attestRes.status === 401)
      throw new KbsUnauthorized('KBS attest unauthorized', rejectionOf(attestRes));
    if (attestRes.status !== 200) throw new KbsRejected('KBS Server Internal Failed', rejectionOf(attestRes));
    const json = jsonBody(attestRes, 'attest');
    const token = (json as { token?: unknown } | null)?.token;
    if (typeof json !== 'object' || json === null || typeof token !== 'string') {
      throw new KbsBadResponse('attest: response has no string member "token"');
    }
    this.#token = parseAttestationToken(token);
    this.#generation++;
    this.#log.debug('RCAR handshake done');
  }

  async #evidence(attester: Attester, reportData: Uint8Array): Promise<unknown> {
    try {
      const ev = await attester.getEvidence(reportData);
      if (ev === undefined) throw new EvidenceFailed('the attester returned no evidence');
      return ev;
    } catch (cause) {
      const why = cause instanceof Error ? cause.message : String(cause);
      throw new EvidenceFailed(`get evidence from the ${attester.tee} attester failed: ${why}`, { cause });
    }
  }

  /** `additional_evidence`: "" without devices, else the JSON text of {tee: evidence}. */
  async #additionalEvidence(
    runtimeData: { nonce: string; 'tee-pubkey': TeePubKey },
    algorithm: ReportDataHashAlgorithm,
  ): Promise<string> {
    if (this.#additional.length === 0) return '';
    const deviceReportData = runtimeDataDigest(runtimeData, algorithm);
    const map: Record<string, unknown> = {};
    for (const device of this.#additional) map[device.tee] = await this.#evidence(device, deviceReportData);
    try {
      return JSON.stringify(map);
    } catch (cause) {
      throw new EvidenceFailed('device evidence is not JSON-serializable', { cause });
    }
  }
}
