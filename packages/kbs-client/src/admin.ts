/**
 * The KBS admin API as trustee's kbs-client drives it: resources, the
 * resource and attestation policies, and reference values. Requests carry
 * `Authorization: Bearer <admin token>` when a token is configured and are
 * anonymous otherwise (only an `InsecureAllowAll` KBS accepts those).
 */
import { parseResourcePath } from '@broker/protocol';
import { InvalidResourcePath, KbsBadResponse, KbsRejected } from './errors.js';
import { type HttpResponse, HttpTransport } from './http.js';
import { jsonBody, rejectionOf } from './response.js';

/** trustee's kbs-client sends this User-Agent on admin requests (`kbs-client/<crate version>`). */
export const ADMIN_USER_AGENT = 'kbs-client/0.1.0';
/** Default policy id of `set-attestation-policy`: the KBS evaluates `default` + the TEE class. */
export const DEFAULT_ATTESTATION_POLICY_ID = 'default_cpu';
export const DEFAULT_ATTESTATION_POLICY_TYPE = 'rego';
/** RVPS message version the KBS requires. */
export const RVPS_MESSAGE_VERSION = '0.1.0';

const MAX_ADMIN_RESPONSE_BYTES = 4 * 1024 * 1024;
const KBS = '/kbs/v0';

export interface AdminLogger {
  warn(msg: string): void;
}

export interface KbsAdminClientOptions {
  readonly url: string;
  readonly certPem?: string | readonly string[];
  /**
   * Bearer token, or a function minting one per request (e.g. a short-lived
   * JWT signed with `--auth-private-key`); null/absent sends no Authorization.
   */
  readonly adminToken?: string | null | (() => Promise<string>);
  readonly userAgent?: string;
  readonly timeoutMs?: number;
  readonly logger?: AdminLogger;
}

export interface AttestationPolicyInput {
  /** Policy text (Rego source). */
  readonly policy: string | Uint8Array;
  /** Policy id; default `default_cpu`. */
  readonly id?: string;
  /** Policy type; default `rego`. */
  readonly type?: string;
}

function bytesOf(v: string | Uint8Array): Buffer {
  return typeof v === 'string' ? Buffer.from(v, 'utf8') : Buffer.from(v.buffer, v.byteOffset, v.byteLength);
}

function resourcePath(path: string): string {
  try {
    const p = parseResourcePath(path);
    return `${p.repository}/${p.type}/${p.tag}`;
  } catch (cause) {
    throw new InvalidResourcePath(cause instanceof Error ? cause.message : String(cause), { cause });
  }
}

/** The RVPS `sample` message trustee's kbs-client posts: payload = std-b64 of `{"<name>": value}`. */
export function sampleReferenceValueMessage(
  name: string,
  value: unknown,
): { version: string; type: string; payload: string } {
  const provenance = JSON.stringify({ [name]: value });
  if (provenance === undefined) throw new TypeError('reference value is not JSON');
  return {
    version: RVPS_MESSAGE_VERSION,
    type: 'sample',
    payload: Buffer.from(provenance, 'utf8').toString('base64'),
  };
}

/** Filters of the verdict log (`GET /kbs/v0/admin/verdicts`). */
export interface VerdictFilter {
  readonly status?: string;
  readonly tee?: string;
  readonly kind?: string;
  readonly requestId?: string;
  readonly limit?: number;
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

function checkedId(what: string, id: string): string {
  if (id.length === 0 || id.length > 1024)
    throw new InvalidResourcePath(`${what} must be 1..1024 characters`);
  return id;
}

export class KbsAdminClient {
  readonly #http: HttpTransport;
  readonly #token: KbsAdminClientOptions['adminToken'];
  readonly #log: AdminLogger | undefined;
  #warned = false;

  constructor(options: KbsAdminClientOptions) {
    this.#http = new HttpTransport({
      url: options.url,
      userAgent: options.userAgent ?? ADMIN_USER_AGENT,
      ...(options.certPem !== undefined ? { certPem: options.certPem } : {}),
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      maxResponseBytes: MAX_ADMIN_RESPONSE_BYTES,
    });
    this.#token = options.adminToken ?? null;
    this.#log = options.logger;
  }

  /** Store a resource (raw bytes) at `repo/type/tag`. */
  async setResource(path: string, bytes: string | Uint8Array): Promise<void> {
    await this.#send(
      'set resource',
      'POST',
      `${KBS}/resource/${resourcePath(path)}`,
      bytesOf(bytes),
      'application/octet-stream',
    );
  }

  async deleteResource(path: string): Promise<void> {
    await this.#send('delete resource', 'DELETE', `${KBS}/resource/${resourcePath(path)}`);
  }

  /** Replace the resource policy; the Rego text travels base64url without padding. */
  async setResourcePolicy(rego: string | Uint8Array): Promise<void> {
    const body = JSON.stringify({ policy: bytesOf(rego).toString('base64url') });
    await this.#send('set resource policy', 'POST', `${KBS}/resource-policy`, body, 'application/json');
  }

  /** The ids of the stored resource policies (the KBS does not return the Rego text). */
  async getResourcePolicyIds(): Promise<string[]> {
    const res = await this.#send('get resource policy', 'GET', `${KBS}/resource-policy`);
    const json = jsonBody(res, 'get resource policy');
    if (!Array.isArray(json) || !json.every((x) => typeof x === 'string')) {
      throw new KbsBadResponse('get resource policy: response is not a JSON array of strings');
    }
    return json;
  }

  /** Store an attestation policy under `id` (default `default_cpu`). */
  async setAttestationPolicy(input: AttestationPolicyInput): Promise<void> {
    const body = JSON.stringify({
      type: input.type ?? DEFAULT_ATTESTATION_POLICY_TYPE,
      policy_id: input.id ?? DEFAULT_ATTESTATION_POLICY_ID,
      policy: bytesOf(input.policy).toString('base64url'),
    });
    await this.#send('set attestation policy', 'POST', `${KBS}/attestation-policy`, body, 'application/json');
  }

  /** Register `{name: value}` with the RVPS sample extractor (through the KBS). */
  async setSampleReferenceValue(name: string, value: unknown): Promise<void> {
    const body = JSON.stringify(sampleReferenceValueMessage(name, value));
    await this.#send('set reference value', 'POST', `${KBS}/reference-value`, body, 'application/json');
  }

  /** The reference value stored under `id`, as the KBS returns it (JSON text). */
  async getReferenceValue(id: string): Promise<string> {
    if (id.length === 0 || id.length > 1024)
      throw new TypeError('reference value id must be 1..1024 characters');
    const res = await this.#send(
      'get reference value',
      'GET',
      `${KBS}/reference-value/${encodeURIComponent(id)}`,
    );
    return res.body.toString('utf8');
  }

  /**
   * This KBS's own admin endpoints (the operator console's; not in trustee). A 404 from them means the
   * KBS serves no console (`[admin] console = true`), which the error says.
   */
  async #console(what: string, method: 'GET' | 'DELETE', path: string): Promise<unknown> {
    let res: HttpResponse;
    try {
      res = await this.#send(what, method, path);
    } catch (e) {
      // A KBS without the console answers trustee's 404 PluginNotFound (`admin` is no plugin).
      if (e instanceof KbsRejected && e.status === 404 && e.kind === 'PluginNotFound') {
        throw new KbsRejected(`${what}: the KBS does not serve ${path}`, e, {
          cause: e,
          hint: 'set [admin] console = true in the KBS configuration',
        });
      }
      throw e;
    }
    return jsonBody(res, what);
  }

  /** The stored resources: `{path, size}` each (at most the first 1000). */
  async listResources(): Promise<{ path: string; size: number }[]> {
    const json = await this.#console('list resources', 'GET', `${KBS}/admin/resources`);
    const list = isRecord(json) ? json.resources : undefined;
    if (
      !Array.isArray(list) ||
      !list.every((r) => isRecord(r) && typeof r.path === 'string' && typeof r.size === 'number')
    ) {
      throw new KbsBadResponse('list resources: response is not {"resources": [{path, size}…]}');
    }
    return list as { path: string; size: number }[];
  }

  /** The resource policy's Rego text, or null when none is stored. */
  async getResourcePolicyText(): Promise<string | null> {
    const json = await this.#console('get resource policy', 'GET', `${KBS}/admin/resource-policy`);
    const policy = isRecord(json) ? json.policy : undefined;
    if (policy !== null && typeof policy !== 'string') {
      throw new KbsBadResponse('get resource policy: response is not {"policy": <text or null>}');
    }
    return policy;
  }

  /** The ids of the attestation policies of the built-in attestation service. */
  async listAttestationPolicies(): Promise<string[]> {
    const json = await this.#console('list attestation policies', 'GET', `${KBS}/admin/attestation-policy`);
    const list = isRecord(json) ? json.policies : undefined;
    if (!Array.isArray(list) || !list.every((x) => typeof x === 'string')) {
      throw new KbsBadResponse('list attestation policies: response is not {"policies": [<id>…]}');
    }
    return list;
  }

  /** The Rego text of the attestation policy `id`. */
  async getAttestationPolicy(id: string): Promise<string> {
    const path = `${KBS}/admin/attestation-policy/${encodeURIComponent(checkedId('policy id', id))}`;
    const json = await this.#console('get attestation policy', 'GET', path);
    const policy = isRecord(json) ? json.policy : undefined;
    if (typeof policy !== 'string') {
      throw new KbsBadResponse('get attestation policy: response is not {"id", "policy": <text>}');
    }
    return policy;
  }

  /** The verdict log, newest first, filtered as the KBS's query parameters allow. */
  async listVerdicts(query: VerdictFilter = {}): Promise<unknown> {
    const q = new URLSearchParams();
    if (query.status !== undefined) q.set('status', query.status);
    if (query.tee !== undefined) q.set('tee', query.tee);
    if (query.kind !== undefined) q.set('kind', query.kind);
    if (query.requestId !== undefined) q.set('request_id', query.requestId);
    if (query.limit !== undefined) q.set('limit', String(query.limit));
    const search = q.size > 0 ? `?${q.toString()}` : '';
    const res = await this.#send('list verdicts', 'GET', `${KBS}/admin/verdicts${search}`);
    return jsonBody(res, 'list verdicts');
  }

  /** Expire the reference value `name` in the built-in RVPS; false when there was none. */
  async deleteReferenceValue(name: string): Promise<boolean> {
    const path = `${KBS}/admin/reference-values/${encodeURIComponent(checkedId('reference value name', name))}`;
    try {
      await this.#console('delete reference value', 'DELETE', path);
      return true;
    } catch (e) {
      if (e instanceof KbsRejected && e.status === 404 && e.detail.includes('no reference value'))
        return false;
      throw e;
    }
  }

  /** The KBS's health report (uptime, storage, counters and rates). */
  async health(): Promise<unknown> {
    return this.#console('health', 'GET', `${KBS}/admin/health`);
  }

  close(): void {
    this.#http.close();
  }

  async #bearer(): Promise<string | undefined> {
    const t = this.#token;
    if (typeof t === 'function') return t();
    if (typeof t === 'string') return t;
    if (!this.#warned) {
      this.#warned = true;
      this.#log?.warn('No admin token provided; sending anonymous request');
    }
    return undefined;
  }

  async #send(
    what: string,
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    body?: string | Buffer,
    contentType?: string,
  ): Promise<HttpResponse> {
    const bearer = await this.#bearer();
    const res = await this.#http.request({
      method,
      path,
      // Reads only: a write's second delivery is not for this layer to decide.
      retryOnStaleConnection: method === 'GET',
      ...(body !== undefined ? { body } : {}),
      ...(contentType !== undefined ? { contentType } : {}),
      ...(bearer !== undefined ? { bearer } : {}),
    });
    // Upstream accepts exactly 200.
    if (res.status !== 200) throw new KbsRejected(`${what}: Request Failed`, rejectionOf(res));
    return res;
  }
}
