// NVIDIA GPUs (trustee's `nvidia` verifier, local mode): each device's SPDM GET_MEASUREMENTS
// report is checked against its certificate chain and NVIDIA's pinned device identity root, and
// bound to the KBS nonce. Only Hopper GPUs are verified locally, as in trustee.
import { verify } from 'node:crypto';
import { decodeBase64StdStrict } from '@broker/protocol';
import { quote, VerificationError } from '../errors.js';
import { arrayMember, evidenceObject, stringMember } from '../evidence.js';
import {
  type ExpectedData,
  regularize,
  reportDataExpected,
  type Verifier,
  type VerifierResult,
} from '../verifier.js';
import { parsePemChain, verifyNvidiaChain } from './chain.js';
import { attestWithNras, fetchNrasKeys, NRAS_JWKS_URL, type NrasOptions } from './nras.js';
import { OPAQUE_FWID } from './opaque.js';
import { ppcieResult } from './ppcie.js';
import {
  HOPPER_SIGNATURE_SIZE,
  MAX_NVIDIA_REPORT_BYTES,
  type NvidiaReport,
  parseNvidiaReport,
  SPDM_NONCE_SIZE,
} from './spdm.js';

/** Devices in one evidence: a PPCIE system has 8 GPUs and 4 switches. */
export const MAX_NVIDIA_DEVICES = 16;
const MAX_CHAIN_CHARS = 64 * 1024;
const MAX_UUID_CHARS = 128;

export type { NvidiaVerifierOptions } from './options.js';

/** Claims of one GPU, named as trustee's `NvDeviceReportAndCertClaim`. */
export interface NvidiaGpuClaims {
  readonly arch: string;
  readonly uuid: string;
  /** Measurement block index → value (hex). */
  readonly measurements: Record<string, string>;
  /** The decoded opaque data (driver_version, vbios_version, fwid, …). */
  readonly config: Record<string, unknown>;
}

/** serde's names for trustee's Architecture enum (case-insensitive parse, aliases upper case). */
const ARCHITECTURES: ReadonlyMap<string, string> = new Map([
  ['Hopper', 'Hopper'],
  ['HOPPER', 'Hopper'],
  ['Blackwell', 'Blackwell'],
  ['BLACKWELL', 'Blackwell'],
  ['LS10', 'LS10'],
]);

/** The report as sent: hex (the original encoding) is tried first, then standard base64. */
function reportBytes(evidence: string): Buffer {
  if (/^(?:[0-9a-fA-F]{2})*$/.test(evidence)) return Buffer.from(evidence, 'hex');
  const bytes = decodeBase64StdStrict(evidence);
  if (bytes === null) {
    throw new VerificationError(
      'EVIDENCE_MALFORMED',
      'NVIDIA device evidence is neither hex nor standard base64',
    );
  }
  return Buffer.from(bytes);
}

function verifyReportSignature(report: NvidiaReport, chain: ReturnType<typeof parsePemChain>): void {
  const leaf = chain[0];
  if (leaf === undefined)
    throw new VerificationError('CERT_CHAIN_INVALID', 'NVIDIA certificate chain is empty');
  const key = leaf.publicKey;
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'secp384r1') {
    throw new VerificationError('UNSUPPORTED_ALGORITHM', 'NVIDIA attestation certificate key is not P-384');
  }
  if (!verify('sha384', report.signed, { key, dsaEncoding: 'ieee-p1363' }, report.response.signature)) {
    throw new VerificationError(
      'REPORT_SIGNATURE_INVALID',
      'NVIDIA report signature does not verify with the attestation certificate',
    );
  }
}

function deviceClaims(arch: string, uuid: string, report: NvidiaReport): NvidiaGpuClaims {
  const measurements: Record<string, string> = {};
  for (const b of report.response.blocks) measurements[String(b.index)] = b.value.toString('hex');
  return { arch, uuid, measurements, config: report.response.opaque };
}

/** Checks one device: report signature, chain (root, FWID, signatures, dates), then the nonce. */
export function verifyNvidiaDevice(
  device: unknown,
  expectedNonce: Buffer,
  opts: { readonly now: Date; readonly trustedRoots?: readonly string[] },
): NvidiaGpuClaims {
  const obj = evidenceObject(device, 'nvidia device');
  const archName = stringMember(obj, 'arch', 16);
  const arch = ARCHITECTURES.get(archName);
  if (arch === undefined) {
    throw new VerificationError('EVIDENCE_MALFORMED', `NVIDIA device arch ${quote(archName)} is not known`);
  }
  if (arch !== 'Hopper') {
    throw new VerificationError('UNSUPPORTED_PROCESSOR', `NVIDIA ${arch} devices are not verified locally`);
  }
  const uuid = stringMember(obj, 'uuid', MAX_UUID_CHARS, 'unknown');
  const report = parseNvidiaReport(
    reportBytes(stringMember(obj, 'evidence', 2 * MAX_NVIDIA_REPORT_BYTES)),
    HOPPER_SIGNATURE_SIZE,
  );
  const pem = decodeBase64StdStrict(stringMember(obj, 'certificate', MAX_CHAIN_CHARS));
  if (pem === null) {
    throw new VerificationError('EVIDENCE_MALFORMED', 'NVIDIA device certificate is not standard base64');
  }
  const chain = parsePemChain(Buffer.from(pem).toString('latin1'));
  verifyReportSignature(report, chain);
  verifyNvidiaChain(chain, {
    now: opts.now,
    fwid: report.response.opaque[OPAQUE_FWID],
    ...(opts.trustedRoots ? { extraRoots: opts.trustedRoots } : {}),
  });
  if (!report.request.nonce.equals(expectedNonce)) {
    throw new VerificationError(
      'REPORT_DATA_MISMATCH',
      'NVIDIA report nonce is not the expected report data (first 32 bytes of the runtime data hash)',
    );
  }
  return deviceClaims(arch, uuid, report);
}

export class NvidiaVerifier implements Verifier {
  readonly tee = 'nvidia' as const;

  async evaluate(evidence: unknown, expected: ExpectedData): Promise<VerifierResult[]> {
    const obj = evidenceObject(evidence, 'nvidia');
    const devices = arrayMember(obj, 'device_evidence_list', MAX_NVIDIA_DEVICES);
    // trustee's nvidia verifier refuses ReportData::NotProvided: a GPU report only counts bound to
    // this request's nonce. Comparing with the empty report data instead would accept every report
    // requested with an all-zero nonce. Refused before any device is parsed or sent to NRAS.
    if (!reportDataExpected(expected)) {
      throw new VerificationError(
        'REPORT_DATA_MISMATCH',
        'NVIDIA evidence needs runtime data: none was provided to check the report nonce against',
      );
    }
    // trustee's regularize_data: the SPDM nonce is the report data cut (or zero-padded) to 32 bytes.
    const nonce = regularize(expected.reportData, SPDM_NONCE_SIZE);
    const now = expected.now ?? new Date();
    const trustedRoots = expected.nvidia?.trustedRoots;
    const remote = expected.nvidia?.remote;
    const results: VerifierResult[] =
      remote !== undefined
        ? await this.#remote(devices, nonce, remote, now)
        : devices.map((device) => ({
            claims: {
              ...verifyNvidiaDevice(device, nonce, { now, ...(trustedRoots ? { trustedRoots } : {}) }),
            },
            class: 'gpu' as const,
          }));
    const ppcie = ppcieResult(results);
    return ppcie === undefined ? results : [...results, ppcie];
  }

  async #remote(
    devices: readonly unknown[],
    nonce: Buffer,
    remote: NrasOptions,
    now: Date,
  ): Promise<VerifierResult[]> {
    // Parsed before any request: a malformed list is refused without asking NRAS.
    const parsed = devices.map((device) => {
      const obj = evidenceObject(device, 'nvidia device');
      const archName = stringMember(obj, 'arch', 16);
      const arch = ARCHITECTURES.get(archName);
      if (arch === undefined) {
        throw new VerificationError(
          'EVIDENCE_MALFORMED',
          `NVIDIA device arch ${quote(archName)} is not known`,
        );
      }
      const evidence = stringMember(obj, 'evidence', 2 * MAX_NVIDIA_REPORT_BYTES);
      return {
        endpoint: arch === 'LS10' ? ('switch' as const) : ('gpu' as const),
        arch,
        evidence: /^(?:[0-9a-fA-F]{2})*$/.test(evidence)
          ? Buffer.from(evidence, 'hex').toString('base64')
          : evidence,
        certificate: stringMember(obj, 'certificate', MAX_CHAIN_CHARS),
      };
    });
    const keys = await fetchNrasKeys(remote.jwksUrl ?? NRAS_JWKS_URL, remote.timeoutMs);
    const out: VerifierResult[] = [];
    for (const device of parsed) {
      out.push({
        claims: await attestWithNras(device, nonce, keys, { ...remote, now }),
        class: device.endpoint,
      });
    }
    return out;
  }
}
