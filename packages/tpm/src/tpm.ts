import {
  type AuthSession,
  marshalCommand,
  parseResponse,
  passwordSession,
  type ResponseSession,
} from './command.js';
import {
  type CapabilityData,
  type CreatePrimaryOptions,
  type CreatePrimaryResult,
  MAX_NV_BUFFER_SIZE,
  marshalCreatePrimary,
  marshalEvictControl,
  marshalFlushContext,
  marshalGetCapability,
  marshalNvDefineSpace,
  marshalNvRead,
  marshalNvWrite,
  marshalPcrExtend,
  marshalPcrRead,
  marshalQuote,
  marshalStartup,
  type NvReadPublicResult,
  type PcrReadResult,
  parseCreatePrimaryResponse,
  parseGetCapabilityResponse,
  parseNvReadPublicResponse,
  parseNvReadResponse,
  parsePcrReadResponse,
  parseQuoteResponse,
  parseReadPublicResponse,
  type QuoteResult,
  type ReadPublicResult,
  type SigScheme,
  type TaggedDigest,
} from './commands.js';
import {
  algName,
  hashSize,
  RESPONSE_HANDLES,
  TPM_ALG,
  TPM_CAP,
  TPM_CC,
  TPM_HR,
  TPM_PT,
  TPM_SU,
} from './constants.js';
import { TpmError, TpmParseError, TpmUsageError } from './errors.js';
import type { NvPublic } from './nv.js';
import { ALL_PCRS, type PcrSelection, pcrSelection } from './pcr-selection.js';
import type { TpmtPublic } from './public.js';
import { TPM_RC } from './rc.js';
import { openTpmTransport, type TpmAddress, type TpmTransport, type TransportOptions } from './transport.js';

/** Authorization for one handle: a password (possibly empty). */
export type Auth = Uint8Array | string;

function pw(auth: Auth | undefined): AuthSession {
  return passwordSession(typeof auth === 'string' ? new TextEncoder().encode(auth) : auth);
}

export interface ExecuteOptions {
  readonly handles?: readonly number[];
  /** One password per handle that needs authorization (the first handles). */
  readonly auths?: readonly (Auth | undefined)[];
  readonly parameters?: Uint8Array;
}

export interface ExecuteResult {
  readonly handles: readonly number[];
  readonly parameters: Uint8Array;
  readonly sessions: readonly ResponseSession[];
}

const RESUBMIT: ReadonlySet<number> = new Set([TPM_RC.RETRY, TPM_RC.YIELDED, TPM_RC.TESTING]);
const MAX_SUBMISSIONS = 5;

/** Default chunk for NV reads and writes when the TPM does not say (TPM_PT_NV_BUFFER_MAX). */
const DEFAULT_NV_CHUNK = 512;

/**
 * A TPM reached through a transport, with one typed method per command.
 * Authorization uses password sessions (TPM_RS_PW), which is what the
 * attesters and the mock device need: hierarchies, NV indices and keys
 * with empty or known auth values.
 */
export class Tpm {
  readonly transport: TpmTransport;
  #nvChunk: number | undefined;

  constructor(transport: TpmTransport) {
    this.transport = transport;
  }

  /** Opens `device:/dev/tpmrm0`, `/dev/tpm0` or `swtpm:HOST:PORT`. */
  static open(address: TpmAddress | string, options: TransportOptions = {}): Tpm {
    return new Tpm(openTpmTransport(address, options));
  }

  async close(): Promise<void> {
    await this.transport.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** Sends a command with password sessions for its first `auths.length` handles. */
  async execute(code: number, options: ExecuteOptions = {}): Promise<ExecuteResult> {
    const sessions = (options.auths ?? []).map(pw);
    const command = marshalCommand({
      code,
      handles: options.handles ?? [],
      sessions,
      parameters: options.parameters ?? new Uint8Array(),
    });
    for (let attempt = 1; ; attempt++) {
      const response = await this.transport.send(command);
      try {
        return parseResponse(response, code, {
          responseHandles: RESPONSE_HANDLES.get(code) ?? 0,
          sessionCount: sessions.length,
        });
      } catch (err) {
        // RETRY, YIELDED and TESTING ask for the same command again, as TSS stacks do (a bounded number of times).
        if (!(err instanceof TpmError && RESUBMIT.has(err.code)) || attempt >= MAX_SUBMISSIONS) throw err;
        await new Promise((r) => setTimeout(r, 10 * attempt));
      }
    }
  }

  // ------------------------------------------------------------ start-up

  async startup(startupType: number = TPM_SU.CLEAR): Promise<void> {
    await this.execute(TPM_CC.Startup, { parameters: marshalStartup(startupType) });
  }

  /** Startup(CLEAR), treating "already initialized" (TPM_RC_INITIALIZE) as success. */
  async ensureStarted(): Promise<void> {
    try {
      await this.startup(TPM_SU.CLEAR);
    } catch (err) {
      if (!(err instanceof TpmError && err.code === TPM_RC.INITIALIZE)) throw err;
    }
  }

  async shutdown(shutdownType: number = TPM_SU.CLEAR): Promise<void> {
    await this.execute(TPM_CC.Shutdown, { parameters: marshalStartup(shutdownType) });
  }

  // ------------------------------------------------------------ capabilities

  async getCapability(
    capability: number,
    property: number,
    propertyCount: number,
  ): Promise<{ readonly moreData: boolean; readonly data: CapabilityData }> {
    const { parameters } = await this.execute(TPM_CC.GetCapability, {
      parameters: marshalGetCapability(capability, property, propertyCount),
    });
    const result = parseGetCapabilityResponse(parameters);
    if (result.data.capability !== capability) {
      throw new TpmParseError(
        'TPM2_GetCapability response',
        0,
        `asked for capability ${capability}, got ${result.data.capability}`,
      );
    }
    return result;
  }

  /** TPM properties from `first` on (at most `count`), following moreData. */
  async getProperties(first: number, count: number): Promise<Map<number, number>> {
    const out = new Map<number, number>();
    let next = first;
    while (out.size < count) {
      const { moreData, data } = await this.getCapability(TPM_CAP.TPM_PROPERTIES, next, count - out.size);
      if (data.capability !== TPM_CAP.TPM_PROPERTIES) break;
      for (const p of data.properties) out.set(p.property, p.value);
      const last = data.properties.at(-1);
      if (!moreData || last === undefined || last.property < next) break;
      next = last.property + 1;
    }
    return out;
  }

  /** One fixed property, or undefined when the TPM does not report it. */
  async getProperty(property: number): Promise<number | undefined> {
    const props = await this.getProperties(property, 1);
    return props.get(property);
  }

  /** Handles in use from `first` up to the end of its range (NV indices, persistent objects, ...). */
  async getHandles(first: number): Promise<number[]> {
    const rangeEnd = ((first >>> 24) + 1) * 0x1000000;
    const out: number[] = [];
    let next = first >>> 0;
    for (;;) {
      const { moreData, data } = await this.getCapability(TPM_CAP.HANDLES, next, 254);
      if (data.capability !== TPM_CAP.HANDLES) break;
      const inRange = data.handles.filter((h) => h >= next && h < rangeEnd);
      out.push(...inRange);
      const last = inRange.at(-1);
      if (!moreData || last === undefined || last + 1 >= rangeEnd) break;
      next = last + 1;
    }
    return out;
  }

  /** The PCR banks the TPM has, with their allocated PCRs. */
  async getPcrBanks(): Promise<PcrSelection[]> {
    const { data } = await this.getCapability(TPM_CAP.PCRS, 0, 1);
    return data.capability === TPM_CAP.PCRS ? [...data.pcrs] : [];
  }

  // ------------------------------------------------------------ PCRs

  /** One TPM2_PCR_Read: the TPM returns at most 8 digests and says which. */
  async pcrRead(selection: readonly PcrSelection[]): Promise<PcrReadResult> {
    const { parameters } = await this.execute(TPM_CC.PCR_Read, { parameters: marshalPcrRead(selection) });
    return parsePcrReadResponse(parameters);
  }

  /**
   * Values of `pcrs` in one bank, reading in as many TPM2_PCR_Read calls as
   * needed. Fails when the TPM does not return a requested PCR, or when a
   * PCR changed between calls (the update counter moved), so the values
   * always belong to one moment.
   */
  async readPcrs(
    hashAlg: number = TPM_ALG.SHA256,
    pcrs: readonly number[] = ALL_PCRS,
  ): Promise<Uint8Array[]> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const values = new Map<number, Uint8Array>();
      let counter: number | undefined;
      let changed = false;
      let pending = [...new Set(pcrs)].sort((a, b) => a - b);
      while (pending.length > 0) {
        const result = await this.pcrRead([pcrSelection(hashAlg, pending)]);
        if (counter !== undefined && result.updateCounter !== counter) changed = true;
        counter = result.updateCounter;
        let i = 0;
        for (const sel of result.selection) {
          for (const p of sel.pcrs) {
            const d = result.digests[i++]!;
            if (sel.hashAlg === hashAlg) values.set(p, d);
          }
        }
        const before = pending.length;
        pending = pending.filter((p) => !values.has(p));
        if (pending.length === before) {
          throw new TpmUsageError(`the TPM has no ${algName(hashAlg)} value for PCR ${pending.join(', ')}`);
        }
      }
      if (!changed) return pcrs.map((p) => values.get(p)!);
    }
    throw new TpmUsageError('PCRs kept changing while being read');
  }

  /** Extends `pcr` with one digest per bank given. */
  async pcrExtend(pcr: number, digests: readonly TaggedDigest[], auth?: Auth): Promise<void> {
    if (!Number.isInteger(pcr) || pcr < 0 || pcr > 31) throw new TpmUsageError(`invalid PCR index ${pcr}`);
    await this.execute(TPM_CC.PCR_Extend, {
      handles: [TPM_HR.PCR + pcr],
      auths: [auth],
      parameters: marshalPcrExtend(digests),
    });
  }

  // ------------------------------------------------------------ objects

  async createPrimary(
    hierarchy: number,
    template: TpmtPublic,
    options: CreatePrimaryOptions & { readonly hierarchyAuth?: Auth } = {},
  ): Promise<CreatePrimaryResult & { readonly handle: number }> {
    const { handles, parameters } = await this.execute(TPM_CC.CreatePrimary, {
      handles: [hierarchy],
      auths: [options.hierarchyAuth],
      parameters: marshalCreatePrimary(template, options),
    });
    return { handle: handles[0]!, ...parseCreatePrimaryResponse(parameters) };
  }

  async readPublic(handle: number): Promise<ReadPublicResult> {
    const { parameters } = await this.execute(TPM_CC.ReadPublic, { handles: [handle] });
    return parseReadPublicResponse(parameters);
  }

  /**
   * Makes transient `objectHandle` persistent at `persistentHandle`, or
   * (when `objectHandle` is itself persistent) evicts it.
   */
  async evictControl(
    auth: number,
    objectHandle: number,
    persistentHandle: number,
    authValue?: Auth,
  ): Promise<void> {
    await this.execute(TPM_CC.EvictControl, {
      handles: [auth, objectHandle],
      auths: [authValue],
      parameters: marshalEvictControl(persistentHandle),
    });
  }

  async flushContext(handle: number): Promise<void> {
    await this.execute(TPM_CC.FlushContext, { parameters: marshalFlushContext(handle) });
  }

  /**
   * Signs the selected PCRs with `signHandle`. `scheme` defaults to NULL
   * (the key's own scheme). The parsed attestation is checked to carry
   * `qualifyingData` as its extraData.
   */
  async quote(
    signHandle: number,
    qualifyingData: Uint8Array,
    selection: readonly PcrSelection[],
    options: { readonly scheme?: SigScheme; readonly keyAuth?: Auth } = {},
  ): Promise<QuoteResult> {
    const { parameters } = await this.execute(TPM_CC.Quote, {
      handles: [signHandle],
      auths: [options.keyAuth],
      parameters: marshalQuote(qualifyingData, options.scheme ?? { scheme: TPM_ALG.NULL }, selection),
    });
    const result = parseQuoteResponse(parameters);
    if (Buffer.compare(result.attest.extraData, qualifyingData) !== 0) {
      throw new TpmParseError('TPM2_Quote response', 0, 'the quote does not carry the qualifying data sent');
    }
    return result;
  }

  // ------------------------------------------------------------ NV

  async nvDefineSpace(
    authHandle: number,
    publicInfo: NvPublic,
    options: { readonly indexAuth?: Uint8Array; readonly hierarchyAuth?: Auth } = {},
  ): Promise<void> {
    await this.execute(TPM_CC.NV_DefineSpace, {
      handles: [authHandle],
      auths: [options.hierarchyAuth],
      parameters: marshalNvDefineSpace(options.indexAuth ?? new Uint8Array(), publicInfo),
    });
  }

  async nvUndefineSpace(authHandle: number, nvIndex: number, auth?: Auth): Promise<void> {
    await this.execute(TPM_CC.NV_UndefineSpace, { handles: [authHandle, nvIndex], auths: [auth] });
  }

  async nvReadPublic(nvIndex: number): Promise<NvReadPublicResult> {
    const { parameters } = await this.execute(TPM_CC.NV_ReadPublic, { handles: [nvIndex] });
    const result = parseNvReadPublicResponse(parameters);
    if (result.nvPublic.nvIndex !== nvIndex >>> 0) {
      throw new TpmParseError(
        'TPM2_NV_ReadPublic response',
        0,
        `asked for 0x${nvIndex.toString(16)}, got 0x${result.nvPublic.nvIndex.toString(16)}`,
      );
    }
    return result;
  }

  /** NV_ReadPublic, or undefined when the index does not exist (TPM_RC_HANDLE). */
  async nvReadPublicIfDefined(nvIndex: number): Promise<NvReadPublicResult | undefined> {
    try {
      return await this.nvReadPublic(nvIndex);
    } catch (err) {
      if (err instanceof TpmError && err.code === TPM_RC.HANDLE) return undefined;
      throw err;
    }
  }

  async nvWrite(
    authHandle: number,
    nvIndex: number,
    data: Uint8Array,
    offset = 0,
    auth?: Auth,
  ): Promise<void> {
    await this.execute(TPM_CC.NV_Write, {
      handles: [authHandle, nvIndex],
      auths: [auth],
      parameters: marshalNvWrite(data, offset),
    });
  }

  async nvRead(
    authHandle: number,
    nvIndex: number,
    size: number,
    offset = 0,
    auth?: Auth,
  ): Promise<Uint8Array> {
    const { parameters } = await this.execute(TPM_CC.NV_Read, {
      handles: [authHandle, nvIndex],
      auths: [auth],
      parameters: marshalNvRead(size, offset),
    });
    const data = parseNvReadResponse(parameters);
    if (data.length !== size) {
      throw new TpmParseError('TPM2_NV_Read response', 0, `asked for ${size} bytes, got ${data.length}`);
    }
    return data;
  }

  /** The largest NV read or write the TPM takes in one command. */
  async nvChunkSize(): Promise<number> {
    if (this.#nvChunk === undefined) {
      const max = await this.getProperty(TPM_PT.NV_BUFFER_MAX).catch(() => undefined);
      this.#nvChunk = Math.min(max && max > 0 ? max : DEFAULT_NV_CHUNK, MAX_NV_BUFFER_SIZE);
    }
    return this.#nvChunk;
  }

  /** The whole contents of an NV index, read in chunks the TPM accepts. */
  async nvReadAll(authHandle: number, nvIndex: number, auth?: Auth): Promise<Uint8Array> {
    const { nvPublic } = await this.nvReadPublic(nvIndex);
    const chunk = await this.nvChunkSize();
    const out = new Uint8Array(nvPublic.dataSize);
    for (let off = 0; off < out.length; off += chunk) {
      const n = Math.min(chunk, out.length - off);
      out.set(await this.nvRead(authHandle, nvIndex, n, off, auth), off);
    }
    return out;
  }

  /** Writes `data` at offset 0 in chunks the TPM accepts. */
  async nvWriteAll(authHandle: number, nvIndex: number, data: Uint8Array, auth?: Auth): Promise<void> {
    const chunk = await this.nvChunkSize();
    if (data.length === 0) {
      await this.nvWrite(authHandle, nvIndex, data, 0, auth);
      return;
    }
    for (let off = 0; off < data.length; off += chunk) {
      await this.nvWrite(authHandle, nvIndex, data.subarray(off, off + chunk), off, auth);
    }
  }
}

/** A digest of the size `hashAlg` needs, for PCR extension; throws otherwise. */
export function taggedDigest(hashAlg: number, digest: Uint8Array): TaggedDigest {
  const size = hashSize(hashAlg);
  if (size === undefined || digest.length !== size) {
    throw new TpmUsageError(
      `expected a ${size ?? '?'}-byte ${algName(hashAlg)} digest, got ${digest.length} bytes`,
    );
  }
  return { hashAlg, digest };
}
