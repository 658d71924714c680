/**
 * Routing of api-server-rest, independent of node:http so every rule is
 * testable on its own. Status codes and bodies follow upstream's router:
 * plain-text error bodies, 404 `URL NOT FOUND` for anything unknown (including
 * a known path with the wrong method), 500 with the error text when the CDH
 * or AA fails, and no method check on `/cdh/resource`. `/cdh/plugin/…` is ours
 * (upstream has no such route) and answers only for the plugins the operator allowed.
 */

import { type AttestationBackend, ExtendResult, type ResourceBackend } from './backends.js';
import { ApiServerError, type ApiServerErrorCode } from './errors.js';
import { isLoopbackAddress } from './loopback.js';
import { checkPluginNames, isPluginName, MAX_PLUGIN_URI_LENGTH, RESOURCE_PLUGIN } from './plugins.js';
import { decodeRuntimeData, RuntimeDataError } from './runtime-data.js';
import { parseQuery, parseRequestTarget, splitNthSlash } from './target.js';

export const FEATURES = ['resource', 'attestation', 'all'] as const;
export type Feature = (typeof FEATURES)[number];

export function isFeature(value: string): value is Feature {
  return (FEATURES as readonly string[]).includes(value);
}

export interface RouteRequest {
  readonly method: string;
  /** The raw request target (`req.url`). */
  readonly target: string;
  /** The peer's IP address as node reports it, or `undefined` once the socket is gone. */
  readonly peerAddress: string | undefined;
  /** Reads the whole body; rejects with `BodyTooLargeError` over the cap. Called only by `POST /aa/aael`. */
  readonly readBody: () => Promise<Uint8Array>;
}

export interface Reply {
  readonly status: number;
  readonly contentType: string;
  readonly body: Uint8Array | string;
  /** Ask node to close the connection after this reply (forbidden peers, unread oversize bodies). */
  readonly close?: boolean;
  /** Short label for the access log: which route answered. */
  readonly route: string;
  /** Error text for the access log, when the reply reports a failure. */
  readonly error?: string;
}

/** The request body is larger than the configured cap. */
export class BodyTooLargeError extends ApiServerError {
  override readonly code: ApiServerErrorCode = 'BODY_TOO_LARGE';
  override readonly name: string = 'BodyTooLargeError';
  readonly limit: number;
  constructor(limit: number) {
    super(`request body exceeds ${limit} bytes`);
    this.limit = limit;
  }
}

export interface RouterOptions {
  readonly feature: Feature;
  /** `version` of `/info`. */
  readonly version: string;
  /** Present when the feature includes `resource`. */
  readonly resource?: ResourceBackend | undefined;
  /** Present when the feature includes `attestation`. */
  readonly attestation?: AttestationBackend | undefined;
  /** Which peers may use the API; default: loopback addresses only. */
  readonly allowPeer?: ((address: string | undefined) => boolean) | undefined;
  /** KBS plugins reachable at `/cdh/plugin/<plugin>/…`; default none. `resource` cannot be one. */
  readonly plugins?: readonly string[] | undefined;
}

const TEXT = 'text/plain; charset=utf-8';
const JSON_TYPE = 'application/json';
const OCTETS = 'application/octet-stream';

const KBS_PREFIX = 'kbs://';

// Upstream writes these bodies as fixed strings, spacing included.
const AAEL_OK = '{"success":"true"}';
const AAEL_MESSAGES: ReadonlyMap<number, string> = new Map([
  [
    ExtendResult.NOT_SUPPORTED,
    '{"success":"false","message": "The platform does not support runtime measurement"}',
  ],
  [
    ExtendResult.NOT_ENABLED,
    '{"success":"false","message": "Attestation Agent does not enable eventlog recording"}',
  ],
]);
const AAEL_UNKNOWN = '{"success":"false","message": "Unknown runtime measurement result"}';

function text(status: number, body: string, route: string, extra?: Partial<Reply>): Reply {
  return { status, contentType: TEXT, body, route, ...extra };
}

const notFound = (route = 'unknown'): Reply => text(404, 'URL NOT FOUND', route);
const badRequest = (route: string, error?: string): Reply =>
  text(400, 'BAD REQUEST', route, error === undefined ? {} : { error });

function failure(route: string, err: unknown): Reply {
  const message = err instanceof Error ? err.message : String(err);
  return text(500, message, route, { error: message });
}

export class Router {
  readonly #opts: RouterOptions;
  readonly #allowPeer: (address: string | undefined) => boolean;
  readonly #plugins: ReadonlySet<string>;

  constructor(options: RouterOptions) {
    this.#opts = options;
    this.#allowPeer = options.allowPeer ?? isLoopbackAddress;
    this.#plugins = new Set(checkPluginNames(options.plugins ?? []));
  }

  async route(req: RouteRequest): Promise<Reply> {
    if (!this.#allowPeer(req.peerAddress)) return text(403, 'Forbidden', 'forbidden', { close: true });

    const { path, query } = parseRequestTarget(req.target);
    if (path === '/info') return this.#info(req.method);

    const split = splitNthSlash(path, 2);
    if (split === null) return notFound();
    const [root, rest] = split;
    if (root === '/aa') {
      const aa = this.#opts.attestation;
      if (aa === undefined) return text(404, 'Attestation Feature Not Enabled', 'aa');
      return this.#attestation(aa, req, rest, parseQuery(query));
    }
    if (root === '/cdh') {
      const cdh = this.#opts.resource;
      if (cdh === undefined) return text(404, 'Resource Feature Not Enabled', 'cdh');
      const api = splitNthSlash(rest, 2);
      if (api?.[0] === '/resource') return this.#resource(cdh, api[1]);
      if (api?.[0] === '/plugin') return this.#plugin(cdh, req.method, api[1], query);
      return notFound('cdh');
    }
    return notFound();
  }

  async #info(method: string): Promise<Reply> {
    if (method !== 'GET') return text(405, 'Method Not Allowed', 'info');
    // Member order and omissions as upstream's serde struct: version, tee?, additional_tees (if any), feature.
    let tee: string | undefined;
    let additionalTees: string[] = [];
    const aa = this.#opts.attestation;
    if (aa !== undefined) {
      try {
        tee = await aa.getTeeType();
        additionalTees = await aa.getAdditionalTees();
      } catch (err) {
        return failure('info', err);
      }
    }
    const info = {
      version: this.#opts.version,
      ...(tee === undefined ? {} : { tee }),
      ...(additionalTees.length === 0 ? {} : { additional_tees: additionalTees }),
      feature: this.#opts.feature,
    };
    return { status: 200, contentType: JSON_TYPE, body: JSON.stringify(info), route: 'info' };
  }

  async #resource(cdh: ResourceBackend, resourcePath: string): Promise<Reply> {
    try {
      const bytes = await cdh.getResource(KBS_PREFIX + resourcePath);
      return { status: 200, contentType: OCTETS, body: bytes, route: 'cdh/resource' };
    } catch (err) {
      return failure('cdh/resource', err);
    }
  }

  /**
   * `/cdh/plugin/<plugin>/<path>[?query]` → `GetResource("kbs+<plugin>:///<path>[?query]")`. Path and
   * query go on raw, as `/cdh/resource` passes its path: the data hub's URI parser is the one judge of
   * `..`, percent-encoding and the rest, and its refusal is the same 500 as through `/cdh/resource`.
   */
  async #plugin(cdh: ResourceBackend, method: string, rest: string, query: string | null): Promise<Reply> {
    const route = 'cdh/plugin';
    const split = splitNthSlash(rest, 2);
    if (split === null) return notFound(route);
    const plugin = split[0].slice(1);
    const pluginPath = split[1];
    if (plugin === RESOURCE_PLUGIN) {
      return text(404, 'resource is not a plugin here: read resources at /cdh/resource/<path>', route);
    }
    if (!this.#plugins.has(plugin)) {
      const shown = JSON.stringify(plugin.slice(0, 64));
      const body = isPluginName(plugin)
        ? `KBS plugin ${shown} is not enabled on this API: start api-server-rest with --plugins ${plugin} to allow it`
        : `${shown} is not a KBS plugin name`;
      return text(403, body, route, { error: 'plugin not enabled' });
    }
    // A plugin call may act (nebula-ca signs a certificate per call): only a GET makes one.
    if (method !== 'GET') return text(405, 'Method Not Allowed', route);
    const uri = `kbs+${plugin}://${pluginPath}${query === null ? '' : `?${query}`}`;
    // The data hub refuses longer URIs (with a 500); refusing here first spares the call.
    if (uri.length > MAX_PLUGIN_URI_LENGTH) {
      const why = `KBS plugin URI is longer than ${MAX_PLUGIN_URI_LENGTH} characters`;
      return text(500, why, route, { error: why });
    }
    return octets(route, () => cdh.getResource(uri));
  }

  async #attestation(
    aa: AttestationBackend,
    req: RouteRequest,
    api: string,
    params: Map<string, string>,
  ): Promise<Reply> {
    if (api === '/token' && req.method === 'GET') {
      const tokenType = params.get('token_type');
      if (tokenType === undefined) return badRequest('aa/token');
      return octets('aa/token', () => aa.getToken(tokenType));
    }
    if ((api === '/evidence' || api === '/additional-evidence') && req.method === 'GET') {
      const route = api === '/evidence' ? 'aa/evidence' : 'aa/additional-evidence';
      const runtimeData = params.get('runtime_data');
      if (runtimeData === undefined) return badRequest(route);
      let bytes: Uint8Array;
      try {
        bytes = decodeRuntimeData(runtimeData, params.get('encoding'));
      } catch (err) {
        if (err instanceof RuntimeDataError) return badRequest(route, err.message);
        throw err;
      }
      return octets(route, () =>
        api === '/evidence' ? aa.getEvidence(bytes) : aa.getAdditionalEvidence(bytes),
      );
    }
    if (api === '/aael' && req.method === 'POST') return this.#aael(aa, req);
    return notFound('aa');
  }

  async #aael(aa: AttestationBackend, req: RouteRequest): Promise<Reply> {
    let event: AaelEvent;
    try {
      event = parseAaelEvent(await req.readBody());
    } catch (err) {
      if (err instanceof BodyTooLargeError) {
        return text(413, 'Payload Too Large', 'aa/aael', { close: true, error: err.message });
      }
      return failure('aa/aael', err);
    }
    try {
      const result = await aa.extendRuntimeMeasurement(event.domain, event.operation, event.content);
      const body = result === ExtendResult.OK ? AAEL_OK : (AAEL_MESSAGES.get(result) ?? AAEL_UNKNOWN);
      return { status: 200, contentType: JSON_TYPE, body, route: 'aa/aael' };
    } catch (err) {
      return failure('aa/aael', err);
    }
  }
}

async function octets(route: string, call: () => Promise<Uint8Array>): Promise<Reply> {
  try {
    return { status: 200, contentType: OCTETS, body: await call(), route };
  } catch (err) {
    return failure(route, err);
  }
}

export interface AaelEvent {
  readonly domain: string;
  readonly operation: string;
  readonly content: string;
}

/** The body of `POST /aa/aael` is malformed; upstream answers 500 with this text. */
export class AaelEventError extends ApiServerError {
  override readonly code: ApiServerErrorCode = 'AAEL_EVENT_INVALID';
  override readonly name: string = 'AaelEventError';
}

/** Parses `{"domain","operation","content"}` (strings; other members ignored, as serde does). */
export function parseAaelEvent(body: Uint8Array): AaelEvent {
  const fail = (why: string) => new AaelEventError(`Illegal AAEL eventry format: ${why}`);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(body);
  } catch {
    throw fail('body is not valid UTF-8');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw fail((err as Error).message);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw fail('expected a JSON object');
  }
  const record = value as Record<string, unknown>;
  const field = (name: string): string => {
    if (!Object.hasOwn(record, name)) throw fail(`missing field \`${name}\``);
    const v = record[name];
    if (typeof v !== 'string') throw fail(`invalid type for field \`${name}\`, expected a string`);
    return v;
  };
  return { domain: field('domain'), operation: field('operation'), content: field('content') };
}
