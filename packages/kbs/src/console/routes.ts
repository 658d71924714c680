// This KBS's own admin endpoints and the console's session handling, run before the admin API:
// - always: the verdict log (`GET /kbs/v0/admin/verdicts`);
// - with `[admin] console = true`: sign-in (`/kbs/v0/admin/console/session`), the resource list, the
//   resource policy text, its syntax check and dry run; and every request carrying a console cookie is
//   turned into the admin API request of its JWT, after the CSRF check when it changes state.
import type { IncomingHttpHeaders } from 'node:http';
import { Engine, fromJSON, toJSON } from '@broker/rego';
import type { AdminAuthorizer } from '../admin.js';
import type { ApiRequest } from '../api.js';
import { MAX_POLICY_BYTES, RESOURCE_POLICY_RULE } from '../policy/resource-policy.js';
import { jsonReply, type Reply } from '../reply.js';
import { checkAdmin, verdictRoute } from '../verdicts/endpoint.js';
import type { VerdictLog } from '../verdicts/log.js';
import type { Health } from './health.js';
import {
  CLEAR_CONSOLE_COOKIE,
  type ConsoleSessions,
  CSRF_HEADER,
  consoleCookie,
  csrfMatches,
} from './sessions.js';

export interface ResourceEntry {
  readonly path: string;
  readonly size: number;
}

export interface AdminRoutesDeps {
  readonly admin: AdminAuthorizer;
  readonly verdicts: VerdictLog;
  /** Present when the console is enabled. */
  readonly console?: {
    readonly sessions: ConsoleSessions;
    readonly listResources: () => Promise<ResourceEntry[]>;
    readonly resourcePolicyText: () => Promise<string | undefined>;
    readonly health: Health;
  };
}

const SESSION_PATH = ['admin', 'console', 'session'];
const MAX_LISTED_RESOURCES = 1000;

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
    throw new Error(`larger than ${MAX_POLICY_BYTES} bytes`);
  }
  const engine = new Engine({ regoVersion: 'v1', strictBuiltinErrors: true, gatherPrints: false });
  engine.addPolicy('resource-policy.rego', text);
  return engine;
}

/** The resource policy's decision on recorded claims, as the KBS would take it (allow only when exactly true). */
export function dryRun(
  text: string,
  claims: unknown,
  resourcePath: readonly string[],
): { allow: boolean; result?: unknown; error?: string } {
  let engine: Engine;
  try {
    engine = compilePolicy(text);
    engine.addData(fromJSON({ plugin: 'resource', 'resource-path': resourcePath, query: {} }));
    engine.setInput(claims);
    const v = engine.evalRule(RESOURCE_POLICY_RULE);
    const result = v === undefined ? undefined : toJSON(v);
    return { allow: result === true, ...(result !== undefined && { result }) };
  } catch (e) {
    return { allow: false, error: (e as Error).message };
  }
}

export function createAdminRoutes(
  deps: AdminRoutesDeps,
): (req: ApiRequest, headers: IncomingHttpHeaders) => Promise<Reply | ApiRequest> {
  const { admin, verdicts } = deps;
  const consoleDeps = deps.console;
  const path = (req: ApiRequest) => `/kbs/v0/${req.segments.join('/')}`;

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
        if (body === undefined || typeof body.policy !== 'string') {
          return json(400, { error: 'the body must be {"policy": "<rego text>", …}' });
        }
        if (second === 'check') {
          try {
            compilePolicy(body.policy);
            return json(200, { ok: true });
          } catch (e) {
            return json(200, { ok: false, error: (e as Error).message });
          }
        }
        const v = typeof body.verdict === 'number' ? verdicts.get(body.verdict) : undefined;
        if (v?.claims === undefined) return json(404, { error: 'no recorded claims for that verdict' });
        const resource = typeof body.resource === 'string' ? body.resource : '';
        const segments = resource.split('/');
        if (segments.length !== 3 || segments.some((s) => s === '')) {
          return json(400, { error: 'resource must be <repository>/<type>/<tag>' });
        }
        return json(200, dryRun(body.policy, v.claims, segments));
      }
    }
    if (samePath(req.segments, SESSION_PATH)) {
      if (req.method === 'POST') {
        // A cross-site form cannot send this content type (it would need a CORS preflight), so another
        // site cannot sign a browser in to a session of its choosing.
        if (!String(headers['content-type'] ?? '').startsWith('application/json')) {
          return json(415, { error: 'sign-in takes application/json' });
        }
        const body = bodyJson(req.body);
        const token = body !== undefined && typeof body.token === 'string' ? body.token.trim() : '';
        const authorization = `Bearer ${token}`;
        const role = checkAdmin(admin, authorization, path(req));
        const s = sessions.create(token, role);
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
    const own = verdictRoute(verdicts, admin, routed) ?? (await consoleRoute(routed, headers));
    return own ?? routed;
  };
}
