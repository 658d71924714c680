// `GET /kbs/v0/admin/verdicts?status=&tee=&kind=&request_id=&limit=` and `GET /kbs/v0/admin/verdicts/<id>`: the
// verdict log, behind the admin API's authorization (the ACL sees `/kbs/v0/admin/verdicts[/<id>]`).

import { type AdminAuthorizer, AdminError } from '@broker/auth';
import { KbsError } from '@broker/protocol';
import { KbsServiceError } from '../errors.js';
import { jsonReply, type Reply } from '../reply.js';
import type { VerdictQuery, VerdictStore } from './log.js';

const STATUSES = new Set([
  'affirming',
  'warning',
  'contraindicated',
  'none',
  'failed',
  'allowed',
  'denied',
  'error',
]);
const KINDS = new Set(['attestation', 'resource']);
const TEE_RE = /^[a-z0-9-]{1,32}$/;

export class BadVerdictQuery extends KbsServiceError {
  override readonly name: string = 'BadVerdictQuery';
  constructor(message: string) {
    super('BAD_VERDICT_QUERY', message);
  }
}

function badRequest(message: string): Reply {
  return {
    status: 400,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ error: message }),
  };
}

/** The query, checked: unknown parameters and values out of range are refused, not ignored. */
export function parseVerdictQuery(q: Readonly<Record<string, string>>, size: number): VerdictQuery {
  const out: { status?: string; tee?: string; kind?: string; requestId?: string; limit?: number } = {};
  for (const [k, v] of Object.entries(q)) {
    if (k === 'status') {
      if (!STATUSES.has(v)) throw new BadVerdictQuery(`status must be one of ${[...STATUSES].join(', ')}`);
      out.status = v;
    } else if (k === 'tee') {
      if (!TEE_RE.test(v)) throw new BadVerdictQuery('tee must be a TEE name');
      out.tee = v;
    } else if (k === 'kind') {
      if (!KINDS.has(v)) throw new BadVerdictQuery('kind must be attestation or resource');
      out.kind = v;
    } else if (k === 'request_id') {
      // The ids the KBS keeps (see requestIdOf): at most 64 printable characters.
      if (!/^[\x21-\x7e]{1,64}$/.test(v)) throw new BadVerdictQuery('request_id must be a request id');
      out.requestId = v;
    } else if (k === 'limit') {
      const n = /^[0-9]{1,7}$/.test(v) ? Number(v) : Number.NaN;
      if (!(n >= 1 && n <= size)) throw new BadVerdictQuery(`limit must be an integer from 1 to ${size}`);
      out.limit = n;
    } else throw new BadVerdictQuery(`unknown parameter ${JSON.stringify(k.slice(0, 32))}`);
  }
  return out;
}

/** Throws the admin API's AdminAuthAccess error when the token's role may not use `path`. */
export function checkAdmin(admin: AdminAuthorizer, authorization: string | undefined, path: string): string {
  try {
    return admin.check({ authorization, path }).principal;
  } catch (e) {
    const msg = e instanceof AdminError ? e.message : 'Admin access denied';
    throw new KbsError('AdminAuthAccess', `admin access denied for endpoint ${path.slice(0, 256)}: ${msg}`, {
      cause: e,
    });
  }
}

/** Answers `segments` (after `/kbs/v0/admin/verdicts`) with the list or one entry. */
export async function verdictsReply(
  log: VerdictStore,
  rest: readonly string[],
  query: Readonly<Record<string, string>>,
): Promise<Reply> {
  if (rest.length === 1 && rest[0] !== undefined) {
    const id = /^[0-9]{1,15}$/.test(rest[0]) ? Number(rest[0]) : Number.NaN;
    const v = Number.isNaN(id) ? undefined : await log.get(id);
    if (v === undefined) return { status: 404, headers: {}, body: '' };
    return jsonReply(JSON.stringify(v));
  }
  if (rest.length > 0) return { status: 404, headers: {}, body: '' };
  let q: VerdictQuery;
  try {
    q = parseVerdictQuery(query, log.size);
  } catch (e) {
    if (e instanceof BadVerdictQuery) return badRequest(e.message);
    throw e;
  }
  return jsonReply(JSON.stringify({ size: log.size, verdicts: await log.list(q) }));
}

/** `/kbs/v0/admin/verdicts[/<id>]` for GET, after the admin check; undefined for any other path. */
export function verdictRoute(
  log: VerdictStore,
  admin: AdminAuthorizer,
  req: {
    readonly method: string;
    readonly segments: readonly string[];
    readonly query: Readonly<Record<string, string>>;
    readonly authorization: string | undefined;
  },
): Promise<Reply> | undefined {
  if (req.segments[0] !== 'admin' || req.segments[1] !== 'verdicts' || req.method !== 'GET') return undefined;
  checkAdmin(admin, req.authorization, `/kbs/v0/${req.segments.join('/')}`);
  return verdictsReply(log, req.segments.slice(2), req.query);
}
