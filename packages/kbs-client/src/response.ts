/** Reading KBS responses, which are untrusted: size-capped JSON and error bodies. */
import { ProtocolError, parseJson, parseKbsErrorBody } from '@broker/protocol';
import { KbsBadResponse, type KbsRejection } from './errors.js';
import { bodyExcerpt, type HttpResponse } from './http.js';

/** Parse a JSON body; `what` names the request in the error. */
export function jsonBody(res: HttpResponse, what: string): unknown {
  try {
    return parseJson(res.body, res.body.length);
  } catch (cause) {
    const why = cause instanceof ProtocolError ? cause.message : 'is not valid JSON';
    throw new KbsBadResponse(`${what}: response ${why.replace(/^body:? ?/, '')}`, { cause });
  }
}

const MAX_DETAIL_CHARS = 2048;

/** Server text shown in messages and logs: control characters neutralised, length capped. */
function printable(text: string): string {
  const clean = text.replace(/[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/g, '?');
  return clean.length > MAX_DETAIL_CHARS ? `${clean.slice(0, MAX_DETAIL_CHARS)}…` : clean;
}

/**
 * The rejection an error response carries. A KBS error body gives type,
 * variant and detail; anything else keeps a short printable excerpt.
 */
export function rejectionOf(res: HttpResponse): KbsRejection {
  try {
    const parsed = parseKbsErrorBody(parseJson(res.body, res.body.length));
    return {
      status: res.status,
      type: printable(parsed.type),
      kind: parsed.kind,
      detail: printable(parsed.detail),
    };
  } catch {
    // This KBS's own admin endpoints answer `{"error": "<why>"}`.
    try {
      const body = parseJson(res.body, res.body.length) as { error?: unknown } | null;
      if (typeof body?.error === 'string') {
        return { status: res.status, type: null, kind: null, detail: printable(body.error) };
      }
    } catch {}
    return { status: res.status, type: null, kind: null, detail: bodyExcerpt(res.body) || '(empty body)' };
  }
}
