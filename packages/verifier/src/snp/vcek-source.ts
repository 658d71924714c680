// Where the `snp` verifier finds the VCEK when the evidence carries no certificate table: an
// offline store laid out as trustee's `OfflineStore`, or AMD's Key Distribution Service (KDS).
// Sources are tried in the configured order; the first certificate found is used and must still
// chain to a trusted ARK, so a source only has to be available, not trusted.
import { constants } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { VerificationError, VerifierError } from '../errors.js';
import { defaultHttpGet, type HttpGet, HttpGetError } from '../http/get.js';
import { MAX_CERT_DER_BYTES } from './certs.js';
import { clearKdsChainCache } from './kds.js';
import { isZero, type SnpGeneration, type SnpReport, type TcbVersion } from './report.js';

/** One entry of `[attestation_service.verifier_config.snp_verifier] vcek_sources`. */
export type VcekSource =
  | { readonly type: 'KDS'; readonly baseUrl?: string }
  | { readonly type: 'OfflineStore'; readonly path?: string };

/** AMD's Key Distribution Service. */
export const KDS_BASE_URL = 'https://kdsintf.amd.com';
/** trustee's default offline store folder; VCEKs sit under its `vcek/` subfolder. */
export const DEFAULT_OFFLINE_STORE_PATH = '/opt/confidential-containers/attestation-service/kds-store';
/** What trustee uses when `vcek_sources` is not configured. */
export const TRUSTEE_DEFAULT_VCEK_SOURCES: readonly VcekSource[] = Object.freeze([{ type: 'KDS' as const }]);
/** KDS requests give up after this long; a stalled KDS must not hold an attestation forever. */
export const DEFAULT_KDS_TIMEOUT_MS = 10_000;
/** Entries of the in-memory KDS cache (trustee's HTTP cache holds 1024 responses too). */
export const KDS_CACHE_ENTRIES = 1024;

/** Settings of the `snp` verifier, from `[attestation_service.verifier_config.snp_verifier]`. */
export interface SnpVerifierOptions {
  /**
   * Where to get the VCEK of evidence without `cert_chain`, tried in order. Unset or empty: such
   * evidence is refused (this package never reaches out to the network unless told to; the KBS
   * applies trustee's default, KDS).
   */
  readonly vcekSources?: readonly VcekSource[];
  /** HTTP client for KDS requests; Node's, with the system trust store, by default. */
  readonly httpGet?: HttpGet;
  /** Timeout of one KDS request; DEFAULT_KDS_TIMEOUT_MS by default. */
  readonly kdsTimeoutMs?: number;
}

/**
 * The chip's hardware ID as KDS and the offline store name it: hex of CHIP_ID, only its first
 * 8 bytes on Turin.
 */
export function hardwareIdHex(report: SnpReport, generation: SnpGeneration): string {
  const id = generation === 'Turin' ? report.chipId.subarray(0, 8) : report.chipId;
  return id.toString('hex');
}

const two = (n: number) => String(n).padStart(2, '0');

/** trustee's file-name prefix for a TCB: `bl03_tee00_snp08_ucode115`, plus `_fmcNN` when set. */
export function tcbFilePrefix(tcb: TcbVersion): string {
  const base = `bl${two(tcb.bootloader)}_tee${two(tcb.tee)}_snp${two(tcb.snp)}_ucode${two(tcb.microcode)}`;
  return tcb.fmc !== undefined ? `${base}_fmc${two(tcb.fmc)}` : base;
}

/**
 * The files the offline store is searched for, in order: the VCEK for the report's TCB
 * (`<path>/vcek/<hwid>/<tcb prefix>_vcek.der`), then the chip's default (`<path>/vcek/<hwid>/vcek.der`).
 */
export function offlineStoreFiles(
  report: SnpReport,
  generation: SnpGeneration,
  path: string = DEFAULT_OFFLINE_STORE_PATH,
): [string, string] {
  const dir = join(path, 'vcek', hardwareIdHex(report, generation));
  return [join(dir, `${tcbFilePrefix(report.reportedTcb)}_vcek.der`), join(dir, 'vcek.der')];
}

/** One VCEK source could not give the VCEK; the next source is tried. */
class SourceFailed extends VerifierError {
  constructor(message: string) {
    super('VCEK_SOURCE_FAILED', message);
  }
}

async function readBounded(file: string): Promise<Buffer> {
  // O_NOFOLLOW is not wanted: stores are often symlink farms. The size check is on the open file.
  const fh = await open(file, constants.O_RDONLY);
  try {
    const info = await fh.stat();
    if (!info.isFile()) throw new SourceFailed(`${file} is not a regular file`);
    if (info.size > MAX_CERT_DER_BYTES) {
      throw new SourceFailed(`${file} is larger than ${MAX_CERT_DER_BYTES} bytes`);
    }
    const buf = Buffer.alloc(info.size);
    const { bytesRead } = await fh.read(buf, 0, info.size, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

/** The VCEK from an offline store, as trustee looks it up. */
export async function readVcekFromOfflineStore(
  report: SnpReport,
  generation: SnpGeneration,
  path?: string,
): Promise<Buffer> {
  const [tcbFile, defaultFile] = offlineStoreFiles(report, generation, path);
  let file = tcbFile;
  try {
    await stat(tcbFile);
  } catch (e) {
    // Only a missing file falls back; a permission problem is a real failure, as upstream says.
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new SourceFailed(`cannot stat ${tcbFile}: ${(e as Error).message}`);
    }
    file = defaultFile;
  }
  try {
    return await readBounded(file);
  } catch (e) {
    if (e instanceof SourceFailed) throw e;
    throw new SourceFailed(
      `cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
    );
  }
}

/** The KDS URL of the report's VCEK: `/vcek/v1/<product>/<hwid>?[fmcSPL=..&]blSPL=..&teeSPL=..&snpSPL=..&ucodeSPL=..`. */
export function kdsVcekUrl(
  report: SnpReport,
  generation: SnpGeneration,
  baseUrl: string = KDS_BASE_URL,
): string {
  if (isZero(report.chipId)) {
    throw new SourceFailed('the report masks its chip ID, so KDS cannot name its VCEK');
  }
  const t = report.reportedTcb;
  let query = `blSPL=${two(t.bootloader)}&teeSPL=${two(t.tee)}&snpSPL=${two(t.snp)}&ucodeSPL=${two(t.microcode)}`;
  if (generation === 'Turin') {
    if (t.fmc === undefined) throw new SourceFailed('a Turin report must carry an FMC SVN');
    query = `fmcSPL=${two(t.fmc)}&${query}`;
  }
  const base = baseUrl.replace(/\/+$/, '');
  return `${base}/vcek/v1/${generation}/${hardwareIdHex(report, generation)}?${query}`;
}

// VCEKs never change for a chip and TCB, so a KDS answer can be kept for the process's life, once a
// report verified with it (rememberKdsVcek): an answer that did not verify is not kept.
const kdsCache = new Map<string, Buffer>();

/** Keeps a KDS VCEK that verified a report, so that the chip's next reports need no request. */
export function rememberKdsVcek(url: string, der: Buffer): void {
  if (kdsCache.has(url)) return;
  if (kdsCache.size >= KDS_CACHE_ENTRIES) kdsCache.delete(kdsCache.keys().next().value!);
  kdsCache.set(url, der);
}

/** Forgets the KDS answers kept in memory: VCEKs, certificate chains and CRLs (tests). */
export function clearKdsCache(): void {
  kdsCache.clear();
  clearKdsChainCache();
}

async function fetchFromKds(url: string, options: SnpVerifierOptions): Promise<Buffer> {
  const cached = kdsCache.get(url);
  if (cached !== undefined) return cached;
  const httpGet = options.httpGet ?? defaultHttpGet();
  let res: Awaited<ReturnType<HttpGet>>;
  try {
    res = await httpGet(url, {
      timeoutMs: options.kdsTimeoutMs ?? DEFAULT_KDS_TIMEOUT_MS,
      maxBytes: MAX_CERT_DER_BYTES,
    });
  } catch (e) {
    if (e instanceof HttpGetError) throw new SourceFailed(e.message);
    throw new SourceFailed(`request to ${url} failed: ${(e as Error).message}`);
  }
  if (res.status !== 200) throw new SourceFailed(`${url} answered HTTP ${res.status}`);
  return res.body;
}

/** A VCEK and where it came from (for logs). */
export interface FetchedVcek {
  readonly der: Buffer;
  readonly source: string;
  /** Set when KDS answered: where its certificate chain and CRL are. */
  readonly kdsBaseUrl?: string;
  /** Set when KDS answered: the VCEK's URL, to rememberKdsVcek once it verified. */
  readonly kdsUrl?: string;
}

function describe(source: VcekSource): string {
  return source.type === 'KDS'
    ? `KDS ${source.baseUrl ?? KDS_BASE_URL}`
    : `offline store ${source.path ?? DEFAULT_OFFLINE_STORE_PATH}`;
}

/**
 * The report's VCEK from the first source that has one. Fails with VCEK_UNAVAILABLE when no source
 * is configured or none answers; the reasons of each source are in the message.
 */
export async function fetchVcek(
  report: SnpReport,
  generation: SnpGeneration,
  options: SnpVerifierOptions,
): Promise<FetchedVcek> {
  const sources = options.vcekSources ?? [];
  if (sources.length === 0) {
    throw new VerificationError(
      'VCEK_UNAVAILABLE',
      'snp evidence has no cert_chain and no VCEK source (offline store or KDS) is configured',
    );
  }
  const reasons: string[] = [];
  for (const source of sources) {
    try {
      if (source.type === 'OfflineStore') {
        const der = await readVcekFromOfflineStore(report, generation, source.path);
        return { der, source: describe(source) };
      }
      const kdsUrl = kdsVcekUrl(report, generation, source.baseUrl);
      const der = await fetchFromKds(kdsUrl, options);
      return { der, source: describe(source), kdsBaseUrl: source.baseUrl ?? KDS_BASE_URL, kdsUrl };
    } catch (e) {
      if (!(e instanceof SourceFailed)) throw e;
      reasons.push(`${describe(source)}: ${e.message}`);
    }
  }
  throw new VerificationError(
    'VCEK_UNAVAILABLE',
    `no configured source has the VCEK (${reasons.join('; ').slice(0, 1000)})`,
  );
}
