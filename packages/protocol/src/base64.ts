/**
 * Strict base64 decoders. Node's Buffer.from(..., 'base64') silently skips
 * garbage; upstream (Rust `base64` crate) rejects it, so we do too, including
 * non-canonical trailing bits.
 */

const B64URL_RE = /^[A-Za-z0-9_-]*$/;
const B64STD_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** base64url without padding → bytes, or `null` when not canonical base64url. */
export function decodeBase64UrlStrict(s: string): Buffer | null {
  if (!B64URL_RE.test(s) || s.length % 4 === 1) return null;
  const out = Buffer.from(s, 'base64url');
  // Rejects non-zero trailing bits, which the regex alone lets through.
  if (out.toString('base64url') !== s) return null;
  return out;
}

/** Standard base64 with padding → bytes, or `null` when not canonical. */
export function decodeBase64StdStrict(s: string): Buffer | null {
  if (!B64STD_RE.test(s)) return null;
  const out = Buffer.from(s, 'base64');
  if (out.toString('base64') !== s) return null;
  return out;
}

export function encodeBase64Url(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64url');
}
