// RCAR sessions (trustee kbs/src/attestation/session.rs): created by /auth with a fixed lifetime, moved to
// Attested by /attest, read by resource requests. They live in the `kbs_protocol_session` namespace in
// trustee's JSON form, so any replica sharing the store can continue a handshake.
//
// Every /auth allocates a session, so an unauthenticated client could otherwise grow the store without
// bound. This process therefore tracks the sessions it created (in creation order, which with a fixed
// lifetime is also expiry order) and, over the count or byte budget, drops the oldest first.
import { randomUUID } from 'node:crypto';
import type { KvStorage } from '@broker/kv-storage';
import type { Challenge, KbsRequest } from '@broker/protocol';

export const SESSION_COOKIE = 'kbs-session-id';
const NAMESPACE = 'kbs_protocol_session';
const SESSION_ID_RE = /^[0-9a-f]{32}$/;
/** Stored bytes are estimated as the JSON length plus this per-entry overhead. */
const ENTRY_OVERHEAD = 128;

export interface AuthedSession {
  readonly status: 'Authed';
  readonly id: string;
  /** Epoch milliseconds. */
  readonly expiresAt: number;
  readonly request: KbsRequest;
  readonly challenge: Challenge;
}

export interface AttestedSession {
  readonly status: 'Attested';
  readonly id: string;
  readonly expiresAt: number;
  readonly token: string;
}

export type Session = AuthedSession | AttestedSession;

export interface SessionLimits {
  /** Most sessions this process keeps; default 100,000. */
  readonly maxSessions?: number;
  /** Most bytes of session records this process keeps; default 256 MiB. */
  readonly maxBytes?: number;
}

export interface SessionStoreOptions {
  readonly storage: KvStorage;
  /** trustee's `[attestation_service] timeout`, in milliseconds. */
  readonly lifetimeMs: number;
  readonly limits?: SessionLimits;
  /** Period of the sweep of expired records; default 60 s, 0 disables it. */
  readonly sweepIntervalMs?: number;
  readonly now?: () => number;
  /** Told how many sessions were dropped early because of the limits. */
  readonly onEvict?: (count: number) => void;
}

export const DEFAULT_MAX_SESSIONS = 100_000;
export const DEFAULT_MAX_SESSION_BYTES = 256 * 1024 * 1024;

export function encodeSession(s: Session): Uint8Array {
  const timeout = new Date(s.expiresAt).toISOString();
  const body =
    s.status === 'Authed'
      ? { Authed: { request: s.request, challenge: s.challenge, id: s.id, timeout } }
      : { Attested: { token: s.token, id: s.id, timeout } };
  return Buffer.from(JSON.stringify(body), 'utf8');
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The session a stored record holds, or undefined when it is not one. */
export function decodeSession(bytes: Uint8Array): Session | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
  } catch {
    return undefined;
  }
  if (!isRecord(doc)) return undefined;
  const authed = doc.Authed;
  const attested = doc.Attested;
  const inner = isRecord(authed) ? authed : isRecord(attested) ? attested : undefined;
  if (inner === undefined || typeof inner.id !== 'string' || typeof inner.timeout !== 'string')
    return undefined;
  const expiresAt = Date.parse(inner.timeout);
  if (Number.isNaN(expiresAt)) return undefined;
  if (inner === attested) {
    return typeof inner.token === 'string'
      ? { status: 'Attested', id: inner.id, expiresAt, token: inner.token }
      : undefined;
  }
  const request = inner.request;
  const challenge = inner.challenge;
  if (!isRecord(request) || !isRecord(challenge) || typeof challenge.nonce !== 'string') return undefined;
  return {
    status: 'Authed',
    id: inner.id,
    expiresAt,
    request: request as unknown as KbsRequest,
    challenge: challenge as unknown as Challenge,
  };
}

/** `Set-Cookie` value as trustee's actix cookie: the id and `Expires` only. */
export function sessionCookie(s: Session): string {
  return `${SESSION_COOKIE}=${s.id}; Expires=${new Date(s.expiresAt).toUTCString()}`;
}

/** The session id from a `Cookie` header (the first `kbs-session-id`), if any. */
export function sessionIdFromCookieHeader(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === SESSION_COOKIE) return part.slice(eq + 1).trim();
  }
  return undefined;
}

export class SessionStore {
  private readonly storage: KvStorage;
  private readonly lifetimeMs: number;
  private readonly maxSessions: number;
  private readonly maxBytes: number;
  private readonly now: () => number;
  private readonly onEvict: ((count: number) => void) | undefined;
  /** Sessions created here, oldest first, with their estimated size. */
  private readonly tracked = new Map<string, { expiresAt: number; bytes: number }>();
  private trackedBytes = 0;
  private readonly timer: NodeJS.Timeout | undefined;
  /** The store forgets expired records itself. */
  private readonly selfExpiring: boolean;

  constructor(options: SessionStoreOptions) {
    if (!(options.lifetimeMs > 0)) throw new RangeError('session lifetime must be positive');
    this.storage = options.storage;
    this.lifetimeMs = options.lifetimeMs;
    this.maxSessions = options.limits?.maxSessions ?? DEFAULT_MAX_SESSIONS;
    this.maxBytes = options.limits?.maxBytes ?? DEFAULT_MAX_SESSION_BYTES;
    if (!(this.maxSessions >= 1) || !(this.maxBytes >= 1))
      throw new RangeError('session limits must be positive');
    this.now = options.now ?? Date.now;
    this.onEvict = options.onEvict;
    this.selfExpiring = this.storage.expiresKeys?.(NAMESPACE) ?? false;
    // A store that expires keys itself (Redis) needs no sweep.
    const every = options.sweepIntervalMs ?? (this.selfExpiring ? 0 : 60_000);
    if (every > 0) {
      this.timer = setInterval(() => {
        this.sweep().catch(() => undefined);
      }, every);
      this.timer.unref();
    }
  }

  /** Sessions this process created that are still tracked. */
  get size(): number {
    return this.tracked.size;
  }

  get bytes(): number {
    return this.trackedBytes;
  }

  private untrack(id: string): void {
    const t = this.tracked.get(id);
    if (t === undefined) return;
    this.tracked.delete(id);
    this.trackedBytes -= t.bytes;
  }

  private async put(s: Session, bytes: Uint8Array = encodeSession(s)): Promise<number> {
    const ttlMs = s.expiresAt - this.now();
    // A record that is already past its lifetime is not written at all.
    if (ttlMs <= 0) return 0;
    await this.storage.set(NAMESPACE, s.id, bytes, { ttlMs });
    return bytes.byteLength + ENTRY_OVERHEAD;
  }

  /** Makes room for `bytes` more, expired sessions first, then the oldest live ones. */
  private async makeRoom(bytes: number): Promise<void> {
    const now = this.now();
    let evicted = 0;
    for (const [id, t] of this.tracked) {
      const expired = t.expiresAt <= now;
      const full = this.tracked.size >= this.maxSessions || this.trackedBytes + bytes > this.maxBytes;
      if (!expired && !full) break;
      this.untrack(id);
      if (!expired) {
        await this.storage.delete(NAMESPACE, id);
        evicted++;
      } else if (!this.selfExpiring) await this.storage.delete(NAMESPACE, id);
    }
    if (evicted > 0) this.onEvict?.(evicted);
  }

  /** A new Authed session, stored, with the fixed lifetime starting now. */
  async create(request: KbsRequest, challenge: Challenge): Promise<AuthedSession> {
    const s: AuthedSession = {
      status: 'Authed',
      id: randomUUID().replaceAll('-', ''),
      expiresAt: this.now() + this.lifetimeMs,
      request,
      challenge,
    };
    const encoded = encodeSession(s);
    await this.makeRoom(encoded.byteLength + ENTRY_OVERHEAD);
    const bytes = await this.put(s, encoded);
    this.tracked.set(s.id, { expiresAt: s.expiresAt, bytes });
    this.trackedBytes += bytes;
    return s;
  }

  /** The live session with this id; expired records are deleted on the way. */
  async get(id: string | undefined): Promise<Session | undefined> {
    if (id === undefined || !SESSION_ID_RE.test(id)) return undefined;
    const raw = await this.storage.get(NAMESPACE, id);
    if (raw === undefined) {
      this.untrack(id);
      return undefined;
    }
    const s = decodeSession(raw);
    if (s === undefined || s.id !== id || s.expiresAt < this.now()) {
      this.untrack(id);
      await this.storage.delete(NAMESPACE, id);
      return undefined;
    }
    return s;
  }

  /** Stores the token; the lifetime stays the one fixed at /auth. */
  async attest(s: AuthedSession, token: string): Promise<AttestedSession> {
    const a: AttestedSession = { status: 'Attested', id: s.id, expiresAt: s.expiresAt, token };
    const bytes = await this.put(a);
    const t = this.tracked.get(s.id);
    if (t !== undefined) {
      this.trackedBytes += bytes - t.bytes;
      t.bytes = bytes;
    }
    return a;
  }

  async delete(id: string): Promise<void> {
    this.untrack(id);
    await this.storage.delete(NAMESPACE, id);
  }

  /** Deletes every expired record in the namespace, also those of other replicas. Returns how many. */
  async sweep(): Promise<number> {
    const now = this.now();
    for (const [id, t] of this.tracked) {
      if (t.expiresAt > now) break;
      this.untrack(id);
    }
    let removed = 0;
    for (const id of await this.storage.list(NAMESPACE)) {
      const raw = await this.storage.get(NAMESPACE, id);
      if (raw === undefined) continue;
      const s = decodeSession(raw);
      // Unreadable records are left alone, as trustee does.
      if (s !== undefined && s.expiresAt < now) {
        await this.storage.delete(NAMESPACE, id);
        this.untrack(id);
        removed++;
      }
    }
    return removed;
  }

  close(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
  }
}
