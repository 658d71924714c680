/**
 * The attestation agent event log (AAEL): each runtime event is the text
 * `"<domain> <operation> <content>"`, wrapped in a TCG2 `EV_EVENT_TAG` entry
 * (tag id "AAEL"), appended to `/run/attestation-agent/eventlog`, and its
 * digest extended into a measurement register, so a verifier can replay the
 * log against the register.
 *
 * Appending and extending cannot be one atomic step, so a write-ahead record
 * (`.wal_event_entry`: u64 BE log offset, u32 BE PCR, the register value
 * expected after the extend, the event text) is written first and removed
 * last, as upstream does. At start-up a leftover record is finished: the
 * register is extended if it has not been yet, and the entry rewritten at its
 * offset.
 *
 * Two deliberate differences: the entry names the register actually extended
 * (upstream always writes `init_pcr`'s, so an event for another PCR could not
 * be replayed), and the record carries the PCR (upstream's has none and
 * checks `init_pcr` on recovery).
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { type FileHandle, mkdir, open, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Attester } from '@broker/attester';
import type { Tee } from '@broker/protocol';
import { AttestationAgentError, type AttestationAgentErrorCode } from './errors.js';

export const DEFAULT_EVENTLOG_DIR = '/run/attestation-agent';
export const EVENTLOG_FILE = 'eventlog';
export const WAL_FILE = '.wal_event_entry';
/** Write-ahead record header: u64 BE offset, u32 BE PCR. */
export const WAL_HEADER_BYTES = 12;

/** TCG2 event type `EV_EVENT_TAG`. */
export const EV_EVENT_TAG = 0x6;
/** Tagged-event id of AAEL entries: ASCII "AAEL" read as a little-endian u32's big-endian value. */
export const AAEL_TAGGED_EVENT_ID = 0x4141454c;
/** Bound on one event's text; CDH's image-pull events are a few hundred bytes. */
export const MAX_AAEL_EVENT_BYTES = 64 * 1024;

export type EventlogHash = 'sha256' | 'sha384' | 'sha512' | 'sm3';

/** TCG algorithm ids (TPM2_ALG_*). */
const TCG_ALGORITHM_IDS: Readonly<Record<EventlogHash, number>> = {
  sha256: 0x000b,
  sha384: 0x000c,
  sha512: 0x000d,
  sm3: 0x0012,
};

const DIGEST_LENGTHS: Readonly<Record<EventlogHash, number>> = {
  sha256: 32,
  sha384: 48,
  sm3: 32,
  sha512: 64,
};

export class EventlogError extends AttestationAgentError {
  override readonly code: AttestationAgentErrorCode = 'EVENTLOG_FAILED';
  override readonly name: string = 'EventlogError';
}

/** An event the log refuses (newline in the content, oversize). */
export class InvalidAaelEvent extends EventlogError {
  override readonly code: AttestationAgentErrorCode = 'INVALID_AAEL_EVENT';
  override readonly name: string = 'InvalidAaelEvent';
}

export interface AaelEvent {
  readonly domain: string;
  readonly operation: string;
  readonly content: string;
}

/** `"<domain> <operation> <content>"`; the content must be one line, as upstream requires. */
export function aaelEventText(event: AaelEvent): string {
  if (event.content.includes('\n')) throw new InvalidAaelEvent('content contains newline');
  const text = `${event.domain} ${event.operation} ${event.content}`;
  if (Buffer.byteLength(text) > MAX_AAEL_EVENT_BYTES) {
    throw new InvalidAaelEvent(`event is longer than ${MAX_AAEL_EVENT_BYTES} bytes`);
  }
  return text;
}

/**
 * The TCG2 entry for an AAEL event text, little-endian throughout:
 * register, type, digest count (1), algorithm id + digest, event size, then
 * the tagged event (id, size, text). The digest covers the tagged event.
 */
export function tcg2AaelEntry(
  text: string,
  register: number,
  alg: EventlogHash,
): { readonly bytes: Buffer; readonly digest: Buffer } {
  const data = Buffer.from(text, 'utf8');
  const tagged = Buffer.alloc(8 + data.length);
  tagged.writeUInt32LE(AAEL_TAGGED_EVENT_ID, 0);
  tagged.writeUInt32LE(data.length, 4);
  data.copy(tagged, 8);
  const digest = createHash(alg).update(tagged).digest();
  const head = Buffer.alloc(12 + 2);
  head.writeUInt32LE(register, 0);
  head.writeUInt32LE(EV_EVENT_TAG, 4);
  head.writeUInt32LE(1, 8);
  head.writeUInt16LE(TCG_ALGORITHM_IDS[alg], 12);
  const size = Buffer.alloc(4);
  size.writeUInt32LE(tagged.length, 0);
  return { bytes: Buffer.concat([head, digest, size, tagged]), digest };
}

/** How a TEE logs runtime events: the event-log hash and the PCR → CC measurement register mapping. */
export interface RuntimeMeasurementProfile {
  readonly alg: EventlogHash;
  toCcmr(pcr: number): number;
}

/** TDX and CSV map PCRs to CC measurement registers as the UEFI CC event log spec does. */
function ccmrOfPcr(pcr: number): number {
  if (pcr === 1 || pcr === 7) return 1;
  if (pcr >= 2 && pcr <= 6) return 2;
  if (pcr >= 8 && pcr <= 15) return 3;
  return 4;
}

const PROFILES: Readonly<Partial<Record<Tee, RuntimeMeasurementProfile>>> = {
  tdx: { alg: 'sha384', toCcmr: ccmrOfPcr },
  csv: { alg: 'sm3', toCcmr: (pcr) => (pcr === 0 ? 0 : ccmrOfPcr(pcr)) },
  'az-snp-vtpm': { alg: 'sha256', toCcmr: (pcr) => pcr },
  'az-tdx-vtpm': { alg: 'sha256', toCcmr: (pcr) => pcr },
  // Upstream's TPM attester extends but leaves these undefined (it would panic); the SHA-256 bank is what it extends.
  tpm: { alg: 'sha256', toCcmr: (pcr) => pcr },
};

/** The profile of TEEs whose attesters can extend registers; undefined for the rest. */
export function runtimeMeasurementProfile(tee: Tee): RuntimeMeasurementProfile | undefined {
  return PROFILES[tee];
}

/** An attester that can extend (and ideally read) its measurement registers. */
export interface MeasuringAttester extends Attester {
  extendRuntimeMeasurement(eventDigest: Uint8Array, registerIndex: number): Promise<void>;
  /** Current value of the register behind PCR `registerIndex`; needed to write the write-ahead record. */
  getRuntimeMeasurement?(registerIndex: number): Promise<Uint8Array>;
}

export function canMeasure(attester: Attester): attester is MeasuringAttester {
  return typeof attester.extendRuntimeMeasurement === 'function';
}

export interface EventlogLogger {
  warn(msg: string): void;
}

export interface EventLogOptions {
  readonly attester: MeasuringAttester;
  readonly profile: RuntimeMeasurementProfile;
  /** Default `/run/attestation-agent`. */
  readonly dir?: string;
  readonly logger?: EventlogLogger;
}

interface WalRecord {
  readonly offset: number;
  readonly pcr: number;
  readonly expected: Buffer;
  readonly text: string;
}

function hashOf(alg: EventlogHash, ...parts: Uint8Array[]): Buffer {
  const h = createHash(alg);
  for (const p of parts) h.update(p);
  return h.digest();
}

async function readRuntimeMeasurement(attester: MeasuringAttester, pcr: number): Promise<Buffer> {
  if (attester.getRuntimeMeasurement === undefined) {
    throw new EventlogError('The Attester does not support getting runtime measurement');
  }
  return Buffer.from(await attester.getRuntimeMeasurement(pcr));
}

export class EventLog {
  readonly #file: FileHandle;
  readonly #walPath: string;
  readonly #attester: MeasuringAttester;
  readonly #profile: RuntimeMeasurementProfile;
  #pos: number;
  /** Extends run one at a time: each needs the register value the previous one left. */
  #queue: Promise<void> = Promise.resolve();

  private constructor(file: FileHandle, pos: number, walPath: string, options: EventLogOptions) {
    this.#file = file;
    this.#pos = pos;
    this.#walPath = walPath;
    this.#attester = options.attester;
    this.#profile = options.profile;
  }

  /** Opens (creating) the log, finishing any event a crash left half-written. */
  static async open(options: EventLogOptions): Promise<EventLog> {
    const dir = options.dir ?? DEFAULT_EVENTLOG_DIR;
    await mkdir(dir, { recursive: true });
    const walPath = join(dir, WAL_FILE);
    // Not O_APPEND: recovery rewrites an entry at its recorded offset.
    const file = await open(join(dir, EVENTLOG_FILE), constants.O_WRONLY | constants.O_CREAT, 0o644);
    try {
      const log = new EventLog(file, (await file.stat()).size, walPath, options);
      await log.#recover(options.logger);
      return log;
    } catch (err) {
      await file.close();
      throw err;
    }
  }

  /** Logs `event` and extends PCR `pcr` (mapped by the attester) with its digest. */
  extend(event: AaelEvent, pcr: number): Promise<void> {
    let text: string;
    try {
      text = aaelEventText(event);
    } catch (err) {
      return Promise.reject(err);
    }
    const run = this.#queue.then(() => this.#extend(text, pcr));
    this.#queue = run.catch(() => {});
    return run;
  }

  async close(): Promise<void> {
    await this.#queue;
    await this.#file.close();
  }

  async #extend(text: string, pcr: number): Promise<void> {
    const { alg } = this.#profile;
    const { bytes, digest } = tcg2AaelEntry(text, this.#profile.toCcmr(pcr), alg);
    const current = await readRuntimeMeasurement(this.#attester, pcr);
    const offset = this.#pos;
    await this.#writeWal({ offset, pcr, expected: hashOf(alg, current, digest), text });
    await this.#attester.extendRuntimeMeasurement(digest, pcr);
    await this.#writeAt(bytes, offset);
    await rm(this.#walPath);
  }

  async #writeAt(bytes: Buffer, offset: number): Promise<void> {
    let done = 0;
    while (done < bytes.length) {
      const { bytesWritten } = await this.#file.write(bytes, done, bytes.length - done, offset + done);
      done += bytesWritten;
    }
    await this.#file.datasync();
    this.#pos = Math.max(this.#pos, offset + bytes.length);
  }

  async #writeWal(record: WalRecord): Promise<void> {
    const head = Buffer.alloc(WAL_HEADER_BYTES);
    head.writeBigUInt64BE(BigInt(record.offset), 0);
    head.writeUInt32BE(record.pcr, 8);
    const body = Buffer.concat([head, record.expected, Buffer.from(record.text, 'utf8')]);
    const fh = await open(this.#walPath, 'w', 0o600);
    try {
      await fh.writeFile(body);
      await fh.datasync();
    } finally {
      await fh.close();
    }
  }

  async #readWal(): Promise<WalRecord | undefined> {
    let raw: Buffer;
    try {
      raw = await readFile(this.#walPath);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
    const len = DIGEST_LENGTHS[this.#profile.alg];
    const start = WAL_HEADER_BYTES + len;
    const offset = raw.length >= WAL_HEADER_BYTES ? raw.readBigUInt64BE(0) : -1n;
    if (
      raw.length < start ||
      offset > BigInt(Number.MAX_SAFE_INTEGER) ||
      raw.length > start + MAX_AAEL_EVENT_BYTES
    ) {
      throw new EventlogError(
        `Failed to read wal cache. This is a significant error caused by a previous crash. Please try delete \`${this.#walPath}\` and restart the attestation agent.`,
      );
    }
    return {
      offset: Number(offset),
      pcr: raw.readUInt32BE(8),
      expected: raw.subarray(WAL_HEADER_BYTES, start),
      text: raw.subarray(start).toString('utf8'),
    };
  }

  async #recover(logger: EventlogLogger | undefined): Promise<void> {
    const wal = await this.#readWal();
    if (wal === undefined) return;
    logger?.warn('Recover from a previous crash.');
    const { alg } = this.#profile;
    const { bytes, digest } = tcg2AaelEntry(wal.text, this.#profile.toCcmr(wal.pcr), alg);
    const current = await readRuntimeMeasurement(this.#attester, wal.pcr);
    if (!current.equals(wal.expected)) {
      if (!hashOf(alg, current, digest).equals(wal.expected)) {
        throw new EventlogError(
          `fatal error when recovering. The eventlog file is probably corrupted, or other process has extend the target PCR ${wal.pcr}.`,
        );
      }
      await this.#attester.extendRuntimeMeasurement(digest, wal.pcr);
    }
    await this.#writeAt(bytes, wal.offset);
    await rm(this.#walPath);
  }
}
