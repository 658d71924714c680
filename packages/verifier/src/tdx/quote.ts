// Intel DCAP ECDSA quotes for TDX: version 4 (TDX 1.0 body) and version 5 (TDX 1.0 or 1.5 body).
//
//   0     header, 48 bytes: version u16, att_key_type u16 (2: ECDSA-256 with P-256), tee_type u32
//         (0x81: TDX), reserved[4], QE vendor id[16], user data[20]
//   48    v4: TD report body (584 bytes)
//         v5: body type u16 (2: TDX 1.0, 3: TDX 1.5), body size u32, body (584 or 648 bytes)
//   ..    signature data length u32, then the signature data:
//           ECDSA signature r‖s (64) over header..body, by the attestation key x‖y (64)
//           certification data: type u16 = 6 (QE report certification data), size u32,
//             QE report (an SGX report body, 384), its ECDSA signature r‖s (64) by the PCK,
//             QE authentication data: size u16 + bytes,
//             certification data: type u16 = 5 (PCK certificate chain, PEM), size u32, bytes
//
// Everything is little-endian. The quote ends with the signature data; Azure's quote service pads
// it with zero bytes, which are accepted (and only zero bytes).
import { VerificationError } from '../errors.js';

export const QUOTE_HEADER_SIZE = 48;
export const TD_REPORT_BODY_SIZE_V10 = 584;
export const TD_REPORT_BODY_SIZE_V15 = 648;
export const SGX_REPORT_BODY_SIZE = 384;
export const ECDSA_SIGNATURE_SIZE = 64;
export const ECDSA_KEY_SIZE = 64;
export const TEE_TYPE_TDX = 0x81;
export const ATT_KEY_TYPE_ECDSA_P256 = 2;
export const CERT_DATA_TYPE_QE_REPORT = 6;
export const CERT_DATA_TYPE_PCK_CHAIN = 5;
export const QUOTE_V5_BODY_TDX10 = 2;
export const QUOTE_V5_BODY_TDX15 = 3;
/** Intel's QE vendor id (939a7233-f79c-4ca9-940a-0db3957f0607). */
export const INTEL_QE_VENDOR_ID = Buffer.from('939a7233f79c4ca9940a0db3957f0607', 'hex');
/** A quote with its PCK chain is about 5 KB; far larger is not a quote. */
export const MAX_QUOTE_BYTES = 64 * 1024;
/** Three PEM certificates take about 3.7 KB. */
export const MAX_PCK_CHAIN_BYTES = 32 * 1024;
export const MAX_QE_AUTH_DATA_BYTES = 4096;

export interface QuoteHeader {
  readonly version: number;
  readonly attKeyType: number;
  readonly teeType: number;
  readonly reserved: Buffer;
  readonly vendorId: Buffer;
  readonly userData: Buffer;
}

/** The TD report body the quote signs (TDX 1.5 adds the last two fields). */
export interface TdReportBody {
  readonly teeTcbSvn: Buffer;
  readonly mrSeam: Buffer;
  readonly mrSignerSeam: Buffer;
  readonly seamAttributes: Buffer;
  readonly tdAttributes: Buffer;
  readonly xfam: Buffer;
  readonly mrTd: Buffer;
  readonly mrConfigId: Buffer;
  readonly mrOwner: Buffer;
  readonly mrOwnerConfig: Buffer;
  readonly rtmrs: readonly [Buffer, Buffer, Buffer, Buffer];
  readonly reportData: Buffer;
  readonly teeTcbSvn2?: Buffer;
  readonly mrServiceTd?: Buffer;
}

/** The Quoting Enclave's SGX report. */
export interface QeReport {
  readonly raw: Buffer;
  readonly cpuSvn: Buffer;
  readonly miscSelect: Buffer;
  readonly attributes: Buffer;
  readonly mrEnclave: Buffer;
  readonly mrSigner: Buffer;
  readonly isvProdId: number;
  readonly isvSvn: number;
  readonly reportData: Buffer;
}

export interface TdxQuote {
  readonly version: 4 | 5;
  readonly header: QuoteHeader;
  /** `tdx10` for v4 and v5 type 2, `tdx15` for v5 type 3. */
  readonly bodyKind: 'tdx10' | 'tdx15';
  /** v5 only: the body type and size fields as sent (claims show them). */
  readonly v5Type?: number;
  readonly v5Size?: Buffer;
  readonly body: TdReportBody;
  /** The bytes the attestation key signed: header through body. */
  readonly signedData: Buffer;
  /** ECDSA r‖s. */
  readonly signature: Buffer;
  /** The attestation key's P-256 point, x‖y. */
  readonly attestationKey: Buffer;
  readonly qeReport: QeReport;
  readonly qeReportSignature: Buffer;
  readonly qeAuthData: Buffer;
  /** The PCK certificate chain, PEM (leaf, PCK CA, root), as the QE wrote it. */
  readonly pckChain: Buffer;
  /** Length of the quote proper, without trailing padding. */
  readonly length: number;
}

function malformed(msg: string): VerificationError {
  return new VerificationError('REPORT_MALFORMED', `TDX quote ${msg}`);
}

/** A bounds-checked little-endian reader over the quote. */
class Reader {
  #pos: number;
  constructor(
    readonly buf: Buffer,
    start: number,
    readonly end: number,
    readonly what: string,
  ) {
    this.#pos = start;
  }
  get pos(): number {
    return this.#pos;
  }
  bytes(n: number, field: string): Buffer {
    if (n < 0 || this.#pos + n > this.end) {
      throw malformed(`is truncated: ${field} needs ${n} bytes at offset ${this.#pos} of the ${this.what}`);
    }
    const out = this.buf.subarray(this.#pos, this.#pos + n);
    this.#pos += n;
    return out;
  }
  u16(field: string): number {
    return this.bytes(2, field).readUInt16LE(0);
  }
  u32(field: string): number {
    return this.bytes(4, field).readUInt32LE(0);
  }
}

export function parseQuoteHeader(b: Buffer): QuoteHeader {
  if (b.length < QUOTE_HEADER_SIZE) throw malformed(`is truncated: ${b.length} bytes, less than its header`);
  return {
    version: b.readUInt16LE(0),
    attKeyType: b.readUInt16LE(2),
    teeType: b.readUInt32LE(4),
    reserved: b.subarray(8, 12),
    vendorId: b.subarray(12, 28),
    userData: b.subarray(28, 48),
  };
}

export function parseTdReportBody(b: Buffer, kind: 'tdx10' | 'tdx15'): TdReportBody {
  const size = kind === 'tdx10' ? TD_REPORT_BODY_SIZE_V10 : TD_REPORT_BODY_SIZE_V15;
  if (b.length !== size) throw malformed(`body is ${b.length} bytes, not ${size}`);
  const f = (o: number, n: number) => b.subarray(o, o + n);
  const base: TdReportBody = {
    teeTcbSvn: f(0, 16),
    mrSeam: f(16, 48),
    mrSignerSeam: f(64, 48),
    seamAttributes: f(112, 8),
    tdAttributes: f(120, 8),
    xfam: f(128, 8),
    mrTd: f(136, 48),
    mrConfigId: f(184, 48),
    mrOwner: f(232, 48),
    mrOwnerConfig: f(280, 48),
    rtmrs: [f(328, 48), f(376, 48), f(424, 48), f(472, 48)],
    reportData: f(520, 64),
  };
  return kind === 'tdx10' ? base : { ...base, teeTcbSvn2: f(584, 16), mrServiceTd: f(600, 48) };
}

export function parseQeReport(raw: Buffer): QeReport {
  if (raw.length !== SGX_REPORT_BODY_SIZE) throw malformed(`QE report is ${raw.length} bytes`);
  return {
    raw,
    cpuSvn: raw.subarray(0, 16),
    miscSelect: raw.subarray(16, 20),
    attributes: raw.subarray(48, 64),
    mrEnclave: raw.subarray(64, 96),
    mrSigner: raw.subarray(128, 160),
    isvProdId: raw.readUInt16LE(256),
    isvSvn: raw.readUInt16LE(258),
    reportData: raw.subarray(320, 384),
  };
}

/**
 * Parses a TDX quote (v4 or v5). Refuses other versions, non-TDX quotes, other attestation key
 * types and certification data other than "QE report" wrapping a PEM PCK chain, which is what
 * every TDX quoting enclave produces.
 */
export function parseTdxQuote(input: Uint8Array): TdxQuote {
  if (input.length > MAX_QUOTE_BYTES) {
    throw new VerificationError('EVIDENCE_TOO_LARGE', `TDX quote is larger than ${MAX_QUOTE_BYTES} bytes`);
  }
  const b = Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  const header = parseQuoteHeader(b);
  if (header.version !== 4 && header.version !== 5) {
    throw new VerificationError(
      'UNSUPPORTED_VERSION',
      `TDX quote version ${header.version} is not supported (4 or 5)`,
    );
  }
  if (header.teeType !== TEE_TYPE_TDX) {
    throw new VerificationError(
      'UNSUPPORTED_VERSION',
      `quote TEE type 0x${header.teeType.toString(16)} is not TDX (0x81)`,
    );
  }
  if (header.attKeyType !== ATT_KEY_TYPE_ECDSA_P256) {
    throw new VerificationError(
      'UNSUPPORTED_ALGORITHM',
      `quote attestation key type ${header.attKeyType} is not ECDSA-256 with P-256 (2)`,
    );
  }
  const r = new Reader(b, QUOTE_HEADER_SIZE, b.length, 'quote');
  let bodyKind: 'tdx10' | 'tdx15' = 'tdx10';
  let v5Type: number | undefined;
  let v5Size: Buffer | undefined;
  if (header.version === 5) {
    v5Type = r.u16('body type');
    v5Size = r.bytes(4, 'body size');
    if (v5Type === QUOTE_V5_BODY_TDX10) bodyKind = 'tdx10';
    else if (v5Type === QUOTE_V5_BODY_TDX15) bodyKind = 'tdx15';
    else throw new VerificationError('UNSUPPORTED_VERSION', `TDX quote v5 body type ${v5Type} is not 2 or 3`);
    const want = bodyKind === 'tdx10' ? TD_REPORT_BODY_SIZE_V10 : TD_REPORT_BODY_SIZE_V15;
    if (v5Size.readUInt32LE(0) !== want) {
      throw malformed(`v5 body size ${v5Size.readUInt32LE(0)} does not fit body type ${v5Type}`);
    }
  }
  const bodySize = bodyKind === 'tdx10' ? TD_REPORT_BODY_SIZE_V10 : TD_REPORT_BODY_SIZE_V15;
  const body = parseTdReportBody(r.bytes(bodySize, 'TD report body'), bodyKind);
  const signedData = b.subarray(0, r.pos);

  const sigLen = r.u32('signature data length');
  const sigStart = r.pos;
  if (sigLen > b.length - sigStart) {
    throw malformed(`is truncated: signature data of ${sigLen} bytes, ${b.length - sigStart} left`);
  }
  const end = sigStart + sigLen;
  // Bytes after the signature data: Azure's padding is zeros; anything else is not part of a quote.
  for (let i = end; i < b.length; i++) {
    if (b[i] !== 0) throw malformed(`has ${b.length - end} bytes after its signature data`);
  }
  const s = new Reader(b, sigStart, end, 'signature data');
  const signature = s.bytes(ECDSA_SIGNATURE_SIZE, 'quote signature');
  const attestationKey = s.bytes(ECDSA_KEY_SIZE, 'attestation key');
  const certType = s.u16('certification data type');
  if (certType !== CERT_DATA_TYPE_QE_REPORT) {
    throw new VerificationError(
      'UNSUPPORTED_VERSION',
      `TDX quote certification data type ${certType} is not 6 (QE report certification data)`,
    );
  }
  const certSize = s.u32('certification data size');
  if (certSize !== end - s.pos) {
    throw malformed(`certification data size ${certSize} differs from the ${end - s.pos} bytes it spans`);
  }
  const qeReport = parseQeReport(s.bytes(SGX_REPORT_BODY_SIZE, 'QE report'));
  const qeReportSignature = s.bytes(ECDSA_SIGNATURE_SIZE, 'QE report signature');
  const authLen = s.u16('QE authentication data size');
  if (authLen > MAX_QE_AUTH_DATA_BYTES) throw malformed(`QE authentication data of ${authLen} bytes`);
  const qeAuthData = s.bytes(authLen, 'QE authentication data');
  const innerType = s.u16('PCK certification data type');
  if (innerType !== CERT_DATA_TYPE_PCK_CHAIN) {
    throw new VerificationError(
      'UNSUPPORTED_VERSION',
      `TDX quote QE certification data type ${innerType} is not 5 (PCK certificate chain)`,
    );
  }
  const chainLen = s.u32('PCK certificate chain size');
  if (chainLen > MAX_PCK_CHAIN_BYTES) {
    throw new VerificationError(
      'EVIDENCE_TOO_LARGE',
      `TDX quote PCK certificate chain is larger than ${MAX_PCK_CHAIN_BYTES} bytes`,
    );
  }
  const pckChain = s.bytes(chainLen, 'PCK certificate chain');
  if (s.pos !== end) throw malformed(`signature data has ${end - s.pos} bytes after the PCK chain`);
  return {
    version: header.version as 4 | 5,
    header,
    bodyKind,
    ...(v5Type !== undefined && v5Size !== undefined ? { v5Type, v5Size } : {}),
    body,
    signedData,
    signature,
    attestationKey,
    qeReport,
    qeReportSignature,
    qeAuthData,
    pckChain,
    length: end,
  };
}

/** The pieces of a quote to encode; signatures are produced by the caller (the mock QE). */
export interface TdxQuoteParts {
  readonly version?: 4 | 5;
  readonly bodyKind?: 'tdx10' | 'tdx15';
  readonly header?: {
    readonly reserved?: Uint8Array;
    readonly vendorId?: Uint8Array;
    readonly userData?: Uint8Array;
  };
  /** The raw TD report body (584 bytes, or 648 for TDX 1.5). */
  readonly body: Uint8Array;
}

/** Header and body bytes: what the attestation key signs. */
export function encodeSignedPart(parts: TdxQuoteParts): Buffer {
  const version = parts.version ?? 4;
  const kind = parts.bodyKind ?? 'tdx10';
  const size = kind === 'tdx10' ? TD_REPORT_BODY_SIZE_V10 : TD_REPORT_BODY_SIZE_V15;
  if (parts.body.length !== size) throw new RangeError(`TD report body must be ${size} bytes`);
  if (version === 4 && kind !== 'tdx10') throw new RangeError('a v4 quote carries a TDX 1.0 body');
  const h = Buffer.alloc(QUOTE_HEADER_SIZE);
  h.writeUInt16LE(version, 0);
  h.writeUInt16LE(ATT_KEY_TYPE_ECDSA_P256, 2);
  h.writeUInt32LE(TEE_TYPE_TDX, 4);
  if (parts.header?.reserved) h.set(parts.header.reserved.subarray(0, 4), 8);
  h.set((parts.header?.vendorId ?? INTEL_QE_VENDOR_ID).subarray(0, 16), 12);
  if (parts.header?.userData) h.set(parts.header.userData.subarray(0, 20), 28);
  if (version === 4) return Buffer.concat([h, parts.body]);
  const desc = Buffer.alloc(6);
  desc.writeUInt16LE(kind === 'tdx10' ? QUOTE_V5_BODY_TDX10 : QUOTE_V5_BODY_TDX15, 0);
  desc.writeUInt32LE(size, 2);
  return Buffer.concat([h, desc, parts.body]);
}

export interface TdxSignatureData {
  readonly signature: Uint8Array;
  readonly attestationKey: Uint8Array;
  readonly qeReport: Uint8Array;
  readonly qeReportSignature: Uint8Array;
  readonly qeAuthData: Uint8Array;
  readonly pckChainPem: Uint8Array;
}

/** Appends the signature data to the signed part, in the v4/v5 layout. */
export function encodeTdxQuote(signedPart: Uint8Array, sig: TdxSignatureData): Buffer {
  const u16 = (v: number) => {
    const x = Buffer.alloc(2);
    x.writeUInt16LE(v);
    return x;
  };
  const u32 = (v: number) => {
    const x = Buffer.alloc(4);
    x.writeUInt32LE(v);
    return x;
  };
  const qeCert = Buffer.concat([
    sig.qeReport,
    sig.qeReportSignature,
    u16(sig.qeAuthData.length),
    sig.qeAuthData,
    u16(CERT_DATA_TYPE_PCK_CHAIN),
    u32(sig.pckChainPem.length),
    sig.pckChainPem,
  ]);
  const sigData = Buffer.concat([
    sig.signature,
    sig.attestationKey,
    u16(CERT_DATA_TYPE_QE_REPORT),
    u32(qeCert.length),
    qeCert,
  ]);
  return Buffer.concat([signedPart, u32(sigData.length), sigData]);
}

/** Field layout of a TD report body, for building one. */
export interface TdReportBodyFields {
  readonly teeTcbSvn?: Uint8Array;
  readonly mrSeam?: Uint8Array;
  readonly mrSignerSeam?: Uint8Array;
  readonly seamAttributes?: Uint8Array;
  readonly tdAttributes?: Uint8Array;
  readonly xfam?: Uint8Array;
  readonly mrTd?: Uint8Array;
  readonly mrConfigId?: Uint8Array;
  readonly mrOwner?: Uint8Array;
  readonly mrOwnerConfig?: Uint8Array;
  readonly rtmrs?: readonly Uint8Array[];
  readonly reportData?: Uint8Array;
  readonly teeTcbSvn2?: Uint8Array;
  readonly mrServiceTd?: Uint8Array;
}

/** Encodes a TD report body; unset fields are zero, short values zero-padded. */
export function encodeTdReportBody(f: TdReportBodyFields, kind: 'tdx10' | 'tdx15' = 'tdx10'): Buffer {
  const b = Buffer.alloc(kind === 'tdx10' ? TD_REPORT_BODY_SIZE_V10 : TD_REPORT_BODY_SIZE_V15);
  const put = (v: Uint8Array | undefined, o: number, n: number, name: string) => {
    if (v === undefined) return;
    if (v.length > n) throw new RangeError(`${name} is longer than ${n} bytes`);
    b.set(v, o);
  };
  put(f.teeTcbSvn, 0, 16, 'teeTcbSvn');
  put(f.mrSeam, 16, 48, 'mrSeam');
  put(f.mrSignerSeam, 64, 48, 'mrSignerSeam');
  put(f.seamAttributes, 112, 8, 'seamAttributes');
  put(f.tdAttributes, 120, 8, 'tdAttributes');
  put(f.xfam, 128, 8, 'xfam');
  put(f.mrTd, 136, 48, 'mrTd');
  put(f.mrConfigId, 184, 48, 'mrConfigId');
  put(f.mrOwner, 232, 48, 'mrOwner');
  put(f.mrOwnerConfig, 280, 48, 'mrOwnerConfig');
  if (f.rtmrs !== undefined) {
    if (f.rtmrs.length > 4) throw new RangeError('a TD has 4 RTMRs');
    f.rtmrs.forEach((r, i) => {
      put(r, 328 + 48 * i, 48, `rtmr${i}`);
    });
  }
  put(f.reportData, 520, 64, 'reportData');
  if (kind === 'tdx15') {
    put(f.teeTcbSvn2, 584, 16, 'teeTcbSvn2');
    put(f.mrServiceTd, 600, 48, 'mrServiceTd');
  }
  return b;
}
