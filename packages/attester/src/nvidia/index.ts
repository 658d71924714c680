// guest-components' `nvidia` attester, an additional device: the evidence of every GPU in
// confidential-computing mode, for a nonce that is the first 32 bytes of the report data
// (zero-padded when shorter), as `{"device_evidence_list":[{"arch","uuid","evidence","certificate"}]}`.
// Upstream links NVML / NVIDIA's attestation SDK (NVAT); without a native addon we run their
// documented tools instead (README "nvidia"):
//
//   detection: `nvidia-smi conf-compute -f` prints `CC status: ON`, and `nvattest version` runs;
//   evidence:  `nvattest collect-evidence --device gpu --nonce <64 hex>` prints
//              `{"evidences":[{"arch","nonce","evidence":<b64>,"certificate":<b64>,…}],"result_code":0,…}`
//              (nvattest 1.0 wants `--format json` for that: added when the answer is not JSON).
//
// `evidence` is sent as hex (what trustee's hopperAttestationReport vector uses and every trustee
// version reads), `certificate` as given (standard base64 of the PEM chain), `uuid` as the tool
// gives it, else "unknown" as upstream's NVAT path. No GPU, no driver or CC off is "absent", not
// an error.
import { decodeBase64StdStrict } from '@broker/protocol';
import {
  type Attester,
  AttesterError,
  type AttesterModule,
  EvidenceCollectionFailed,
  type PlatformContext,
  type PlatformOptions,
} from '../attester.js';
import { NvidiaToolMissing, runTool, type ToolRun } from './tools.js';

export { BROKER_NVATTEST, BROKER_NVIDIA_SMI, NvidiaToolMissing, toolCommand } from './tools.js';

/** The SPDM nonce the GPU signs: the first 32 bytes of the report data. */
export const NVIDIA_NONCE_SIZE = 32;
/** Devices accepted from one collection (a PPCIE system has 8 GPUs). */
export const MAX_NVIDIA_DEVICES = 16;
/** nvattest's JSON for 16 GPUs is about 200 KiB. */
export const MAX_NVATTEST_OUTPUT = 4 * 1024 * 1024;
/** A first collection initializes the SDK and talks to the GSP: allow it time. */
export const DEFAULT_NVATTEST_TIMEOUT_MS = 60_000;
export const DEFAULT_NVIDIA_SMI_TIMEOUT_MS = 15_000;
const MAX_REPORT_BYTES = 256 * 1024;
const MAX_CHAIN_CHARS = 64 * 1024;
const MAX_UUID_CHARS = 128;
/**
 * A report starts with the SPDM GET_MEASUREMENTS request: version 1.x (Hopper sends 1.1, later GPUs
 * may send a later 1.x; the nonce sits at bytes 4..36 in all of them), then the request code.
 */
const SPDM_MAJOR_1 = 0x10;
const SPDM_GET_MEASUREMENTS = 0xe0;

/** nvattest's arch names and the names trustee's verifier reads (serde's upper-case aliases). */
const ARCHITECTURES: ReadonlyMap<string, string> = new Map([
  ['HOPPER', 'HOPPER'],
  ['BLACKWELL', 'BLACKWELL'],
]);

export interface NvidiaDeviceEvidence {
  readonly arch: string;
  readonly uuid: string;
  /** The SPDM GET_MEASUREMENTS request and signed response, hex. */
  readonly evidence: string;
  /** Standard base64 of the PEM certificate chain, attestation certificate first. */
  readonly certificate: string;
}

export interface NvidiaEvidence {
  readonly device_evidence_list: NvidiaDeviceEvidence[];
}

export interface NvidiaAttesterOptions extends PlatformOptions {
  readonly timeoutMs?: number;
}

/** The nonce of the report data: its first 32 bytes, zero-padded when shorter (upstream's resize). */
export function nvidiaNonce(reportData: Uint8Array): Buffer {
  const nonce = Buffer.alloc(NVIDIA_NONCE_SIZE);
  nonce.set(reportData.subarray(0, NVIDIA_NONCE_SIZE));
  return nonce;
}

/** The state `nvidia-smi conf-compute -f` prints (`CC status: ON`), or undefined when it prints none. */
export function parseCcStatus(stdout: string): string | undefined {
  return /^\s*CC status:\s*(\S+)\s*$/m.exec(stdout)?.[1];
}

function bad(message: string): EvidenceCollectionFailed {
  return new EvidenceCollectionFailed(`NVIDIA Attester: ${message}`);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(entry: Record<string, unknown>, name: string, max: number, i: number): string {
  const v = entry[name];
  if (typeof v !== 'string' || v.length === 0 || v.length > max) {
    throw bad(`evidence ${i}: ${name} is not a string of 1 to ${max} characters`);
  }
  return v;
}

function deviceEvidence(entry: unknown, nonce: Buffer, i: number): NvidiaDeviceEvidence {
  if (!isRecord(entry)) throw bad(`evidence ${i} is not an object`);
  const archName = str(entry, 'arch', 16, i);
  const arch = ARCHITECTURES.get(archName.toUpperCase());
  if (arch === undefined) throw bad(`evidence ${i}: arch ${JSON.stringify(archName)} is not a known GPU`);
  // A report for another nonce must not be sent as this one's (a stale or replayed collection).
  if (entry.nonce !== undefined && String(entry.nonce).toLowerCase() !== nonce.toString('hex')) {
    throw bad(`evidence ${i} was collected for another nonce`);
  }
  const report = decodeBase64StdStrict(str(entry, 'evidence', Math.ceil(MAX_REPORT_BYTES / 3) * 4, i));
  if (report === null) throw bad(`evidence ${i}: evidence is not standard base64`);
  if (report.length < 37 || (report[0]! & 0xf0) !== SPDM_MAJOR_1 || report[1] !== SPDM_GET_MEASUREMENTS) {
    throw bad(`evidence ${i}: evidence is not an SPDM 1.x GET_MEASUREMENTS report`);
  }
  if (!Buffer.from(report.subarray(4, 4 + NVIDIA_NONCE_SIZE)).equals(nonce)) {
    throw bad(`evidence ${i}: the report's request carries another nonce`);
  }
  const certificate = str(entry, 'certificate', MAX_CHAIN_CHARS, i);
  const pem = decodeBase64StdStrict(certificate);
  if (pem === null || !Buffer.from(pem).toString('latin1').includes('-----BEGIN CERTIFICATE-----')) {
    throw bad(`evidence ${i}: certificate is not the base64 of a PEM certificate chain`);
  }
  const uuid = entry.uuid === undefined ? 'unknown' : str(entry, 'uuid', MAX_UUID_CHARS, i);
  return { arch, uuid, evidence: Buffer.from(report).toString('hex'), certificate };
}

/**
 * The evidence in `nvattest collect-evidence` output for `nonce`: `result_code` 0, 1 to 16
 * evidences, each a known GPU whose report's request carries the nonce.
 */
export function parseNvattestOutput(stdout: string, nonce: Buffer): NvidiaEvidence {
  let doc: unknown;
  try {
    doc = JSON.parse(stdout);
  } catch {
    throw bad('nvattest collect-evidence did not print JSON');
  }
  if (!isRecord(doc)) throw bad('nvattest collect-evidence did not print a JSON object');
  if (doc.result_code !== 0) {
    const msg = typeof doc.result_message === 'string' ? doc.result_message.slice(0, 256) : 'no message';
    throw bad(`nvattest collect-evidence failed: result_code ${String(doc.result_code)} (${msg})`);
  }
  const list = doc.evidences;
  if (!Array.isArray(list)) throw bad('nvattest collect-evidence printed no evidences array');
  if (list.length === 0) throw bad('nvattest collect-evidence found no GPU');
  if (list.length > MAX_NVIDIA_DEVICES) throw bad(`more than ${MAX_NVIDIA_DEVICES} GPUs`);
  return { device_evidence_list: list.map((e, i) => deviceEvidence(e, nonce, i)) };
}

function failed(tool: string, run: ToolRun): string {
  const how = run.signal !== null ? `was killed by ${run.signal}` : `exited ${run.code}`;
  return run.stderrLine !== '' ? `${tool} ${how}: ${run.stderrLine}` : `${tool} ${how}`;
}

export class NvidiaAttester implements Attester {
  readonly tee = 'nvidia' as const;
  readonly #env: Readonly<Record<string, string | undefined>>;
  readonly #timeoutMs: number;

  constructor(options: NvidiaAttesterOptions = {}) {
    this.#env = options.env ?? process.env;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_NVATTEST_TIMEOUT_MS;
  }

  async getEvidence(reportData: Uint8Array): Promise<NvidiaEvidence> {
    const nonce = nvidiaNonce(reportData);
    const args = ['collect-evidence', '--device', 'gpu', '--nonce', nonce.toString('hex')];
    let run = await this.#nvattest(args);
    // nvattest 1.0 printed text unless told `--format json`; later versions print JSON and have no
    // such option, so it is asked for only when the answer is not JSON.
    if (run.code === 0 && !run.stdout.trimStart().startsWith('{')) {
      run = await this.#nvattest([...args, '--format', 'json']);
    }
    // nvattest prints its JSON (with result_code and result_message) on failures too.
    if (run.code !== 0) {
      try {
        parseNvattestOutput(run.stdout, nonce);
      } catch (err) {
        if (run.stdout.trim() !== '') throw err;
      }
      throw bad(failed('nvattest collect-evidence', run));
    }
    return parseNvattestOutput(run.stdout, nonce);
  }

  async #nvattest(args: readonly string[]): Promise<ToolRun> {
    try {
      return await runTool('nvattest', args, {
        env: this.#env,
        timeoutMs: this.#timeoutMs,
        maxOutputBytes: MAX_NVATTEST_OUTPUT,
      });
    } catch (err) {
      throw bad((err as Error).message);
    }
  }
}

async function detect(ctx: PlatformContext): Promise<{ detected: boolean; reason: string }> {
  const options = { env: ctx.env, timeoutMs: DEFAULT_NVIDIA_SMI_TIMEOUT_MS, maxOutputBytes: 64 * 1024 };
  let cc: ToolRun;
  try {
    cc = await runTool('nvidia-smi', ['conf-compute', '-f'], options);
  } catch (err) {
    // No driver userland: not an NVIDIA guest.
    if (err instanceof NvidiaToolMissing) return { detected: false, reason: err.message };
    throw err;
  }
  // "No devices were found", no driver loaded, no CC support: all mean no GPU to attest.
  if (cc.code !== 0) return { detected: false, reason: failed('nvidia-smi conf-compute -f', cc) };
  const status = parseCcStatus(cc.stdout);
  if (status === undefined)
    throw new AttesterError('nvidia-smi conf-compute -f printed no "CC status" line', {
      code: 'DETECTION_FAILED',
    });
  if (status !== 'ON') return { detected: false, reason: `nvidia-smi conf-compute -f: CC status ${status}` };
  // A GPU in CC mode whose evidence cannot be collected is worth a warning: the probe fails loudly.
  let version: ToolRun;
  try {
    version = await runTool('nvattest', ['version'], options);
  } catch (err) {
    throw new AttesterError(`a GPU is in CC mode, but ${(err as Error).message}`, {
      cause: err,
      code: 'DETECTION_FAILED',
    });
  }
  if (version.code !== 0)
    throw new AttesterError(`a GPU is in CC mode, but ${failed('nvattest version', version)}`, {
      code: 'DETECTION_FAILED',
    });
  return { detected: true, reason: 'nvidia-smi conf-compute -f: CC status ON; nvattest runs' };
}

export const nvidiaModule: AttesterModule = {
  tee: 'nvidia',
  detect,
  create: (options) => new NvidiaAttester(options),
};
