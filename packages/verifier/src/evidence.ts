// Readers for untrusted evidence JSON. Like serde, unknown members are ignored;
// the members a verifier reads are type-checked and size-limited.
import { decodeBase64StdStrict } from '@broker/protocol';
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
