// Console sign-in: an admin JWT pasted once is exchanged for an opaque cookie (HttpOnly, Secure,
// SameSite=Strict) and a CSRF token. The JWT stays on the server with the session, and every console
// call is authorized with it by the admin API's own check, so the ACL and the token's expiry apply to
// each action; the cookie alone never changes state without the CSRF header.
import { randomBytes, timingSafeEqual } from 'node:crypto';

export const CONSOLE_COOKIE = 'kbs-console';
export const CSRF_HEADER = 'x-csrf-token';
/** A console session lasts at most this long, whatever the token's own expiry. */
export const CONSOLE_SESSION_MS = 60 * 60 * 1000;
/** Sign-ins kept; the oldest goes first. Operators are few. */
export const MAX_CONSOLE_SESSIONS = 64;

export interface ConsoleSession {
  readonly id: string;
  readonly csrf: string;
  /** The admin JWT, sent as `Authorization: Bearer` on the operator's behalf. */
  readonly token: string;
  readonly role: string;
  readonly expires: number;
}

export class ConsoleSessions {
  private readonly byId = new Map<string, ConsoleSession>();

  constructor(private readonly now: () => number = Date.now) {}

  create(token: string, role: string): ConsoleSession {
    this.prune();
    while (this.byId.size >= MAX_CONSOLE_SESSIONS) {
      const oldest = this.byId.keys().next().value;
      if (oldest === undefined) break;
      this.byId.delete(oldest);
    }
    const s: ConsoleSession = {
      id: randomBytes(32).toString('base64url'),
      csrf: randomBytes(32).toString('base64url'),
      token,
      role,
      expires: this.now() + CONSOLE_SESSION_MS,
    };
    this.byId.set(s.id, s);
    return s;
  }

  /** The live session named by the request's console cookie, if any. */
  fromCookieHeader(header: string | undefined): ConsoleSession | undefined {
    const id = consoleCookieValue(header);
    if (id === undefined) return undefined;
    const s = this.byId.get(id);
    if (s === undefined) return undefined;
    if (s.expires <= this.now()) {
      this.byId.delete(id);
      return undefined;
    }
    return s;
  }

  delete(id: string): void {
    this.byId.delete(id);
  }

  private prune(): void {
    const t = this.now();
    for (const [id, s] of this.byId) if (s.expires <= t) this.byId.delete(id);
  }
}

export function consoleCookieValue(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === CONSOLE_COOKIE) return part.slice(eq + 1).trim();
  }
  return undefined;
}

export function consoleCookie(s: ConsoleSession): string {
  return `${CONSOLE_COOKIE}=${s.id}; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=${CONSOLE_SESSION_MS / 1000}`;
}

export const CLEAR_CONSOLE_COOKIE = `${CONSOLE_COOKIE}=; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=0`;

/** Whether the request's CSRF header is the session's token (constant time). */
export function csrfMatches(s: ConsoleSession, header: string | string[] | undefined): boolean {
  if (typeof header !== 'string') return false;
  const a = Buffer.from(header);
  const b = Buffer.from(s.csrf);
  return a.length === b.length && timingSafeEqual(a, b);
}
