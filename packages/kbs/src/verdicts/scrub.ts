// What a recorded verdict may keep of a token's claims: everything an operator needs to see why a guest
// was refused, nothing that was a secret or a handshake value. Keys known to carry the nonce, the TEE
// key or raw report data are dropped, and so is any string holding one of the request's secret values
// (the evidence may echo them under names this list does not know).

/** Claim names whose values are handshake material, at any depth. */
const DROPPED_KEYS = new Set([
  'nonce',
  'eat_nonce',
  'tee-pubkey',
  'runtime_data_claims',
  'init_data_claims',
  'report_data',
  'reportdata',
  'ear.veraison.key-attestation',
]);

/** Nesting kept; deeper values become `"…"`. Claims of real evidence stay well within it. */
const MAX_DEPTH = 16;
/** A secret value shorter than this would match by accident (a JWK's `e`, a one-byte field). */
const MIN_SECRET_LENGTH = 16;

export const REDACTED = '[redacted]';

/** The values to look for: each string given, and any long string inside a given object (a JWK's n, x, y). */
export function secretValues(...items: unknown[]): string[] {
  const out: string[] = [];
  const walk = (v: unknown, depth: number) => {
    if (typeof v === 'string') {
      if (v.length >= MIN_SECRET_LENGTH) out.push(v);
    } else if (depth < 4 && typeof v === 'object' && v !== null) {
      for (const x of Object.values(v)) walk(x, depth + 1);
    }
  };
  for (const i of items) walk(i, 0);
  return out;
}

/** Whether `s` contains one of `secrets`; `shortest` is the length of the shortest secret. */
function holdsSecret(s: string, secrets: readonly string[], shortest: number): boolean {
  // Most claim strings (statuses, versions, digests of other things) are shorter than any secret.
  if (s.length < shortest) return false;
  for (const secret of secrets) if (s.includes(secret)) return true;
  return false;
}

function shortestLength(secrets: readonly string[]): number {
  let n = Number.POSITIVE_INFINITY;
  for (const s of secrets) if (s.length < n) n = s.length;
  return n;
}

/** A copy of `value` without handshake keys and with strings holding a secret replaced by `[redacted]`. */
export function scrubClaims(value: unknown, secrets: readonly string[], depth = 0): unknown {
  return scrubValue(value, secrets, shortestLength(secrets), depth);
}

function scrubValue(value: unknown, secrets: readonly string[], shortest: number, depth: number): unknown {
  if (typeof value === 'string') return holdsSecret(value, secrets, shortest) ? REDACTED : value;
  if (typeof value !== 'object' || value === null) return value;
  if (depth >= MAX_DEPTH) return '…';
  if (Array.isArray(value)) return value.map((v) => scrubValue(v, secrets, shortest, depth + 1));
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(value)) {
    if (DROPPED_KEYS.has(k.toLowerCase())) continue;
    const v = scrubValue((value as Record<string, unknown>)[k], secrets, shortest, depth + 1);
    const name = holdsSecret(k, secrets, shortest) ? REDACTED : k;
    // defineProperty keeps a `__proto__` claim as data (an assignment would set the prototype).
    if (name === '__proto__') {
      Object.defineProperty(out, name, { value: v, enumerable: true, writable: true, configurable: true });
    } else out[name] = v;
  }
  return out;
}

/** Freezes a scrubbed tree (plain objects and arrays), so that verdicts may share it. */
export function freezeTree<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) freezeTree(v);
  }
  return value;
}

/** A free-text reason (an error message) with any secret value cut out. */
export function scrubText(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) out = out.split(s).join(REDACTED);
  return out.length > 1024 ? `${out.slice(0, 1024)}…` : out;
}

/** The long strings under the dropped keys of `claims` (the nonce, the TEE key, report data), as secrets. */
export function handshakeSecrets(claims: unknown): string[] {
  const out: string[] = [];
  const walk = (v: unknown, depth: number) => {
    if (depth > MAX_DEPTH || typeof v !== 'object' || v === null) return;
    for (const [k, x] of Object.entries(v)) {
      if (DROPPED_KEYS.has(k.toLowerCase())) out.push(...secretValues(x));
      else walk(x, depth + 1);
    }
  };
  walk(claims, 0);
  return out;
}
