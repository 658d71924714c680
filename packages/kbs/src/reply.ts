// What a handler answers: status, headers and a complete body (KBS bodies are small and never streamed).
import { KbsError, kbsErrorBody } from '@broker/protocol';

export interface Reply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string | Uint8Array;
}

export const JSON_TYPE = 'application/json';

export function jsonReply(body: string, headers: Record<string, string> = {}): Reply {
  return { status: 200, headers: { 'content-type': JSON_TYPE, ...headers }, body };
}

/** 200 with an empty body and no content type (actix `HttpResponse::Ok().finish()`). */
export function emptyReply(headers: Record<string, string> = {}): Reply {
  return { status: 200, headers, body: '' };
}

/** trustee's error response: the JSON body, 401 or 404, and (as actix sends it) no content type. */
export function errorReply(err: KbsError): Reply {
  return { status: err.status, headers: {}, body: JSON.stringify(kbsErrorBody(err)) };
}

export { KbsError };
