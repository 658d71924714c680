/**
 * Parameter areas of the commands this package sends, and of their
 * responses: a marshal function for each request and a parser for each
 * response (and, for the NV commands an interposer serves itself, the
 * reverse direction too). Framing (header, handles, sessions) is in
 * `command.ts`.
 */
import { MAX_ATTEST_SIZE, MAX_DATA_SIZE, MAX_NAME_SIZE, readAttest, type TpmsAttest } from './attest.js';
import { MAX_AUTH_SIZE } from './command.js';
import { algName, hashSize, MAX_DIGEST_SIZE, TPM_ALG, TPM_CAP, TPM_ST } from './constants.js';
import { TpmUsageError } from './errors.js';
import { TpmReader, TpmWriter } from './marshal.js';
import { MAX_NV_PUBLIC_SIZE, type NvPublic, readNvPublic, writeNvPublic } from './nv.js';
import { type PcrSelection, readPcrSelectionList, writePcrSelectionList } from './pcr-selection.js';
import { MAX_PUBLIC_SIZE, readPublic, type TpmtPublic, writePublic } from './public.js';
import { readSignature, type TpmtSignature } from './signature.js';

/** TPM2B_MAX_NV_BUFFER capacity (MAX_NV_BUFFER_SIZE of the reference implementation's largest profile). */
export const MAX_NV_BUFFER_SIZE = 2048;
/** TPM2B_SENSITIVE_DATA capacity. */
export const MAX_SENSITIVE_DATA_SIZE = 256;
/** Most entries accepted in one capability list. */
export const MAX_CAPABILITY_ENTRIES = 1024;

function reader(params: Uint8Array, what: string): TpmReader {
  return new TpmReader(params, what);
}

// ---------------------------------------------------------------- Startup / Shutdown

export function marshalStartup(startupType: number): Uint8Array {
  return new TpmWriter().u16(startupType).finish();
}

// ---------------------------------------------------------------- GetCapability

export function marshalGetCapability(
  capability: number,
  property: number,
  propertyCount: number,
): Uint8Array {
  return new TpmWriter().u32(capability).u32(property).u32(propertyCount).finish();
}

export type CapabilityData =
  | {
      readonly capability: typeof TPM_CAP.ALGS;
      readonly algorithms: readonly { alg: number; attributes: number }[];
    }
  | { readonly capability: typeof TPM_CAP.HANDLES; readonly handles: readonly number[] }
  | { readonly capability: typeof TPM_CAP.COMMANDS; readonly commands: readonly number[] }
  | { readonly capability: typeof TPM_CAP.PCRS; readonly pcrs: readonly PcrSelection[] }
  | {
      readonly capability: typeof TPM_CAP.TPM_PROPERTIES;
      readonly properties: readonly { property: number; value: number }[];
    }
  | { readonly capability: typeof TPM_CAP.ECC_CURVES; readonly curves: readonly number[] };

function listCount(r: TpmReader, what: string): number {
  const count = r.u32(`${what}.count`);
  if (count > MAX_CAPABILITY_ENTRIES) r.fail(`${what}.count ${count} exceeds ${MAX_CAPABILITY_ENTRIES}`);
  return count;
}

export function parseGetCapabilityResponse(params: Uint8Array): {
  readonly moreData: boolean;
  readonly data: CapabilityData;
} {
  const r = reader(params, 'TPM2_GetCapability response');
  const more = r.u8('moreData');
  if (more > 1) r.fail(`moreData is ${more}, not a TPMI_YES_NO`);
  const capability = r.u32('TPMS_CAPABILITY_DATA.capability');
  let data: CapabilityData;
  switch (capability) {
    case TPM_CAP.ALGS: {
      const n = listCount(r, 'TPML_ALG_PROPERTY');
      const algorithms = Array.from({ length: n }, () => ({
        alg: r.u16('alg'),
        attributes: r.u32('algProperties'),
      }));
      data = { capability, algorithms };
      break;
    }
    case TPM_CAP.HANDLES: {
      const n = listCount(r, 'TPML_HANDLE');
      data = { capability, handles: Array.from({ length: n }, () => r.u32('handle')) };
      break;
    }
    case TPM_CAP.COMMANDS: {
      const n = listCount(r, 'TPML_CCA');
      data = { capability, commands: Array.from({ length: n }, () => r.u32('TPMA_CC')) };
      break;
    }
    case TPM_CAP.PCRS:
      data = { capability, pcrs: readPcrSelectionList(r) };
      break;
    case TPM_CAP.TPM_PROPERTIES: {
      const n = listCount(r, 'TPML_TAGGED_TPM_PROPERTY');
      const properties = Array.from({ length: n }, () => ({
        property: r.u32('property'),
        value: r.u32('value'),
      }));
      data = { capability, properties };
      break;
    }
    case TPM_CAP.ECC_CURVES: {
      const n = listCount(r, 'TPML_ECC_CURVE');
      data = { capability, curves: Array.from({ length: n }, () => r.u16('TPM_ECC_CURVE')) };
      break;
    }
    default:
      return r.fail(`capability 0x${capability.toString(16)} is not supported by this parser`);
  }
  r.end();
  return { moreData: more === 1, data };
}

// ---------------------------------------------------------------- PCR_Read / PCR_Extend

export function marshalPcrRead(selection: readonly PcrSelection[]): Uint8Array {
  const w = new TpmWriter();
  writePcrSelectionList(w, selection);
  return w.finish();
}

export interface PcrReadResult {
  readonly updateCounter: number;
  /** The PCRs the TPM actually returned (at most 8 digests per call). */
  readonly selection: readonly PcrSelection[];
  /** Digests in selection order. */
  readonly digests: readonly Uint8Array[];
}

export function parsePcrReadResponse(params: Uint8Array): PcrReadResult {
  const r = reader(params, 'TPM2_PCR_Read response');
  const updateCounter = r.u32('pcrUpdateCounter');
  const selection = readPcrSelectionList(r, 'pcrSelectionOut');
  const count = r.u32('TPML_DIGEST.count');
  if (count > 8) r.fail(`TPML_DIGEST.count ${count} exceeds 8`);
  const digests = Array.from({ length: count }, (_, i) => r.tpm2b(`pcrValues[${i}]`, MAX_DIGEST_SIZE));
  r.end();
  // The digests must line up with the selection the TPM reports, bank by bank.
  const expected = selection.flatMap((s) => s.pcrs.map(() => hashSize(s.hashAlg)!));
  if (expected.length !== digests.length) {
    r.fail(`${digests.length} digest(s) for ${expected.length} selected PCR(s)`);
  }
  digests.forEach((d, i) => {
    if (d.length !== expected[i])
      r.fail(`pcrValues[${i}] is ${d.length} bytes, its bank needs ${expected[i]}`);
  });
  return { updateCounter, selection, digests };
}

export interface TaggedDigest {
  readonly hashAlg: number;
  readonly digest: Uint8Array;
}

export function marshalPcrExtend(digests: readonly TaggedDigest[]): Uint8Array {
  const w = new TpmWriter().u32(digests.length);
  for (const d of digests) {
    const size = hashSize(d.hashAlg);
    if (size === undefined) throw new TpmUsageError(`${algName(d.hashAlg)} is not a hash algorithm`);
    if (d.digest.length !== size) {
      throw new TpmUsageError(`a ${algName(d.hashAlg)} digest is ${size} bytes, got ${d.digest.length}`);
    }
    w.u16(d.hashAlg).bytes(d.digest);
  }
  return w.finish();
}

/** TPML_DIGEST_VALUES of a PCR_Extend command (for interposers). */
export function parsePcrExtendParameters(params: Uint8Array): TaggedDigest[] {
  const r: TpmReader = reader(params, 'TPM2_PCR_Extend parameters');
  const count = r.u32('TPML_DIGEST_VALUES.count');
  if (count > 16) r.fail(`TPML_DIGEST_VALUES.count ${count} exceeds 16`);
  const out: TaggedDigest[] = [];
  for (let i = 0; i < count; i++) {
    const hashAlg = r.u16(`digests[${i}].hashAlg`);
    const size = hashSize(hashAlg);
    if (size === undefined) r.fail(`digests[${i}].hashAlg ${algName(hashAlg)} is not a hash algorithm`);
    out.push({ hashAlg, digest: r.bytes(size, `digests[${i}].digest`) });
  }
  r.end();
  return out;
}

// ---------------------------------------------------------------- CreatePrimary / ReadPublic

export interface CreatePrimaryOptions {
  /** authValue of the new object; empty by default. */
  readonly userAuth?: Uint8Array;
  /** Sensitive data (keyed-hash objects only). */
  readonly data?: Uint8Array;
  readonly outsideInfo?: Uint8Array;
  readonly creationPcr?: readonly PcrSelection[];
}

export function marshalCreatePrimary(template: TpmtPublic, options: CreatePrimaryOptions = {}): Uint8Array {
  const w = new TpmWriter();
  w.sized((s) => {
    s.tpm2b(options.userAuth ?? new Uint8Array(), MAX_AUTH_SIZE, 'userAuth');
    s.tpm2b(options.data ?? new Uint8Array(), MAX_SENSITIVE_DATA_SIZE, 'sensitive data');
  });
  w.sized((p) => writePublic(p, template));
  w.tpm2b(options.outsideInfo ?? new Uint8Array(), MAX_DATA_SIZE, 'outsideInfo');
  writePcrSelectionList(w, options.creationPcr ?? []);
  return w.finish();
}

export interface CreatePrimaryResult {
  readonly public: TpmtPublic;
  /** The marshalled TPMT_PUBLIC as the TPM returned it. */
  readonly publicArea: Uint8Array;
  readonly name: Uint8Array;
}

function readPublicArea(r: TpmReader, what: string): { public: TpmtPublic; publicArea: Uint8Array } {
  const inner = r.sized(what, MAX_PUBLIC_SIZE);
  const publicArea = inner.peekRemaining();
  const pub = readPublic(inner);
  inner.end('TPMT_PUBLIC');
  return { public: pub, publicArea };
}

export function parseCreatePrimaryResponse(params: Uint8Array): CreatePrimaryResult {
  const r = reader(params, 'TPM2_CreatePrimary response');
  const { public: pub, publicArea } = readPublicArea(r, 'outPublic');
  // creationData, creationHash and creationTicket are checked for shape only.
  r.sized('creationData', 4096);
  r.tpm2b('creationHash', MAX_DIGEST_SIZE);
  const ticketTag = r.u16('creationTicket.tag');
  if (ticketTag !== TPM_ST.CREATION)
    r.fail(`creationTicket.tag 0x${ticketTag.toString(16)} is not TPM_ST_CREATION`);
  r.u32('creationTicket.hierarchy');
  r.tpm2b('creationTicket.digest', MAX_DIGEST_SIZE);
  const name = r.tpm2b('name', MAX_NAME_SIZE);
  r.end();
  return { public: pub, publicArea, name };
}

export interface ReadPublicResult extends CreatePrimaryResult {
  readonly qualifiedName: Uint8Array;
}

export function parseReadPublicResponse(params: Uint8Array): ReadPublicResult {
  const r = reader(params, 'TPM2_ReadPublic response');
  const { public: pub, publicArea } = readPublicArea(r, 'outPublic');
  const name = r.tpm2b('name', MAX_NAME_SIZE);
  const qualifiedName = r.tpm2b('qualifiedName', MAX_NAME_SIZE);
  r.end();
  return { public: pub, publicArea, name, qualifiedName };
}

// ---------------------------------------------------------------- EvictControl / FlushContext

export function marshalEvictControl(persistentHandle: number): Uint8Array {
  return new TpmWriter().u32(persistentHandle >>> 0).finish();
}

export function marshalFlushContext(handle: number): Uint8Array {
  return new TpmWriter().u32(handle >>> 0).finish();
}

// ---------------------------------------------------------------- Quote

/** TPMT_SIG_SCHEME: NULL lets the key's own scheme apply. */
export interface SigScheme {
  readonly scheme: number;
  readonly hashAlg?: number;
  /** ECDAA only. */
  readonly count?: number;
}

export function marshalQuote(
  qualifyingData: Uint8Array,
  scheme: SigScheme,
  selection: readonly PcrSelection[],
): Uint8Array {
  const w = new TpmWriter();
  w.tpm2b(qualifyingData, MAX_DATA_SIZE, 'qualifyingData');
  w.u16(scheme.scheme);
  if (scheme.scheme !== TPM_ALG.NULL) {
    if (scheme.hashAlg === undefined)
      throw new TpmUsageError(`scheme ${algName(scheme.scheme)} needs a hash`);
    w.u16(scheme.hashAlg);
    if (scheme.scheme === TPM_ALG.ECDAA) w.u16(scheme.count ?? 0);
  }
  writePcrSelectionList(w, selection);
  return w.finish();
}

export interface QuoteResult {
  /** The marshalled TPMS_ATTEST the signature covers. */
  readonly quoted: Uint8Array;
  readonly attest: TpmsAttest;
  /** The marshalled TPMT_SIGNATURE. */
  readonly signatureBytes: Uint8Array;
  readonly signature: TpmtSignature;
}

export function parseQuoteResponse(params: Uint8Array): QuoteResult {
  const r = reader(params, 'TPM2_Quote response');
  const q = r.sized('quoted', MAX_ATTEST_SIZE);
  const quoted = q.peekRemaining();
  const attest = readAttest(q);
  q.end('TPMS_ATTEST');
  const signatureBytes = r.peekRemaining();
  const signature = readSignature(r);
  r.end('TPMT_SIGNATURE');
  return { quoted, attest, signatureBytes, signature };
}

// ---------------------------------------------------------------- NV

export function marshalNvDefineSpace(auth: Uint8Array, publicInfo: NvPublic): Uint8Array {
  const w = new TpmWriter();
  w.tpm2b(auth, MAX_AUTH_SIZE, 'NV auth');
  w.sized((p) => writeNvPublic(p, publicInfo));
  return w.finish();
}

export function parseNvDefineSpaceParameters(params: Uint8Array): { auth: Uint8Array; publicInfo: NvPublic } {
  const r = reader(params, 'TPM2_NV_DefineSpace parameters');
  const auth = r.tpm2b('auth', MAX_AUTH_SIZE);
  const inner = r.sized('publicInfo', MAX_NV_PUBLIC_SIZE);
  const publicInfo = readNvPublic(inner);
  inner.end('TPMS_NV_PUBLIC');
  r.end();
  return { auth, publicInfo };
}

export function marshalNvWrite(data: Uint8Array, offset: number): Uint8Array {
  const w = new TpmWriter();
  w.tpm2b(data, MAX_NV_BUFFER_SIZE, 'NV data');
  w.u16(offset);
  return w.finish();
}

export function parseNvWriteParameters(params: Uint8Array): { data: Uint8Array; offset: number } {
  const r = reader(params, 'TPM2_NV_Write parameters');
  const data = r.tpm2b('data', MAX_NV_BUFFER_SIZE);
  const offset = r.u16('offset');
  r.end();
  return { data, offset };
}

export function marshalNvRead(size: number, offset: number): Uint8Array {
  return new TpmWriter().u16(size).u16(offset).finish();
}

export function parseNvReadParameters(params: Uint8Array): { size: number; offset: number } {
  const r = reader(params, 'TPM2_NV_Read parameters');
  const size = r.u16('size');
  const offset = r.u16('offset');
  r.end();
  return { size, offset };
}

export function parseNvReadResponse(params: Uint8Array): Uint8Array {
  const r = reader(params, 'TPM2_NV_Read response');
  const data = r.tpm2b('data', MAX_NV_BUFFER_SIZE);
  r.end();
  return data;
}

export function marshalNvReadResponse(data: Uint8Array): Uint8Array {
  return new TpmWriter().tpm2b(data, MAX_NV_BUFFER_SIZE, 'NV data').finish();
}

export interface NvReadPublicResult {
  readonly nvPublic: NvPublic;
  readonly name: Uint8Array;
}

export function parseNvReadPublicResponse(params: Uint8Array): NvReadPublicResult {
  const r = reader(params, 'TPM2_NV_ReadPublic response');
  const inner = r.sized('nvPublic', MAX_NV_PUBLIC_SIZE);
  const nvPublic = readNvPublic(inner);
  inner.end('TPMS_NV_PUBLIC');
  const name = r.tpm2b('nvName', MAX_NAME_SIZE);
  r.end();
  return { nvPublic, name };
}

export function marshalNvReadPublicResponse(nvPublic: NvPublic, name: Uint8Array): Uint8Array {
  const w = new TpmWriter();
  w.sized((p) => writeNvPublic(p, nvPublic));
  w.tpm2b(name, MAX_NAME_SIZE, 'nvName');
  return w.finish();
}
