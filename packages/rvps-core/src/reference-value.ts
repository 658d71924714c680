// The stored record, as trustee's RVPS writes it: the value plus metadata.
import { RvpsError } from './errors.js';

export const REFERENCE_VALUE_VERSION = '0.1.0';
/** trustee stamps every extracted value with now + 12 months. */
export const MONTHS_BEFORE_EXPIRATION = 12;

export interface ReferenceValue {
  readonly version: string;
  readonly name: string;
  /**
   * `YYYY-MM-DDTHH:MM:SSZ`, UTC. Once past, a policy no longer sees the value (as trustee's RVPS
   * skipped expired values until its query API was reworked in 2025).
   */
  readonly expiration: string;
  readonly value: unknown;
  /**
   * Where the value came from, as the registering message said (this project's own member, e.g.
   * `image_tag`, `initdata_digest`); trustee's RVPS ignores it when reading the record.
   */
  readonly provenance?: Readonly<Record<string, string>>;
}

/** Provenance members kept at most, and the length of each key and value. */
export const MAX_PROVENANCE_MEMBERS = 16;
export const MAX_PROVENANCE_LENGTH = 256;

/** A provenance object as given, checked: at most 16 members, strings of at most 256 characters. */
export function provenanceOf(v: unknown): Readonly<Record<string, string>> | undefined {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return undefined;
  const entries = Object.entries(v);
  if (entries.length === 0 || entries.length > MAX_PROVENANCE_MEMBERS) return undefined;
  const out: Record<string, string> = {};
  for (const [k, x] of entries) {
    if (k.length === 0 || k.length > 64 || !/^[A-Za-z0-9_.-]+$/.test(k)) return undefined;
    if (typeof x !== 'string' || x.length > MAX_PROVENANCE_LENGTH) return undefined;
    out[k] = x;
  }
  return out;
}

/** Whether the record's expiration has passed at `now`. */
export function isExpired(rv: Pick<ReferenceValue, 'expiration'>, now: Date): boolean {
  const t = Date.parse(rv.expiration);
  return !Number.isNaN(t) && now.getTime() > t;
}

/**
 * `now + months`, whole seconds, UTC. Like chrono's `checked_add_months`, a day
 * that does not exist in the target month becomes that month's last day
 * (29 Feb + 12 months = 28 Feb).
 */
export function addMonthsUtc(now: Date, months: number): Date {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth() + months;
  const targetYear = y + Math.floor(m / 12);
  const targetMonth = ((m % 12) + 12) % 12;
  const lastDay = new Date(Date.UTC(targetYear, targetMonth + 1, 0)).getUTCDate();
  const day = Math.min(now.getUTCDate(), lastDay);
  return new Date(
    Date.UTC(targetYear, targetMonth, day, now.getUTCHours(), now.getUTCMinutes(), now.getUTCSeconds()),
  );
}

/** `%Y-%m-%dT%H:%M:%SZ`. */
export function formatExpiration(d: Date): string {
  return `${d.toISOString().slice(0, 19)}Z`;
}

const EXPIRATION_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;

export function newReferenceValue(
  name: string,
  value: unknown,
  now: Date,
  provenance?: Readonly<Record<string, string>>,
): ReferenceValue {
  return {
    version: REFERENCE_VALUE_VERSION,
    name,
    expiration: formatExpiration(addMonthsUtc(now, MONTHS_BEFORE_EXPIRATION)),
    value,
    ...(provenance !== undefined && { provenance }),
  };
}

export function encodeReferenceValue(rv: ReferenceValue): Uint8Array {
  // Member order as serde writes the struct; the provenance (ours) after trustee's members.
  return Buffer.from(
    JSON.stringify({
      version: rv.version,
      name: rv.name,
      expiration: rv.expiration,
      value: rv.value,
      ...(rv.provenance !== undefined && { provenance: rv.provenance }),
    }),
    'utf8',
  );
}

/**
 * Reads a stored record back. Besides trustee's record, the hand-written forms that trustee-operator
 * mounts as the RVPS's LocalJson file are read: `{"expiration": …, "value": …}` under the value's name
 * (the name may be left out), `expired` for `expiration`, and the older list entries
 * `{"name", "expired", "hash-value": [{"alg", "value"}]}`, whose value is the list of digests. Anything
 * else is a corrupt record.
 */
export function decodeReferenceValue(key: string, bytes: Uint8Array): ReferenceValue {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (e) {
    throw new RvpsError('RECORD_CORRUPT', `stored reference value ${JSON.stringify(key)} is not JSON`, {
      cause: e,
    });
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new RvpsError('RECORD_CORRUPT', `stored reference value ${JSON.stringify(key)} is not an object`);
  }
  const r = parsed as Record<string, unknown>;
  const version = r.version === undefined ? REFERENCE_VALUE_VERSION : r.version;
  const name = r.name === undefined ? key : r.name;
  const expiration = r.expiration === undefined ? r.expired : r.expiration;
  if (typeof version !== 'string' || typeof name !== 'string' || typeof expiration !== 'string') {
    throw new RvpsError(
      'RECORD_CORRUPT',
      `stored reference value ${JSON.stringify(key)} lacks version, name or expiration`,
    );
  }
  if (!EXPIRATION_RE.test(expiration) || Number.isNaN(Date.parse(expiration))) {
    throw new RvpsError(
      'RECORD_CORRUPT',
      `stored reference value ${JSON.stringify(key)} has a malformed expiration`,
    );
  }
  const provenance = provenanceOf(r.provenance);
  if (Object.hasOwn(r, 'value')) {
    return { version, name, expiration, value: r.value, ...(provenance !== undefined && { provenance }) };
  }
  if (Object.hasOwn(r, 'hash-value')) {
    return { version, name, expiration, value: digestsOf(key, r['hash-value']) };
  }
  throw new RvpsError('RECORD_CORRUPT', `stored reference value ${JSON.stringify(key)} has no value`);
}

/** `[{"alg": "sha256", "value": "…"}]` → the digests, as the older RVPS answered a query. */
function digestsOf(key: string, list: unknown): string[] {
  if (!Array.isArray(list)) {
    throw new RvpsError(
      'RECORD_CORRUPT',
      `stored reference value ${JSON.stringify(key)}: hash-value is not a list`,
    );
  }
  return list.map((pair) => {
    const v = pair !== null && typeof pair === 'object' ? (pair as Record<string, unknown>).value : undefined;
    if (typeof v !== 'string') {
      throw new RvpsError(
        'RECORD_CORRUPT',
        `stored reference value ${JSON.stringify(key)}: hash-value entries must be {"alg", "value"} strings`,
      );
    }
    return v;
  });
}
