// Intel's TDX collateral, supplied offline: the TCB info of a platform family (PCS
// `/tdx/certification/v4/tcb?fmspc=…`, `{"tcbInfo":{…},"signature":hex}`) and the TD quoting
// enclave's identity (`/tdx/certification/v4/qe/identity`, `{"enclaveIdentity":{…},…}`). Each is
// signed (ECDSA P-256 r‖s over the exact text of the inner object) by the Intel SGX TCB Signing
// certificate, which chains to the SGX root. Documents are parsed once and cached by text.
import { X509Certificate } from 'node:crypto';
import { VerificationError } from '../errors.js';
import { pemCertificates } from '../snp/certs.js';
import { certificateFields } from '../x509/der.js';
import { type Crl, parseCrl } from './crl.js';
import { builtinIntelCerts, type SgxRoot, verifyChain, verifyP256 } from './trust.js';

/** PCS documents are a few KiB; leave room for many TCB levels. */
export const MAX_COLLATERAL_BYTES = 256 * 1024;
const MAX_TCB_LEVELS = 256;
const MAX_ADVISORIES = 256;

export type TcbStatus =
  | 'UpToDate'
  | 'SWHardeningNeeded'
  | 'ConfigurationNeeded'
  | 'ConfigurationAndSWHardeningNeeded'
  | 'OutOfDate'
  | 'OutOfDateConfigurationNeeded'
  | 'Revoked';
const TCB_STATUSES: readonly TcbStatus[] = [
  'UpToDate',
  'SWHardeningNeeded',
  'ConfigurationNeeded',
  'ConfigurationAndSWHardeningNeeded',
  'OutOfDate',
  'OutOfDateConfigurationNeeded',
  'Revoked',
];

export interface TdxTcbLevel {
  readonly sgxComponents: readonly number[];
  readonly pceSvn: number;
  readonly tdxComponents: readonly number[];
  readonly tcbDate: string;
  readonly tcbStatus: TcbStatus;
  readonly advisoryIds: readonly string[];
}

export interface IsvTcbLevel {
  readonly isvSvn: number;
  readonly tcbDate: string;
  readonly tcbStatus: TcbStatus;
  readonly advisoryIds: readonly string[];
}

export interface TdxModuleIdentity {
  readonly id: string;
  readonly mrSigner: Buffer;
  readonly attributes: Buffer;
  readonly attributesMask: Buffer;
  readonly tcbLevels: readonly IsvTcbLevel[];
}

export interface TdxTcbInfo {
  readonly id: string;
  readonly version: number;
  readonly issueDate: Date;
  readonly nextUpdate: Date;
  /** Upper-case hex, as PCS writes it. */
  readonly fmspc: Buffer;
  readonly pceId: Buffer;
  readonly tcbType: number;
  readonly tcbEvaluationDataNumber: number;
  readonly tdxModule: {
    readonly mrSigner: Buffer;
    readonly attributes: Buffer;
    readonly attributesMask: Buffer;
  };
  readonly tdxModuleIdentities: readonly TdxModuleIdentity[];
  readonly tcbLevels: readonly TdxTcbLevel[];
}

export interface QeIdentity {
  readonly id: string;
  readonly version: number;
  readonly issueDate: Date;
  readonly nextUpdate: Date;
  readonly tcbEvaluationDataNumber: number;
  readonly miscSelect: Buffer;
  readonly miscSelectMask: Buffer;
  readonly attributes: Buffer;
  readonly attributesMask: Buffer;
  readonly mrSigner: Buffer;
  readonly isvProdId: number;
  readonly tcbLevels: readonly IsvTcbLevel[];
}

/** A signed collateral document: the inner object's exact text and its signature. */
export interface SignedDocument<T> {
  readonly body: T;
  readonly signedText: Buffer;
  readonly signature: Buffer;
}

function bad(what: string, msg: string): VerificationError {
  return new VerificationError('COLLATERAL_INVALID', `${what} ${msg}`);
}

/**
 * The exact text of top-level member `key` of a JSON object (already known to be valid JSON),
 * found by walking its tokens: the signature covers those bytes, not a re-serialization.
 */
export function memberText(text: string, key: string): string | undefined {
  let i = 0;
  const ws = () => {
    while (i < text.length && ' \t\r\n'.includes(text[i]!)) i++;
  };
  const skipString = () => {
    i++; // opening quote
    while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    i++;
  };
  const skipValue = () => {
    ws();
    const ch = text[i];
    if (ch === '"') return skipString();
    if (ch === '{' || ch === '[') {
      let depth = 0;
      while (i < text.length) {
        const c = text[i]!;
        if (c === '"') {
          skipString();
          continue;
        }
        if (c === '{' || c === '[') depth++;
        else if (c === '}' || c === ']') depth--;
        i++;
        if (depth === 0) return;
      }
      return;
    }
    while (i < text.length && !',}]'.includes(text[i]!) && !' \t\r\n'.includes(text[i]!)) i++;
  };
  ws();
  if (text[i] !== '{') return undefined;
  i++;
  let found: string | undefined;
  let seen = 0;
  for (;;) {
    ws();
    if (text[i] === '}' && seen === 0) return undefined;
    if (text[i] !== '"') return undefined;
    const keyStart = i;
    skipString();
    const name = JSON.parse(text.slice(keyStart, i)) as string;
    ws();
    i++; // colon
    ws();
    const valueStart = i;
    skipValue();
    seen++;
    if (name === key) {
      // A repeated member would let the signed text and the parsed value differ.
      if (found !== undefined) return undefined;
      found = text.slice(valueStart, i);
    }
    ws();
    if (text[i] === '}') return found;
    if (text[i] !== ',') return undefined;
    i++;
  }
}

type Obj = Record<string, unknown>;

function obj(v: unknown, what: string): Obj {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw bad(what, 'is not a JSON object');
  return v as Obj;
}
function str(o: Obj, k: string, what: string, max = 256): string {
  const v = Object.hasOwn(o, k) ? o[k] : undefined;
  if (typeof v !== 'string' || v.length > max) throw bad(what, `member ${k} is not a string`);
  return v;
}
function int(o: Obj, k: string, what: string, max: number): number {
  const v = Object.hasOwn(o, k) ? o[k] : undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > max) {
    throw bad(what, `member ${k} is not an integer from 0 to ${max}`);
  }
  return v;
}
function hexField(o: Obj, k: string, what: string, bytes: number): Buffer {
  const v = str(o, k, what, 2 * bytes);
  if (v.length !== 2 * bytes || !/^[0-9a-fA-F]*$/.test(v))
    throw bad(what, `member ${k} is not ${bytes} bytes of hex`);
  return Buffer.from(v, 'hex');
}
function date(o: Obj, k: string, what: string): Date {
  const v = str(o, k, what, 64);
  const d = new Date(v);
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z$/.test(v) || Number.isNaN(d.getTime())) {
    throw bad(what, `member ${k} is not a UTC date-time`);
  }
  return d;
}
function arr(o: Obj, k: string, what: string, max: number): unknown[] {
  const v = Object.hasOwn(o, k) ? o[k] : undefined;
  if (!Array.isArray(v) || v.length > max)
    throw bad(what, `member ${k} is not an array of at most ${max} items`);
  return v;
}
function status(o: Obj, what: string): TcbStatus {
  const v = str(o, 'tcbStatus', what, 64);
  const s = TCB_STATUSES.find((x) => x === v);
  if (s === undefined) throw bad(what, `has unknown tcbStatus ${JSON.stringify(v)}`);
  return s;
}
function advisories(o: Obj, what: string): string[] {
  if (!Object.hasOwn(o, 'advisoryIDs')) return [];
  return arr(o, 'advisoryIDs', what, MAX_ADVISORIES).map((a) => {
    if (typeof a !== 'string' || a.length > 64) throw bad(what, 'advisoryIDs holds a non-string');
    return a;
  });
}
function components(o: Obj, k: string, what: string): number[] {
  const list = arr(o, k, what, 16);
  if (list.length !== 16) throw bad(what, `member ${k} does not have 16 components`);
  return list.map((c, i) => int(obj(c, `${what} ${k}[${i}]`), 'svn', `${what} ${k}[${i}]`, 255));
}
function isvLevels(o: Obj, what: string): IsvTcbLevel[] {
  return arr(o, 'tcbLevels', what, MAX_TCB_LEVELS).map((l, i) => {
    const level = obj(l, `${what} tcbLevels[${i}]`);
    const tcb = obj(level.tcb, `${what} tcbLevels[${i}].tcb`);
    return {
      isvSvn: int(tcb, 'isvsvn', what, 0xffff),
      tcbDate: date(level, 'tcbDate', what).toISOString(),
      tcbStatus: status(level, what),
      advisoryIds: advisories(level, what),
    };
  });
}

function signedDocument(
  input: string | Uint8Array,
  key: string,
  what: string,
): { inner: Obj; signedText: Buffer; signature: Buffer } {
  const text = typeof input === 'string' ? input : Buffer.from(input).toString('utf8');
  if (text.length > MAX_COLLATERAL_BYTES) {
    throw new VerificationError('EVIDENCE_TOO_LARGE', `${what} is larger than ${MAX_COLLATERAL_BYTES} bytes`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw bad(what, 'is not JSON');
  }
  const outer = obj(doc, what);
  const sigHex = str(outer, 'signature', what, 256);
  if (!/^[0-9a-fA-F]{128}$/.test(sigHex)) throw bad(what, 'signature is not 64 bytes of hex');
  const inner = memberText(text, key);
  if (inner === undefined) throw bad(what, `has no single ${key} member`);
  // The body read is the text signed, never another parse of the document.
  return {
    inner: obj(JSON.parse(inner), `${what} ${key}`),
    signedText: Buffer.from(inner, 'utf8'),
    signature: Buffer.from(sigHex, 'hex'),
  };
}

export function parseTdxTcbInfo(input: string | Uint8Array): SignedDocument<TdxTcbInfo> {
  const what = 'TCB info';
  const { inner: t, signedText, signature } = signedDocument(input, 'tcbInfo', what);
  const module = obj(t.tdxModule, `${what} tdxModule`);
  const body: TdxTcbInfo = {
    id: str(t, 'id', what),
    version: int(t, 'version', what, 1000),
    issueDate: date(t, 'issueDate', what),
    nextUpdate: date(t, 'nextUpdate', what),
    fmspc: hexField(t, 'fmspc', what, 6),
    pceId: hexField(t, 'pceId', what, 2),
    tcbType: int(t, 'tcbType', what, 0xffff),
    tcbEvaluationDataNumber: int(t, 'tcbEvaluationDataNumber', what, 0xffffffff),
    tdxModule: {
      mrSigner: hexField(module, 'mrsigner', what, 48),
      attributes: hexField(module, 'attributes', what, 8),
      attributesMask: hexField(module, 'attributesMask', what, 8),
    },
    tdxModuleIdentities: (Object.hasOwn(t, 'tdxModuleIdentities')
      ? arr(t, 'tdxModuleIdentities', what, 64)
      : []
    ).map((m, i) => {
      const mi = obj(m, `${what} tdxModuleIdentities[${i}]`);
      return {
        id: str(mi, 'id', what, 64),
        mrSigner: hexField(mi, 'mrsigner', what, 48),
        attributes: hexField(mi, 'attributes', what, 8),
        attributesMask: hexField(mi, 'attributesMask', what, 8),
        tcbLevels: isvLevels(mi, `${what} tdxModuleIdentities[${i}]`),
      };
    }),
    tcbLevels: arr(t, 'tcbLevels', what, MAX_TCB_LEVELS).map((l, i) => {
      const level = obj(l, `${what} tcbLevels[${i}]`);
      const tcb = obj(level.tcb, `${what} tcbLevels[${i}].tcb`);
      return {
        sgxComponents: components(tcb, 'sgxtcbcomponents', what),
        pceSvn: int(tcb, 'pcesvn', what, 0xffff),
        tdxComponents: components(tcb, 'tdxtcbcomponents', what),
        tcbDate: date(level, 'tcbDate', what).toISOString(),
        tcbStatus: status(level, what),
        advisoryIds: advisories(level, what),
      };
    }),
  };
  if (body.id !== 'TDX' || body.version !== 3) {
    throw bad(what, `is ${body.id} version ${body.version}, not TDX version 3`);
  }
  return { body, signedText, signature };
}

export function parseQeIdentity(input: string | Uint8Array): SignedDocument<QeIdentity> {
  const what = 'QE identity';
  const { inner: q, signedText, signature } = signedDocument(input, 'enclaveIdentity', what);
  const body: QeIdentity = {
    id: str(q, 'id', what),
    version: int(q, 'version', what, 1000),
    issueDate: date(q, 'issueDate', what),
    nextUpdate: date(q, 'nextUpdate', what),
    tcbEvaluationDataNumber: int(q, 'tcbEvaluationDataNumber', what, 0xffffffff),
    miscSelect: hexField(q, 'miscselect', what, 4),
    miscSelectMask: hexField(q, 'miscselectMask', what, 4),
    attributes: hexField(q, 'attributes', what, 16),
    attributesMask: hexField(q, 'attributesMask', what, 16),
    mrSigner: hexField(q, 'mrsigner', what, 32),
    isvProdId: int(q, 'isvprodid', what, 0xffff),
    tcbLevels: isvLevels(q, what),
  };
  if (body.id !== 'TD_QE' || body.version !== 2) {
    throw bad(what, `is ${body.id} version ${body.version}, not TD_QE version 2`);
  }
  return { body, signedText, signature };
}

/** Collateral as the operator configures it (`[attestation_service.verifier_config.tdx]`). */
export interface TdxCollateralConfig {
  /** TCB info documents, one per platform family (FMSPC); the quote's FMSPC picks one. */
  readonly tcbInfos: readonly (string | Uint8Array)[];
  /** The TD QE identity document. */
  readonly qeIdentity: string | Uint8Array;
  /**
   * PEM certificates that may sign collateral (the PCS `…-Issuer-Chain` headers), besides
   * Intel's built-in TCB Signing certificate. Each must chain to a trusted SGX root.
   */
  readonly signingCerts?: readonly string[];
  /** The CRL of the PCK CA that issued the platform's PCK (DER, PEM or hex); no PCK revocation check without it. */
  readonly pckCrl?: string | Uint8Array;
  /** The root CA's CRL (DER, PEM or hex), revoking PCK CAs and TCB signing certificates. */
  readonly rootCaCrl?: string | Uint8Array;
}

export interface ParsedCollateral {
  readonly tcbInfos: readonly SignedDocument<TdxTcbInfo>[];
  readonly qeIdentity: SignedDocument<QeIdentity>;
  readonly signers: readonly X509Certificate[];
  readonly pckCrl?: Crl;
  readonly rootCaCrl?: Crl;
}

const cache = new WeakMap<TdxCollateralConfig, ParsedCollateral>();

export function parseCollateral(config: TdxCollateralConfig): ParsedCollateral {
  const hit = cache.get(config);
  if (hit !== undefined) return hit;
  if (config.tcbInfos.length > 64) throw bad('collateral', 'lists more than 64 TCB info documents');
  const signers: X509Certificate[] = [builtinIntelCerts().tcbSigning];
  for (const pem of config.signingCerts ?? []) {
    for (const der of pemCertificates(pem, 8)) {
      try {
        certificateFields(der);
        signers.push(new X509Certificate(der));
      } catch (e) {
        throw new VerificationError('CERT_MALFORMED', 'collateral signing certificate is not a certificate', {
          cause: e,
        });
      }
    }
  }
  const parsed: ParsedCollateral = {
    tcbInfos: config.tcbInfos.map(parseTdxTcbInfo),
    qeIdentity: parseQeIdentity(config.qeIdentity),
    signers,
    ...(config.pckCrl !== undefined ? { pckCrl: parseCrl(config.pckCrl) } : {}),
    ...(config.rootCaCrl !== undefined ? { rootCaCrl: parseCrl(config.rootCaCrl) } : {}),
  };
  cache.set(config, parsed);
  return parsed;
}

/**
 * Checks a document's signature by one of the signing certificates, of which the one used must
 * chain to a trusted root and be valid at `now`. Returns that certificate.
 */
export function verifyCollateralSignature(
  doc: SignedDocument<unknown>,
  signers: readonly X509Certificate[],
  roots: readonly SgxRoot[],
  now: Date,
  what: string,
): X509Certificate {
  for (const signer of signers) {
    if (signer.ca) continue; // a self-signed root in a pasted issuer chain is no signer
    if (!verifyP256(signer.publicKey, doc.signedText, doc.signature)) continue;
    verifyChain(signer, undefined, roots, now, `${what} signing certificate`);
    return signer;
  }
  throw new VerificationError(
    'COLLATERAL_INVALID',
    `${what} is not signed by a trusted TCB signing certificate`,
  );
}
