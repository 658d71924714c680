// Console sign-in: an admin JWT pasted once is exchanged for an opaque cookie (HttpOnly, Secure,
// SameSite=Strict) and a CSRF token. The JWT stays on the server with the session, and every console
// call is authorized with it by the admin API's own check, so the ACL and the token's expiry apply to
// each action; the cookie alone never changes state without the CSRF header.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { KbsServiceError } from '../errors.js';

export const CONSOLE_COOKIE = 'kbs-console';
export const CSRF_HEADER = 'x-csrf-token';
/** A console session lasts at most this long, whatever the token's own expiry. */
export const CONSOLE_SESSION_MS = 60 * 60 * 1000;
/**
 * Sign-ins kept per identity (the token's issuer and subject); a further sign-in of the same identity
 * ends its oldest session. Another operator's sessions are never touched.
 */
export const MAX_CONSOLE_SESSIONS_PER_IDENTITY = 16;
/** Sign-ins kept in all; past this a sign-in is refused (nobody is signed out to make room). */
export const MAX_CONSOLE_SESSIONS = 4096;

/** Why a sign-in was refused. */
export class ConsoleSessionError extends KbsServiceError {
  override readonly name: string = 'ConsoleSessionError';
  constructor(message: string) {
    super('TOO_MANY_SESSIONS', message);
  }
}

/**
 * Whom a verified admin JWT speaks for: its issuer and subject, or, for a token without `sub`, the
 * token itself (each such token counts as an identity of its own).
 */
export function tokenIdentity(token: string): string {
  const payload = token.split('.')[1];
  if (payload !== undefined) {
    try {
      const claims: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
      if (typeof claims === 'object' && claims !== null) {
        const { iss, sub } = claims as { iss?: unknown; sub?: unknown };
        if (typeof sub === 'string' && sub !== '') {
          return `sub:${JSON.stringify([typeof iss === 'string' ? iss : '', sub])}`;
        }
      }
    } catch {
      // Not a JWT (InsecureAllowAll takes any token): fall through.
    }
  }
  return `token:${createHash('sha256').update(token).digest('hex')}`;
}

export interface ConsoleSession {
  readonly id: string;
  readonly csrf: string;
  /** The admin JWT, sent as `Authorization: Bearer` on the operator's behalf. */
  readonly token: string;
  readonly role: string;
  /** tokenIdentity() of the token. */
  readonly identity: string;
  readonly expires: number;
}

export class ConsoleSessions {
  private readonly byId = new Map<string, ConsoleSession>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Throws ConsoleSessionError when the global bound is reached. */
  create(token: string, role: string): ConsoleSession {
    this.prune();
    const identity = tokenIdentity(token);
    // Insertion order is sign-in order: the first of this identity's sessions is its oldest.
    const own = [...this.byId.values()].filter((s) => s.identity === identity);
    for (const s of own.slice(0, Math.max(0, own.length - MAX_CONSOLE_SESSIONS_PER_IDENTITY + 1))) {
      this.byId.delete(s.id);
    }
    if (this.byId.size >= MAX_CONSOLE_SESSIONS) {
      throw new ConsoleSessionError(
        `${MAX_CONSOLE_SESSIONS} console sessions are open; sign out of one or wait for one to expire`,
      );
    }
    const s: ConsoleSession = {
      id: randomBytes(32).toString('base64url'),
      csrf: randomBytes(32).toString('base64url'),
      token,
      role,
      identity,
      expires: this.now() + CONSOLE_SESSION_MS,
    };
    this.byId.set(s.id, s);
    return s;
  }

  /** Live sessions (for tests and the health view). */
  get size(): number {
    return this.byId.size;
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
