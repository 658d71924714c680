// Readers for untrusted evidence JSON. Like serde, unknown members are ignored;
// the members a verifier reads are type-checked and size-limited.
import { decodeBase64StdStrict, decodeBase64UrlStrict } from '@broker/protocol';
import { quote, VerificationError } from './errors.js';

export type EvidenceObject = Readonly<Record<string, unknown>>;

export function evidenceObject(evidence: unknown, what: string): EvidenceObject {
  if (evidence === null || typeof evidence !== 'object' || Array.isArray(evidence)) {
    throw new VerificationError('EVIDENCE_MALFORMED', `${what} evidence must be a JSON object`);
  }
  return evidence as EvidenceObject;
}

function own(obj: EvidenceObject, key: string): unknown {
  return Object.hasOwn(obj, key) ? obj[key] : undefined;
}

/** A string member; `fallback` applies when the member is absent (serde `default`). */
export function stringMember(obj: EvidenceObject, key: string, maxLength: number, fallback?: string): string {
  const v = own(obj, key);
  if (v === undefined && fallback !== undefined) return fallback;
  if (typeof v !== 'string') {
    throw new VerificationError(
      'EVIDENCE_MALFORMED',
      v === undefined
        ? `evidence member ${quote(key)} is missing`
        : `evidence member ${quote(key)} must be a string`,
    );
  }
  if (v.length > maxLength) {
    throw new VerificationError(
      'EVIDENCE_TOO_LARGE',
      `evidence member ${quote(key)} is longer than ${maxLength} characters`,
    );
  }
  return v;
}

/** Standard base64 with padding, canonical, as the Rust `base64` crate's STANDARD engine accepts. */
export function base64StdMember(key: string, value: string): Buffer {
  const bytes = decodeBase64StdStrict(value);
  if (bytes === null) {
    throw new VerificationError('EVIDENCE_MALFORMED', `evidence member ${quote(key)} is not standard base64`);
  }
  return bytes;
}

/** A member that must be present; `undefined` when absent. */
export function member(obj: EvidenceObject, key: string): unknown {
  return own(obj, key);
}

/** A JSON object member. */
export function objectMember(obj: EvidenceObject, key: string): EvidenceObject {
  const v = own(obj, key);
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    throw new VerificationError(
      'EVIDENCE_MALFORMED',
      v === undefined
        ? `evidence member ${quote(key)} is missing`
        : `evidence member ${quote(key)} must be an object`,
    );
  }
  return v as EvidenceObject;
}

/** A JSON array member of at most `maxItems` items. */
export function arrayMember(obj: EvidenceObject, key: string, maxItems: number): readonly unknown[] {
  const v = own(obj, key);
  if (!Array.isArray(v)) {
    throw new VerificationError(
      'EVIDENCE_MALFORMED',
      v === undefined
        ? `evidence member ${quote(key)} is missing`
        : `evidence member ${quote(key)} must be an array`,
    );
  }
  if (v.length > maxItems) {
    throw new VerificationError(
      'EVIDENCE_TOO_LARGE',
      `evidence member ${quote(key)} has more than ${maxItems} items`,
    );
  }
  return v;
}

/** An unsigned integer member no larger than `max` (at most 2^53 - 1: JSON numbers beyond it are not exact). */
export function uintMember(obj: EvidenceObject, key: string, max: number): number {
  const v = own(obj, key);
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0 || v > max) {
    throw new VerificationError(
      'EVIDENCE_MALFORMED',
      v === undefined
        ? `evidence member ${quote(key)} is missing`
        : `evidence member ${quote(key)} must be an integer from 0 to ${max}`,
    );
  }
  return v;
}

const HEX_RE = /^(?:[0-9a-fA-F]{2})*$/;

/** Hex of either case with an even number of digits, as the Rust `hex` crate decodes. */
export function hexMember(key: string, value: string): Buffer {
  if (!HEX_RE.test(value)) {
    throw new VerificationError('EVIDENCE_MALFORMED', `evidence member ${quote(key)} is not hex`);
  }
  return Buffer.from(value, 'hex');
}

/**
 * URL-safe base64 with or without padding, canonical: serde_with's `Base64<UrlSafe>`
 * writes padding and reads either form.
 */
export function base64UrlMember(key: string, value: string): Buffer {
  const pads = value.endsWith('==') ? 2 : value.endsWith('=') ? 1 : 0;
  const body = value.slice(0, value.length - pads);
  // Padding, when present, must complete the last quantum exactly.
  const padOk = pads === 0 || (value.length % 4 === 0 && body.length % 4 === 4 - pads);
  const bytes = padOk ? decodeBase64UrlStrict(body) : null;
  if (bytes === null) {
    throw new VerificationError('EVIDENCE_MALFORMED', `evidence member ${quote(key)} is not URL-safe base64`);
  }
  return bytes;
}

/**
 * A byte string that serde wrote as a JSON array of numbers (`Vec<u8>`, `[u8; N]`).
 * `length` demands an exact size; otherwise at most `maxLength` bytes.
 */
export function byteArray(
  value: unknown,
  what: string,
  size: { readonly length: number } | { readonly maxLength: number },
): Buffer {
  if (!Array.isArray(value)) {
    throw new VerificationError(
      'EVIDENCE_MALFORMED',
      value === undefined
        ? `evidence member ${quote(what)} is missing`
        : `evidence member ${quote(what)} must be an array`,
    );
  }
  const max = 'length' in size ? size.length : size.maxLength;
  if (value.length > max && !('length' in size)) {
    throw new VerificationError(
      'EVIDENCE_TOO_LARGE',
      `evidence member ${quote(what)} has more than ${max} bytes`,
    );
  }
  if ('length' in size && value.length !== size.length) {
    throw new VerificationError(
      'EVIDENCE_MALFORMED',
      `evidence member ${quote(what)} must have ${size.length} bytes`,
    );
  }
  const out = Buffer.alloc(value.length);
  for (let i = 0; i < value.length; i++) {
    const b: unknown = value[i];
    if (typeof b !== 'number' || !Number.isInteger(b) || b < 0 || b > 255) {
      throw new VerificationError(
        'EVIDENCE_MALFORMED',
        `evidence member ${quote(what)} must be an array of bytes`,
      );
    }
    out[i] = b;
  }
  return out;
}

export function byteArrayMember(
  obj: EvidenceObject,
  key: string,
  size: { readonly length: number } | { readonly maxLength: number },
): Buffer {
  return byteArray(own(obj, key), key, size);
}
