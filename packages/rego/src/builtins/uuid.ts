// uuid.rfc4122 (random version 4, stable per key within a query) and uuid.parse.
import { randomBytes } from 'node:crypto';
import { normalizeInt, ObjectValue } from '../value.js';
import { argString, type BuiltinTable } from './api.js';

function hex(b: Uint8Array): string {
  return Buffer.from(b).toString('hex');
}

export function newUUIDv4(): string {
  const b = randomBytes(16);
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  return `${hex(b.subarray(0, 4))}-${hex(b.subarray(4, 6))}-${hex(b.subarray(6, 8))}-${hex(b.subarray(8, 10))}-${hex(b.subarray(10))}`;
}

/** google/uuid's Parse: 36 characters, {…}, urn:uuid:…, or 32 hex digits. */
export function parseUUIDBytes(s: string): Uint8Array | undefined {
  let t = s;
  if (t.length === 45) {
    if (t.slice(0, 9).toLowerCase() !== 'urn:uuid:') return undefined;
    t = t.slice(9);
  } else if (t.length === 38) {
    if (t[0] !== '{' || t[37] !== '}') return undefined;
    t = t.slice(1, 37);
  }
  let digits: string;
  if (t.length === 36) {
    if (t[8] !== '-' || t[13] !== '-' || t[18] !== '-' || t[23] !== '-') return undefined;
    digits = t.slice(0, 8) + t.slice(9, 13) + t.slice(14, 18) + t.slice(19, 23) + t.slice(24);
  } else if (t.length === 32) {
    digits = t;
  } else {
    return undefined;
  }
  if (!/^[0-9a-fA-F]{32}$/.test(digits)) return undefined;
  return Uint8Array.from(Buffer.from(digits, 'hex'));
}

function variant(b: number): string {
  if ((b & 0xc0) === 0x80) return 'RFC4122';
  if ((b & 0xe0) === 0xc0) return 'Microsoft';
  if ((b & 0xe0) === 0xe0) return 'Future';
  return 'Reserved';
}

function macVars(b: number): string {
  if ((b & 3) === 3) return 'local:multicast';
  if ((b & 1) === 1) return 'global:multicast';
  if ((b & 2) === 2) return 'local:unicast';
  return 'global:unicast';
}

// 100-nanosecond intervals between 1582-10-15 and 1970-01-01.
const GREGORIAN_OFFSET = 122192928000000000n;

function describe(u: Uint8Array): ObjectValue {
  const o = new ObjectValue();
  const version = u[6]! >> 4;
  o.set('version', version);
  o.set('variant', variant(u[8]!));
  if (version === 1 || version === 2) {
    const dv = new DataView(u.buffer, u.byteOffset, 16);
    const t =
      BigInt(dv.getUint32(0)) | (BigInt(dv.getUint16(4)) << 32n) | (BigInt(dv.getUint16(6) & 0xfff) << 48n);
    const d = t - GREGORIAN_OFFSET;
    // Go divides with truncation toward zero.
    const sec = d / 10000000n;
    const nsec = (d % 10000000n) * 100n;
    o.set('time', normalizeInt(sec * 1_000_000_000n + nsec));
    o.set('nodeid', [...u.subarray(10, 16)].map((b) => b.toString(16).padStart(2, '0')).join('-'));
    o.set('macvariables', macVars(u[10]!));
    o.set('clocksequence', dv.getUint16(8) & 0x3fff);
    if (version === 2) {
      o.set('id', dv.getUint32(0));
      const domain = u[9]!;
      o.set(
        'domain',
        domain === 0 ? 'Person' : domain === 1 ? 'Group' : domain === 2 ? 'Org' : `Domain${domain}`,
      );
    }
  }
  return o;
}

export const uuidBuiltins: BuiltinTable = {
  'uuid.rfc4122': {
    arity: 1,
    nondeterministic: true,
    fn: (args, ctx) => {
      const k = argString('uuid.rfc4122', args, 0);
      // OPA caches the UUID per key for the query, so the same key yields the same UUID.
      const key = `uuid.rfc4122\u0000${k}`;
      const cached = ctx.cache.get(key);
      if (typeof cached === 'string') return cached;
      const u = newUUIDv4();
      ctx.cache.set(key, u);
      return u;
    },
  },
  'uuid.parse': {
    arity: 1,
    fn: (args) => {
      const u = parseUUIDBytes(argString('uuid.parse', args, 0));
      return u === undefined ? undefined : describe(u);
    },
  },
};
