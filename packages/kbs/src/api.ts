// The `/kbs/v0/<plugin>/...` dispatcher (trustee kbs/src/api_server.rs `api`): the built-in endpoints,
// then the resource plugin, each with upstream's admin, token and policy checks and error kinds.

import { type AttestationService, PolicyCheckError, RemoteWriteRefused } from '@broker/attestation';
import { type AdminAuthorizer, AdminError, bearerToken } from '@broker/auth';
import {
  decodeBase64UrlStrict,
  KbsError,
  type KbsErrorKind,
  kbsErrorBody,
  parseJson,
  parseResourcePath,
  type ResourcePath,
} from '@broker/protocol';
import type { Logger } from 'pino';
import { KbsServiceError } from './errors.js';
import { JweEncrypter } from './jwe-encrypter.js';
import type { KbsMetrics } from './metrics.js';
import type { DecisionObserver } from './observer.js';
import type { BuiltinPluginHost } from './plugins/builtin.js';
import type { ExternalPlugin } from './plugins/external.js';
import { type PolicyOutcome, requirePolicyAllows } from './policy/decide.js';
import {
  type PolicyData,
  PolicyEngineError,
  type PolicyVersion,
  type ResourcePolicy,
} from './policy/resource-policy.js';
import type { Rcar } from './rcar.js';
import { emptyReply, jsonReply, type Reply } from './reply.js';
import type { ResourceRepository } from './repository.js';
import type { ApiRequest } from './request.js';
import type { SessionStore } from './session.js';
import type { AttestationTokenVerifier } from './token.js';

/**
 * A policy refused by its checks (missing rule, a limit exceeded on the representative input): 400 with
 * the KBS error body naming why (503 while too many checks wait). An administrator's mistake, so not the
 * 401 that makes guests re-attest.
 */
function policyCheckReply(e: PolicyCheckError, kind: KbsErrorKind, prefix: string): Reply {
  const body = kbsErrorBody(new KbsError(kind, `${prefix}${e.message}`));
  return {
    status: e.code === 'busy' ? 503 : 400,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  };
}

/** The PolicyCheckError an error is or was caused by. */
function policyCheckOf(e: unknown): PolicyCheckError | undefined {
  for (let c: unknown = e, i = 0; c instanceof Error && i < 8; c = c.cause, i++) {
    if (c instanceof PolicyCheckError) return c;
  }
  return undefined;
}

export interface ApiDeps {
  readonly rcar: Rcar;
  readonly sessions: SessionStore;
  readonly attestation: AttestationService;
  readonly tokens: AttestationTokenVerifier;
  readonly admin: AdminAuthorizer;
  readonly policy: ResourcePolicy;
  /** Absent when no `[[plugins]] name = "resource"` is configured. */
  readonly repository: ResourceRepository | undefined;
  readonly metrics: KbsMetrics;
  readonly logger: Logger;
  /** Told of each resource request's policy result (the operator console's verdict log). */
  readonly observer?: DecisionObserver;
  /** `[[plugins]] name = "external"`: gRPC plugins under `/kbs/v0/external/<backend>/`. */
  readonly external?: ExternalPlugin;
  /** `[[plugins]] name = "sample"` / `"nebula-ca"`: under `/kbs/v0/<name>/`. */
  readonly builtinPlugins?: BuiltinPluginHost;
}

const TEXT_XML = { 'content-type': 'text/xml' };

function utf8(body: Uint8Array): string | undefined {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(body);
  } catch {
    return undefined;
  }
}

/** The path the request is routed on, as the admin ACL must see it. */
export function routedPath(segments: readonly string[]): string {
  return `/kbs/v0/${segments.join('/')}`;
}

/**
 * The admin ACL's view of a built-in endpoint: the endpoint and the part of the path it uses. The router
 * picks these endpoints by their first segment and ignores what follows (as trustee does), so
 * `/kbs/v0/resource-policy/x` is judged as the `/kbs/v0/resource-policy` it reaches.
 */
function endpointPath(endpoint: string, subPath = ''): string {
  return subPath === '' ? `/kbs/v0/${endpoint}` : `/kbs/v0/${endpoint}/${subPath}`;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export class Api {
  /** TEE keys checked and imported once per key, not once per resource. */
  private readonly jwe = new JweEncrypter();

  constructor(private readonly deps: ApiDeps) {}

  private checkAdmin(req: ApiRequest, endpoint: string, subPath?: string): void {
    try {
      const d = this.deps.admin.check({
        authorization: req.authorization,
        path: endpointPath(endpoint, subPath),
      });
      this.deps.logger.info(
        { endpoint, principal: d.principal, mode: this.deps.admin.mode },
        'admin access granted',
      );
    } catch (e) {
      const msg = e instanceof AdminError ? e.message : 'Admin access denied';
      throw new KbsError('AdminAuthAccess', `admin access denied for endpoint ${endpoint}: ${msg}`, {
        cause: e,
      });
    }
  }

  async handle(req: ApiRequest): Promise<Reply> {
    const plugin = req.segments[0] ?? '';
    const rest = req.segments.slice(1);
    const { method } = req;
    switch (plugin) {
      case 'auth':
        if (method === 'POST') return this.deps.rcar.auth(req.body);
        break;
      case 'attest':
        if (method === 'POST') return this.deps.rcar.attest(req.body, req.sessionId, req.peer, req.requestId);
        break;
      case 'attestation-policy':
        if (method === 'POST') return this.setAttestationPolicy(req);
        break;
      case 'reference-value':
        if (method === 'GET') return this.getReferenceValue(req, rest.join('/'));
        if (method === 'POST') return this.registerReferenceValue(req);
        break;
      case 'resource-policy':
        if (method === 'POST') return this.setResourcePolicy(req);
        if (method === 'GET') return this.listResourcePolicies(req);
        break;
    }
    const repository = this.deps.repository;
    if (plugin === 'resource' && repository !== undefined) {
      return this.deps.metrics.measurePlugin(
        'resource',
        (e) => e instanceof KbsError && e.kind === 'PluginInternalError',
        () => this.resource(req, repository, rest),
      );
    }
    const external = this.deps.external;
    if (plugin === 'external' && external !== undefined) return external.handle(req, rest);
    const builtin = this.deps.builtinPlugins;
    if (builtin?.has(plugin)) return builtin.handle(req, plugin, rest);
    throw new KbsError('PluginNotFound', `Plugin ${plugin} not found`);
  }

  private async setAttestationPolicy(req: ApiRequest): Promise<Reply> {
    this.checkAdmin(req, 'attestation-policy');
    const failed = (cause: unknown) =>
      new KbsError('AttestationError', 'Attestation error: Set Attestation Policy failed', { cause });
    let input: unknown;
    try {
      input = parseJson(req.body);
    } catch (e) {
      throw failed(e);
    }
    if (!isRecord(input) || typeof input.policy_id !== 'string' || typeof input.policy !== 'string') {
      throw failed(new Error('parse set policy request: policy_id and policy must be strings'));
    }
    const bytes = decodeBase64UrlStrict(input.policy);
    const text = bytes === null ? undefined : utf8(bytes);
    if (text === undefined) throw failed(new Error('policy is not base64url (no padding) of UTF-8 text'));
    try {
      await this.deps.attestation.setPolicy(input.policy_id, text);
    } catch (e) {
      const check = policyCheckOf(e);
      if (check !== undefined) {
        this.deps.logger.warn(
          { policyId: input.policy_id, err: check.message },
          'attestation policy refused',
        );
        return policyCheckReply(
          check,
          'AttestationError',
          'Attestation error: Set Attestation Policy failed: ',
        );
      }
      // The operator must learn which credential the remote attestation service wants.
      if (e instanceof RemoteWriteRefused) {
        throw new KbsError(
          'AttestationError',
          `Attestation error: Set Attestation Policy failed: ${e.message}`,
          {
            cause: e,
          },
        );
      }
      throw failed(e);
    }
    this.deps.logger.info({ policyId: input.policy_id }, 'attestation policy set');
    return emptyReply();
  }

  private async getReferenceValue(req: ApiRequest, id: string): Promise<Reply> {
    this.checkAdmin(req, 'reference-value', id);
    let value: unknown;
    try {
      value = await this.deps.attestation.getReferenceValue(id);
    } catch (e) {
      throw new KbsError(
        'RvpsError',
        `RVPS configuration failed: Failed to get reference_values: ${(e as Error).message}`,
      );
    }
    if (value === undefined) {
      throw new KbsError(
        'RvpsError',
        `RVPS configuration failed: Failed to get reference_values: No reference value found for the given id: ${id.slice(0, 256)}`,
      );
    }
    return jsonReply(JSON.stringify(value));
  }

  private async registerReferenceValue(req: ApiRequest): Promise<Reply> {
    this.checkAdmin(req, 'reference-value');
    const message = utf8(req.body);
    if (message === undefined) {
      throw new KbsError('RvpsError', 'RVPS configuration failed: Failed to parse reference value message');
    }
    try {
      await this.deps.attestation.registerReferenceValue(message);
    } catch (e) {
      throw new KbsError(
        'RvpsError',
        `RVPS configuration failed: Failed to register reference value: ${(e as Error).message}`,
      );
    }
    this.deps.logger.info('reference values registered');
    return { status: 200, headers: { 'content-type': 'application/json' }, body: '' };
  }

  private async setResourcePolicy(req: ApiRequest): Promise<Reply> {
    this.checkAdmin(req, 'resource-policy');
    const parseError = (msg: string) => new KbsError('ParsePolicyError', `Failed to parse policy: ${msg}`);
    let doc: unknown;
    try {
      doc = parseJson(req.body);
    } catch {
      throw parseError('Illegal SetPolicy Request Json');
    }
    const policy = isRecord(doc) ? doc.policy : undefined;
    if (policy === undefined) throw parseError('No `policy` field inside SetPolicy Request Json');
    if (typeof policy !== 'string')
      throw parseError('`policy` field is not a string in SetPolicy Request Json');
    const bytes = decodeBase64UrlStrict(policy);
    if (bytes === null) throw parseError('Failed to decode policy: not base64url without padding');
    const text = utf8(bytes);
    if (text === undefined) throw parseError('Failed to decode policy: invalid utf-8');
    try {
      await this.deps.policy.set(text);
    } catch (e) {
      if (e instanceof PolicyCheckError) {
        this.deps.logger.warn({ err: e.message }, 'resource policy refused');
        return policyCheckReply(e, 'PolicyEngineError', 'Policy engine error: ');
      }
      if (e instanceof PolicyEngineError)
        throw new KbsError('PolicyEngineError', `Policy engine error: ${e.message}`);
      throw e;
    }
    this.deps.logger.info('resource policy set');
    return emptyReply();
  }

  private async listResourcePolicies(req: ApiRequest): Promise<Reply> {
    this.checkAdmin(req, 'resource-policy');
    try {
      return jsonReply(JSON.stringify(await this.deps.policy.list()));
    } catch (e) {
      if (e instanceof PolicyEngineError)
        throw new KbsError('PolicyEngineError', `Policy engine error: ${e.message}`);
      throw e;
    }
  }

  private resourcePath(rest: readonly string[]): ResourcePath {
    try {
      return parseResourcePath(rest.join('/'));
    } catch (e) {
      throw new KbsError('PluginInternalError', undefined, { cause: e });
    }
  }

  private async resource(req: ApiRequest, repo: ResourceRepository, rest: readonly string[]): Promise<Reply> {
    const { metrics, logger } = this.deps;
    if (req.method === 'POST' || req.method === 'DELETE') {
      try {
        this.deps.admin.check({ authorization: req.authorization, path: routedPath(req.segments) });
      } catch (e) {
        // trustee reports a denied plugin admin call as AdminAuthInitialization.
        const msg = e instanceof AdminError ? e.message : 'Admin access denied';
        throw new KbsError('AdminAuthInitialization', `failed to initialize [admin] configuration: ${msg}`, {
          cause: e,
        });
      }
      const path = this.resourcePath(rest);
      const label = `${path.repository}/${path.type}/${path.tag}`;
      try {
        if (req.method === 'POST') {
          await repo.write(path, req.body);
          metrics.countResource('write', label);
        } else {
          await repo.delete(path);
          metrics.countResource('delete', label);
        }
      } catch (e) {
        throw new KbsError('PluginInternalError', undefined, { cause: e });
      }
      logger.info({ resource: label, op: req.method === 'POST' ? 'write' : 'delete' }, 'resource changed');
      return emptyReply(TEXT_XML);
    }

    // Everything else is a client call: attestation token, then policy, then the plugin.
    const token = await this.attestationToken(req);
    let claims: Record<string, unknown>;
    try {
      claims = this.deps.tokens.verify(token);
    } catch (e) {
      throw new KbsError('TokenVerifierError', undefined, { cause: e });
    }
    const record = (status: PolicyOutcome, reason?: string, policy?: PolicyVersion) =>
      this.deps.observer?.resource({
        method: req.method,
        resource: rest.join('/'),
        sessionId: req.sessionId,
        source: req.peer,
        requestId: req.requestId,
        token,
        claims,
        status,
        reason,
        policy,
      });
    const data: PolicyData = { plugin: 'resource', 'resource-path': rest, query: req.query };
    // An allowed request is recorded once its resource was read: one for a missing resource was refused.
    const policy = await requirePolicyAllows(this.deps, claims, data, (s, r, p) => {
      if (s !== 'allowed') record(s, r, p);
    });
    let path: ResourcePath;
    let plaintext: Uint8Array;
    try {
      if (req.method !== 'GET')
        throw new KbsServiceError(
          'REQUEST_INVALID',
          'Illegal HTTP method. Only supports `GET`, `POST` and `DELETE`',
        );
      path = this.resourcePath(rest);
      plaintext = await repo.read(path);
    } catch (e) {
      const why = e instanceof KbsError && e.cause instanceof Error ? e.cause : (e as Error);
      record('denied', `the resource policy allowed it, but ${why.message}`, policy);
      throw e instanceof KbsError ? e : new KbsError('PluginInternalError', undefined, { cause: e });
    }
    record('allowed', undefined, policy);
    metrics.countResource('read', `${path.repository}/${path.type}/${path.tag}`);
    let teeKey: ReturnType<AttestationTokenVerifier['teePublicKey']>;
    try {
      teeKey = this.deps.tokens.teePublicKey(claims);
    } catch (e) {
      throw new KbsError('TokenVerifierError', undefined, { cause: e });
    }
    let jwe: unknown;
    try {
      jwe = this.jwe.encrypt(plaintext, teeKey);
    } catch (e) {
      throw new KbsError('JweError', undefined, { cause: e });
    }
    return jsonReply(JSON.stringify(jwe));
  }

  /** The token of an attested cookie session, else the Bearer token; TokenNotFound when neither. */
  private async attestationToken(req: ApiRequest): Promise<string> {
    const session = await this.deps.sessions.get(req.sessionId);
    if (session?.status === 'Attested') return session.token;
    const bearer = bearerToken(req.authorization);
    if (bearer === undefined) throw new KbsError('TokenNotFound');
    return bearer;
  }
}
