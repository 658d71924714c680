/**
 * The Linux configfs-tsm report ABI (Documentation/ABI/testing/configfs-tsm),
 * shared by the TDX and SEV-SNP attesters: a report is requested by creating
 * a folder under the report root, writing the report data to `inblob` and
 * reading the signed report from `outblob`. `provider` names the TSM driver,
 * and `generation` counts the writes to the folder's inputs, so a reader can
 * tell that nobody else wrote the folder between its write and its read.
 *
 * Kernel attributes exist as soon as the folder is made. The mock TEE serves
 * the same layout as a plain folder tree filled by a watcher, so reads here
 * wait (bounded) for an attribute that is not there yet and clean a plain
 * folder up recursively; against the kernel neither path is taken.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AttesterError, type TsmReportErrorCode } from './attester.js';

/** Where the kernel mounts the report ABI. */
export const DEFAULT_TSM_REPORT_ROOT = '/sys/kernel/config/tsm/report';
/** Environment variable overriding the report root (the mock TEE serves one in a temporary folder). */
export const BROKER_TSM_REPORT_ROOT = 'BROKER_TSM_REPORT_ROOT';
/** Provider names the kernel's TSM drivers report (without the trailing newline). */
export const TSM_PROVIDERS = Object.freeze(['tdx_guest', 'sev_guest', 'arm_cca_guest'] as const);
export type TsmProvider = (typeof TSM_PROVIDERS)[number];

/** The kernel caps `inblob` at 64 bytes (TSM_INBLOB_MAX). */
export const TSM_INBLOB_MAX = 64;
/** Far above any TDX quote or SNP report with its certificate table; refuses runaway outputs. */
export const DEFAULT_TSM_OUTBLOB_MAX = 1024 * 1024;
/** How long a read waits for an attribute that does not exist yet (only a plain folder tree lacks them). */
export const DEFAULT_TSM_ATTRIBUTE_WAIT_MS = 5000;
const POLL_MS = 5;
const SMALL_ATTRIBUTE_MAX = 4096;

export type { TsmReportErrorCode } from './attester.js';

/** A configfs-tsm operation failed; `code` says which step. */
export class TsmReportError extends AttesterError {
  override readonly name: string = 'TsmReportError';
  override readonly code: TsmReportErrorCode;
  constructor(code: TsmReportErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
  }
}

export interface TsmReportOptions {
  /** The report root; default `/sys/kernel/config/tsm/report`. */
  readonly root?: string;
  /** Upper bound on `outblob` and `auxblob`; default 1 MiB. */
  readonly maxOutblobBytes?: number;
  /** Bound on waiting for an attribute to appear; default 5000 ms. */
  readonly attributeWaitMs?: number;
}

export interface TsmReportRequest extends TsmReportOptions {
  /** The provider the caller needs; the request fails on any other. */
  readonly provider: TsmProvider;
  /** Report data, 1 to 64 bytes. */
  readonly inblob: Uint8Array;
  /** SEV-SNP only: the VMPL to request the report at, written to `privlevel` before `inblob`. */
  readonly privlevel?: number;
  /** Also read `auxblob` (SEV-SNP's certificate table). */
  readonly auxblob?: boolean;
}

export interface TsmReport {
  readonly provider: TsmProvider;
  readonly outblob: Uint8Array;
  /** Present when requested and the provider produced one (an empty `auxblob` reads as undefined). */
  readonly auxblob?: Uint8Array;
  readonly generation: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function isErrno(err: unknown, code: string): boolean {
  return typeof err === 'object' && err !== null && (err as NodeJS.ErrnoException).code === code;
}

async function readAttribute(dir: string, name: string, limit: number, waitMs: number): Promise<Uint8Array> {
  const path = join(dir, name);
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      const data = await readFile(path);
      if (data.length > limit) {
        throw new TsmReportError(
          name === 'outblob' || name === 'auxblob' ? 'outblob-too-large' : 'attribute-access',
          `TSM report attribute ${name} has ${data.length} bytes, more than ${limit}`,
        );
      }
      return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    } catch (err) {
      if (err instanceof TsmReportError) throw err;
      if (isErrno(err, 'ENOENT') && Date.now() < deadline) {
        await sleep(POLL_MS);
        continue;
      }
      throw new TsmReportError('attribute-access', `Failed to access TSM report attribute ${name}`, {
        cause: err,
      });
    }
  }
}

function parseProvider(raw: Uint8Array): TsmProvider {
  const text = Buffer.from(raw).toString('utf8');
  // The kernel prints the name with a newline; upstream's parser requires exactly that form.
  const name = text.endsWith('\n') ? text.slice(0, -1) : undefined;
  const known = TSM_PROVIDERS.find((p) => p === name);
  if (known === undefined) {
    throw new TsmReportError('unknown-provider', `Unknown TSM report provider ${JSON.stringify(text)}`);
  }
  return known;
}

function parseGeneration(raw: Uint8Array): number {
  const text = Buffer.from(raw).toString('utf8').replace(/\n+$/, '');
  if (!/^[0-9]{1,10}$/.test(text) || Number(text) > 0xffffffff) {
    throw new TsmReportError(
      'generation-parse',
      `Failed to parse TSM report attribute generation: ${JSON.stringify(text)}`,
    );
  }
  return Number(text);
}

/**
 * One report folder: made on creation, removed by `close()`. Like upstream,
 * each folder serves one request.
 */
export class TsmReportDir {
  readonly path: string;
  readonly #limit: number;
  readonly #waitMs: number;
  /** Writes this client made to the folder's inputs; the kernel's generation must not exceed it. */
  #writes = 0;

  private constructor(path: string, limit: number, waitMs: number) {
    this.path = path;
    this.#limit = limit;
    this.#waitMs = waitMs;
  }

  /** Makes a fresh folder under the report root. */
  static async create(options: TsmReportOptions = {}): Promise<TsmReportDir> {
    const root = options.root ?? DEFAULT_TSM_REPORT_ROOT;
    try {
      if (!(await stat(root)).isDirectory())
        throw new AttesterError(`${root} is not a folder`, { code: 'no-tsm-reports' });
    } catch (err) {
      throw new TsmReportError('no-tsm-reports', `Failed to access TSM report path ${root}`, { cause: err });
    }
    const path = join(root, `.tmp${randomBytes(6).toString('hex')}`);
    try {
      await mkdir(path);
    } catch (err) {
      throw new TsmReportError('create-failed', `Failed to create TSM report folder in ${root}`, {
        cause: err,
      });
    }
    return new TsmReportDir(
      path,
      options.maxOutblobBytes ?? DEFAULT_TSM_OUTBLOB_MAX,
      options.attributeWaitMs ?? DEFAULT_TSM_ATTRIBUTE_WAIT_MS,
    );
  }

  async provider(): Promise<TsmProvider> {
    return parseProvider(await readAttribute(this.path, 'provider', SMALL_ATTRIBUTE_MAX, this.#waitMs));
  }

  async generation(): Promise<number> {
    return parseGeneration(await readAttribute(this.path, 'generation', SMALL_ATTRIBUTE_MAX, this.#waitMs));
  }

  /** Fails unless the folder's provider is `wanted`. */
  async expectProvider(wanted: TsmProvider): Promise<void> {
    const actual = await this.provider();
    if (actual !== wanted) {
      throw new TsmReportError(
        'wrong-provider',
        `Failed to open TSM report path: missing provider ${wanted} (provider=${actual})`,
      );
    }
  }

  async writePrivlevel(level: number): Promise<void> {
    if (!Number.isInteger(level) || level < 0 || level > 3) {
      throw new TsmReportError('attribute-access', `privlevel must be 0-3, got ${level}`);
    }
    await this.#write('privlevel', Buffer.from(`${level}\n`));
  }

  async writeInblob(data: Uint8Array): Promise<void> {
    if (data.length === 0)
      throw new TsmReportError('inblob-length', 'Failed to generate TSM report: empty inblob');
    if (data.length > TSM_INBLOB_MAX) {
      throw new TsmReportError(
        'inblob-length',
        `Failed to generate TSM report: inblob of ${data.length} bytes exceeds ${TSM_INBLOB_MAX}`,
      );
    }
    await this.#write('inblob', data);
  }

  /**
   * Reads `outblob` (the kernel generates the report on this read), then
   * checks `generation`: a count above this client's own writes means
   * another writer touched the folder, so the report may carry someone
   * else's data. With `inblob` alone that is upstream's "greater than 1".
   */
  async readOutblob(): Promise<Uint8Array> {
    const out = await readAttribute(this.path, 'outblob', this.#limit, this.#waitMs);
    await this.#checkGeneration();
    return out;
  }

  async readAuxblob(): Promise<Uint8Array> {
    const aux = await readAttribute(this.path, 'auxblob', this.#limit, this.#waitMs);
    await this.#checkGeneration();
    return aux;
  }

  /** Removes the folder; configfs drops the attributes with it, a plain folder needs them removed. */
  async close(): Promise<void> {
    try {
      await rmdir(this.path);
    } catch (err) {
      if (isErrno(err, 'ENOENT')) return;
      if (isErrno(err, 'ENOTEMPTY') || isErrno(err, 'EEXIST')) {
        await rm(this.path, { recursive: true, force: true });
        return;
      }
      throw err;
    }
  }

  async #checkGeneration(): Promise<void> {
    const generation = await this.generation();
    const expected = Math.max(1, this.#writes);
    if (generation > expected) {
      throw new TsmReportError(
        'inblob-conflict',
        `Failed to generate TSM report: inblob write conflict (generation=${generation}, expected ${expected})`,
      );
    }
  }

  async #write(name: string, data: Uint8Array): Promise<void> {
    // Counted before the write: a failed write may still have reached the kernel.
    this.#writes += 1;
    try {
      await writeFile(join(this.path, name), data);
    } catch (err) {
      throw new TsmReportError('attribute-access', `Failed to access TSM report attribute ${name}`, {
        cause: err,
      });
    }
  }
}

/**
 * One report request, start to end: folder, provider check, optional
 * privlevel, inblob, outblob (+ auxblob), generation check, removal.
 */
export async function requestTsmReport(request: TsmReportRequest): Promise<TsmReport> {
  const dir = await TsmReportDir.create(request);
  try {
    await dir.expectProvider(request.provider);
    if (request.privlevel !== undefined) await dir.writePrivlevel(request.privlevel);
    await dir.writeInblob(request.inblob);
    const outblob = await dir.readOutblob();
    let auxblob: Uint8Array | undefined;
    if (request.auxblob === true) {
      try {
        const aux = await dir.readAuxblob();
        if (aux.length > 0) auxblob = aux;
      } catch (err) {
        // A provider without certificates has no auxblob attribute content; a conflict still fails.
        if (err instanceof TsmReportError && err.code !== 'attribute-access') throw err;
      }
    }
    const generation = await dir.generation();
    return auxblob === undefined
      ? { provider: request.provider, outblob, generation }
      : { provider: request.provider, outblob, auxblob, generation };
  } finally {
    await dir.close().catch(() => undefined);
  }
}

/**
 * The provider behind the report root, or undefined when there is no usable
 * root (detection: upstream makes a folder, reads `provider` and removes it).
 */
export async function probeTsmProvider(options: TsmReportOptions = {}): Promise<TsmProvider | undefined> {
  let dir: TsmReportDir;
  try {
    dir = await TsmReportDir.create(options);
  } catch {
    return undefined;
  }
  try {
    return await dir.provider();
  } catch {
    return undefined;
  } finally {
    await dir.close().catch(() => undefined);
  }
}
