// This KBS's own admin endpoints and the console's session handling, run before the admin API:
// - always: the verdict log (`GET /kbs/v0/admin/verdicts`);
// - with `[admin] console = true`: sign-in (`/kbs/v0/admin/console/session`), health, the resource list,
//   the resource policy text with its syntax check and dry run, the attestation policies (list, text,
//   check, dry run) and the reference values (list, expire); and every request carrying a console
//   cookie is turned into the admin API request of its JWT, after the CSRF check when it changes state.
import type { IncomingHttpHeaders } from 'node:http';
import {
  limitErrorOf,
  limitFailures,
  limitRefusal,
  POLICY_EVAL_LIMITS,
  PolicyCheckError,
  policyChecks,
} from '@broker/attestation';
import type { AdminAuthorizer } from '@broker/auth';
import { Engine, fromJSON, toJSON } from '@broker/rego';
import type { ListedReferenceValue } from '@broker/rvps-core';
import { KbsServiceError } from '../errors.js';
import {
  checkResourcePolicy,
  MAX_POLICY_BYTES,
  policyHash as policyHashOf,
  RESOURCE_POLICY_RULE,
} from '../policy/resource-policy.js';
import { jsonReply, type Reply } from '../reply.js';
import type { ApiRequest } from '../request.js';
import { checkAdmin, verdictRoute } from '../verdicts/endpoint.js';
import type { Verdict, VerdictStore } from '../verdicts/log.js';
import { isPolicyHash, type StoredPolicyVersion } from '../verdicts/policy-versions.js';
import { attestationPolicyIdOf } from '../verdicts/recorder.js';
import {
  type AttestationPolicyAccess,
  checkAttestationPolicyText,
  dryRunAttestationPolicy,
  policyIdOf,
} from './attestation-policies.js';
import type { Health } from './health.js';
import {
  CLEAR_CONSOLE_COOKIE,
  ConsoleSessionError,
  type ConsoleSessions,
  CSRF_HEADER,
  consoleCookie,
  csrfMatches,
} from './sessions.js';

export interface ResourceEntry {
  readonly path: string;
  readonly size: number;
}

/** The reference values of the built-in RVPS, or why they cannot be managed here. */
export type ReferenceValueAccess =
  | {
      list(): Promise<ListedReferenceValue[]>;
      /** False when there was no such value. */
      expire(name: string): Promise<boolean>;
    }
  | { readonly unavailable: string };

export interface ConsoleDeps {
  readonly sessions: ConsoleSessions;
  readonly listResources: () => Promise<ResourceEntry[]>;
  readonly resourcePolicyText: () => Promise<string | undefined>;
  readonly health: Health;
  /** Absent when the attestation service is another process (its policies are kept there). */
  readonly attestationPolicies?: AttestationPolicyAccess;
  readonly referenceValues: ReferenceValueAccess;
  /** The policy texts that decided verdicts, by version (SHA-256). */
  readonly policyVersions: { get(hash: string): Promise<StoredPolicyVersion | undefined> };
}

export interface AdminRoutesDeps {
  readonly admin: AdminAuthorizer;
  readonly verdicts: VerdictStore;
  /** Present when the console is enabled. */
  readonly console?: ConsoleDeps;
}

const SESSION_PATH = ['admin', 'console', 'session'];
const MAX_LISTED_RESOURCES = 1000;

/**
 * Whether a Content-Type header names exactly `application/json`, parameters allowed
 * (`application/json; charset=utf-8`), and no other type that merely starts the same.
 */
export function isJsonContentType(header: string | string[] | undefined): boolean {
  if (typeof header !== 'string') return false;
  const semi = header.indexOf(';');
  const type = (semi < 0 ? header : header.slice(0, semi)).trim().toLowerCase();
  return type === 'application/json';
}

const json = (status: number, v: unknown, headers: Record<string, string> = {}): Reply => ({
  status,
  headers: { 'content-type': 'application/json', ...headers },
  body: JSON.stringify(v),
});

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

function bodyJson(body: Uint8Array): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
    return isObject(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

const samePath = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && a.every((s, i) => s === b[i]);

function compilePolicy(text: string): Engine {
  if (Buffer.byteLength(text, 'utf8') > MAX_POLICY_BYTES) {
    throw new KbsServiceError('POLICY_CHECK_FAILED', `larger than ${MAX_POLICY_BYTES} bytes`);
  }
  const engine = new Engine({
    regoVersion: 'v1',
    strictBuiltinErrors: true,
    gatherPrints: false,
    limits: POLICY_EVAL_LIMITS,
  });
  engine.addPolicy('resource-policy.rego', text);
  return engine;
}

/**
 * The resource policy's decision on recorded claims, as the KBS would take it (allow only when exactly
 * true), under the KBS's evaluation limits. A text that exceeded a limit (here, in a check or at upload)
 * is not evaluated again: `limit` names it. Synchronous: call it through `policyChecks`.
 */
export function dryRun(
  text: string,
  claims: unknown,
  resourcePath: readonly string[],
): { allow: boolean; result?: unknown; error?: string; limit?: string } {
  const known = limitFailures.get('resource', text);
  if (known !== undefined) {
    return {
      allow: false,
      error: limitRefusal('the resource policy', known, true).message,
      limit: known.limit,
    };
  }
  let engine: Engine;
  try {
    engine = compilePolicy(text);
    engine.addData(fromJSON({ plugin: 'resource', 'resource-path': resourcePath, query: {} }));
    engine.setInput(claims);
    const v = engine.evalRule(RESOURCE_POLICY_RULE);
    const result = v === undefined ? undefined : toJSON(v);
    return { allow: result === true, ...(result !== undefined && { result }) };
  } catch (e) {
    const limit = limitErrorOf(e);
    if (limit !== undefined) {
      limitFailures.remember('resource', text, limit);
      return {
        allow: false,
        error: limitRefusal('the resource policy', limit, false).message,
        limit: limit.limit,
      };
    }
    return { allow: false, error: (e as Error).message };
  }
}

/** A check's answer: `ok`, or why not (`limit` naming an exceeded limit, `missing_rule`); 503 when busy. */
async function checkReply(check: () => unknown): Promise<Reply> {
  try {
    await policyChecks.run(check);
    return json(200, { ok: true });
  } catch (e) {
    if (e instanceof PolicyCheckError && e.code === 'busy') return json(503, { error: e.message });
    const why =
      e instanceof PolicyCheckError ? { code: e.code, ...(e.limit !== undefined && { limit: e.limit }) } : {};
    return json(200, { ok: false, error: (e as Error).message, ...why });
  }
}

/**
 * A dry run in the queue of checks: 503 when too many wait, 400 when the policy exceeded a limit, 404
 * when the run found nothing to evaluate.
 */
async function dryRunReply<T extends { limit?: string }>(
  run: () => T | undefined | Promise<T | undefined>,
): Promise<Reply> {
  let result: T | undefined;
  try {
    result = await policyChecks.run(run);
  } catch (e) {
    if (e instanceof PolicyCheckError && e.code === 'busy') return json(503, { error: e.message });
    throw e;
  }
  if (result === undefined) return json(404, { error: 'no recorded appraisal claims for that verdict' });
  return json(result.limit !== undefined ? 400 : 200, result);
}

/**
 * The policy text a dry run evaluates: the `policy` given, or the `version` named — `recorded` (the one
 * that decided the verdict), `current` (the one stored now) or a SHA-256 — as `{text, version}`; a
 * string when it cannot be found (the answer's error).
 */
async function policyToRun(
  body: Record<string, unknown>,
  recorded: string | undefined,
  current: () => Promise<string | undefined>,
  versions: ConsoleDeps['policyVersions'],
): Promise<{ text: string; version?: string } | Reply> {
  if (typeof body.policy === 'string') return { text: body.policy };
  const want = body.version;
  if (want === 'current') {
    const text = await current();
    return text === undefined
      ? json(404, { error: 'there is no current policy' })
      : { text, version: policyHashOf(text) };
  }
  if (want === 'recorded' && recorded === undefined) {
    return json(404, { error: 'the verdict does not name the policy version that decided it' });
  }
  const hash = want === 'recorded' ? recorded : want;
  if (!isPolicyHash(hash)) {
    return json(400, {
      error:
        'the body must be {"policy": "<rego text>", …} or {"version": "recorded" | "current" | "<sha-256 hex>", …}',
    });
  }
  const v = await versions.get(hash);
  if (v === undefined) return json(404, { error: `policy version ${hash.slice(0, 12)}… is no longer kept` });
  return { text: v.text, version: hash };
}

/** The appraisal of an attestation verdict a dry run is about: `submod`, else the first. */
function appraisalOf(v: Verdict | undefined, submod: string | undefined) {
  if (v?.kind !== 'attestation') return undefined;
  return submod === undefined ? v.appraisals[0] : v.appraisals.find((a) => a.name === submod);
}

export function createAdminRoutes(
  deps: AdminRoutesDeps,
): (req: ApiRequest, headers: IncomingHttpHeaders) => Promise<Reply | ApiRequest> {
  const { admin, verdicts } = deps;
  const consoleDeps = deps.console;
  const path = (req: ApiRequest) => `/kbs/v0/${req.segments.join('/')}`;

  const attestationPolicyRoute = async (
    method: string,
    second: string | undefined,
    more: readonly string[],
    rawBody: Uint8Array,
  ): Promise<Reply | undefined> => {
    const policies = consoleDeps?.attestationPolicies;
    if (more.length > 0) return undefined;
    if (policies === undefined) {
      return json(501, {
        error:
          'the attestation service is another process ([attestation_service] coco_as_grpc): its policies are managed there',
      });
    }
    if (method === 'GET' && second === undefined) {
      return jsonReply(JSON.stringify({ policies: (await policies.list()).sort() }));
    }
    if (method === 'GET') {
      const id = policyIdOf(second);
      const text = id === undefined ? undefined : await policies.get(id);
      if (text === undefined) return json(404, { error: 'no attestation policy of that id' });
      return jsonReply(JSON.stringify({ id, policy: text }));
    }
    if (method !== 'POST' || (second !== 'check' && second !== 'dry-run')) return undefined;
    const body = bodyJson(rawBody);
    if (second === 'check') {
      if (body === undefined || typeof body.policy !== 'string') {
        return json(400, { error: 'the body must be {"policy": "<rego text>", …}' });
      }
      const text = body.policy;
      return checkReply(() => checkAttestationPolicyText(text));
    }
    if (body === undefined) return json(400, { error: 'the body must be a JSON object' });
    if (body.submod !== undefined && (typeof body.submod !== 'string' || body.submod.length > 64)) {
      return json(400, { error: 'submod must be the name of an appraisal, e.g. "cpu0"' });
    }
    const v = typeof body.verdict === 'number' ? await verdicts.get(body.verdict) : undefined;
    const claims = v?.claims;
    const submod = body.submod as string | undefined;
    if (claims === undefined) return json(404, { error: 'no recorded appraisal claims for that verdict' });
    const appraisal = appraisalOf(v, submod);
    const run = await policyToRun(
      body,
      appraisal?.policyVersion,
      async () =>
        appraisal === undefined || appraisal.policyId === ''
          ? undefined
          : policies.get(attestationPolicyIdOf(appraisal.policyId, appraisal.name)),
      consoleDeps?.policyVersions ?? { get: async () => undefined },
    );
    if ('status' in run) return run;
    return dryRunReply(async () => {
      const r = await dryRunAttestationPolicy(run.text, claims, submod, policies.referenceValue);
      return r === undefined || run.version === undefined ? r : { ...r, version: run.version };
    });
  };

  const referenceValueRoute = async (
    method: string,
    second: string | undefined,
    more: readonly string[],
    access: ReferenceValueAccess,
  ): Promise<Reply | undefined> => {
    if (more.length > 0) return undefined;
    if ('unavailable' in access) return json(501, { error: access.unavailable });
    if (method === 'GET' && second === undefined) {
      return jsonReply(JSON.stringify({ referenceValues: await access.list() }));
    }
    if (method === 'DELETE' && second !== undefined) {
      let existed: boolean;
      try {
        existed = await access.expire(second);
      } catch (e) {
        return json(400, { error: (e as Error).message });
      }
      return existed
        ? json(200, { expired: second })
        : json(404, { error: 'no reference value of that name' });
    }
    return undefined;
  };

  const consoleRoute = async (req: ApiRequest, headers: IncomingHttpHeaders): Promise<Reply | undefined> => {
    if (consoleDeps === undefined || req.segments[0] !== 'admin') return undefined;
    const { sessions } = consoleDeps;
    const [, first, second, ...more] = req.segments;
    if (first === 'health' && second === undefined && req.method === 'GET') {
      checkAdmin(admin, req.authorization, path(req));
      return jsonReply(JSON.stringify(await consoleDeps.health.report()));
    }
    if (first === 'resources' && second === undefined && req.method === 'GET') {
      checkAdmin(admin, req.authorization, path(req));
      const list = (await consoleDeps.listResources()).slice(0, MAX_LISTED_RESOURCES);
      return jsonReply(JSON.stringify({ resources: list }));
    }
    if (first === 'resource-policy' && more.length === 0) {
      if (second === undefined && req.method === 'GET') {
        checkAdmin(admin, req.authorization, path(req));
        return jsonReply(JSON.stringify({ policy: (await consoleDeps.resourcePolicyText()) ?? null }));
      }
      if ((second === 'check' || second === 'dry-run') && req.method === 'POST') {
        checkAdmin(admin, req.authorization, path(req));
        const body = bodyJson(req.body);
        if (second === 'check') {
          if (body === undefined || typeof body.policy !== 'string') {
            return json(400, { error: 'the body must be {"policy": "<rego text>", …}' });
          }
          const text = body.policy;
          return checkReply(() => checkResourcePolicy(text));
        }
        if (body === undefined) return json(400, { error: 'the body must be a JSON object' });
        const v = typeof body.verdict === 'number' ? await verdicts.get(body.verdict) : undefined;
        if (v?.claims === undefined) return json(404, { error: 'no recorded claims for that verdict' });
        const resource = typeof body.resource === 'string' ? body.resource : '';
        const segments = resource.split('/');
        if (segments.length !== 3 || segments.some((s) => s === '')) {
          return json(400, { error: 'resource must be <repository>/<type>/<tag>' });
        }
        const run = await policyToRun(
          body,
          v.kind === 'resource' ? v.policyVersion : undefined,
          consoleDeps.resourcePolicyText,
          consoleDeps.policyVersions,
        );
        if ('status' in run) return run;
        const claims = v.claims;
        return dryRunReply(() => {
          const r = dryRun(run.text, claims, segments);
          return run.version === undefined ? r : { ...r, version: run.version };
        });
      }
    }
    if (first === 'policy-versions' && second !== undefined && more.length === 0 && req.method === 'GET') {
      checkAdmin(admin, req.authorization, path(req));
      const v = isPolicyHash(second) ? await consoleDeps.policyVersions.get(second) : undefined;
      if (v === undefined) return json(404, { error: 'no policy of that version is kept' });
      return jsonReply(JSON.stringify(v));
    }
    if (first === 'attestation-policy') {
      checkAdmin(admin, req.authorization, path(req));
      return attestationPolicyRoute(req.method, second, more, req.body);
    }
    if (first === 'reference-values') {
      checkAdmin(admin, req.authorization, path(req));
      return referenceValueRoute(req.method, second, more, consoleDeps.referenceValues);
    }
    if (samePath(req.segments, SESSION_PATH)) {
      if (req.method === 'POST') {
        // A cross-site form cannot send this content type (it would need a CORS preflight), so another
        // site cannot sign a browser in to a session of its choosing.
        if (!isJsonContentType(headers['content-type'])) {
          return json(415, { error: 'sign-in takes application/json' });
        }
        const body = bodyJson(req.body);
        const token = body !== undefined && typeof body.token === 'string' ? body.token.trim() : '';
        const authorization = `Bearer ${token}`;
        const role = checkAdmin(admin, authorization, path(req));
        let s: ReturnType<ConsoleSessions['create']>;
        try {
          s = sessions.create(token, role);
        } catch (e) {
          if (e instanceof ConsoleSessionError) return json(503, { error: e.message });
          throw e;
        }
        return json(200, { role, csrf: s.csrf }, { 'set-cookie': consoleCookie(s) });
      }
      if (req.method === 'GET') {
        // The page's state after a reload; answers only to a live session.
        const s = sessions.fromCookieHeader(headers.cookie);
        if (s === undefined) return json(401, { error: 'not signed in' });
        return json(200, { role: s.role, csrf: s.csrf });
      }
      if (req.method === 'DELETE') {
        const s = sessions.fromCookieHeader(headers.cookie);
        if (s !== undefined && !csrfMatches(s, headers[CSRF_HEADER])) {
          return json(403, { error: `the ${CSRF_HEADER} header is missing or wrong` });
        }
        if (s !== undefined) sessions.delete(s.id);
        return json(200, {}, { 'set-cookie': CLEAR_CONSOLE_COOKIE });
      }
    }
    return undefined;
  };

  return async (req, headers) => {
    let routed = req;
    if (
      consoleDeps !== undefined &&
      req.authorization === undefined &&
      !samePath(req.segments, SESSION_PATH)
    ) {
      const s = consoleDeps.sessions.fromCookieHeader(headers.cookie);
      if (s !== undefined) {
        if (req.method !== 'GET' && !csrfMatches(s, headers[CSRF_HEADER])) {
          return json(403, { error: `the ${CSRF_HEADER} header is missing or wrong` });
        }
        routed = { ...req, authorization: `Bearer ${s.token}` };
      }
    }
    const own = (await verdictRoute(verdicts, admin, routed)) ?? (await consoleRoute(routed, headers));
    return own ?? routed;
  };
}
