// ECDSA signatures between JOSE's fixed-size r||s (IEEE P1363) and the DER SEQUENCE OpenSSL uses natively.
// node:crypto accepts `{ key, dsaEncoding: 'ieee-p1363' }`, but an options object goes through a slow
// path (a thrown-and-caught KeyObject type test) that costs more per call than converting here, so the
// hot paths hand OpenSSL a bare KeyObject and a DER signature.

function derInteger(bytes: Uint8Array): Buffer {
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0) start++;
  const body = bytes.subarray(start);
  // A set high bit would read as negative: prefix a zero byte.
  const pad = ((body[0] as number) & 0x80) !== 0 ? 1 : 0;
  const out = Buffer.alloc(2 + pad + body.length);
  out[0] = 0x02;
  out[1] = pad + body.length;
  out.set(body, 2 + pad);
  return out;
}

/** DER `SEQUENCE { INTEGER r, INTEGER s }` of a P1363 signature (even length, at most P-521's 132 bytes). */
export function p1363ToDer(sig: Uint8Array): Buffer {
  if (sig.length === 0 || sig.length % 2 !== 0 || sig.length > 132) {
    throw new RangeError(`ECDSA signature of ${sig.length} bytes is not r||s`);
  }
  const half = sig.length / 2;
  const r = derInteger(sig.subarray(0, half));
  const s = derInteger(sig.subarray(half));
  const len = r.length + s.length;
  // Long-form length once the content passes 127 bytes (P-521).
  const head = len < 0x80 ? Buffer.from([0x30, len]) : Buffer.from([0x30, 0x81, len]);
  return Buffer.concat([head, r, s]);
}

/** P1363 r||s, each left-padded to `size` bytes, of a DER signature OpenSSL produced. */
export function derToP1363(der: Uint8Array, size: number): Buffer {
  let i = 0;
  const byte = () => {
    if (i >= der.length) throw new RangeError('truncated DER ECDSA signature');
    return der[i++] as number;
  };
  if (byte() !== 0x30) throw new RangeError('DER ECDSA signature is not a SEQUENCE');
  let len = byte();
  if (len === 0x81) len = byte();
  else if (len > 0x7f) throw new RangeError('DER ECDSA signature length is not supported');
  if (i + len !== der.length) throw new RangeError('DER ECDSA signature length does not match');
  const out = Buffer.alloc(2 * size);
  for (let part = 0; part < 2; part++) {
    if (byte() !== 0x02) throw new RangeError('DER ECDSA signature component is not an INTEGER');
    const n = byte();
    if (i + n > der.length) throw new RangeError('truncated DER ECDSA signature');
    let v = der.subarray(i, i + n);
    i += n;
    while (v.length > 0 && v[0] === 0) v = v.subarray(1);
    if (v.length > size) throw new RangeError('DER ECDSA signature component is too large');
    out.set(v, part * size + (size - v.length));
  }
  if (i !== der.length) throw new RangeError('trailing bytes after DER ECDSA signature');
  return out;
}
