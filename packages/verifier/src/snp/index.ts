// Bare SEV-SNP (trustee's `snp` verifier): evidence `{"attestation_report": <sev crate JSON>,
// "cert_chain": [CertTableEntry] | null}`. The endorsement key comes from the certificate table
// the host supplied with the report or, without one, from the configured VCEK sources (an offline
// store or AMD's KDS); either way it must chain to a trusted ARK.
import { X509Certificate } from 'node:crypto';
import { VerificationError } from '../errors.js';
import { evidenceObject, objectMember } from '../evidence.js';
import { defaultHttpGet } from '../http/get.js';
import { type ExpectedData, reportDataExpected, type Verifier, type VerifierResult } from '../verifier.js';
import { type AmdRootSet, parseVekCertificate, type VekCertificate } from './certs.js';
import { type SnpClaims, snpClaims } from './claims.js';
import { kdsRoots } from './kds.js';
import { encodeSnpReport, parseSnpReport, type SnpReport } from './report.js';
import { type CertTableEntry, certTableFromSevJson, reportFieldsFromSevJson } from './serde.js';
import { DEFAULT_KDS_TIMEOUT_MS, fetchVcek, rememberKdsVcek } from './vcek-source.js';
import { checkVmpl, trustedRoots, vekKindOf, verifySnpReport } from './verify.js';

/** trustee needs version 3+ to tell the processor (and so the roots) from the report. */
export const SNP_EVIDENCE_MIN_REPORT_VERSION = 3;
export const SNP_EVIDENCE_MAX_REPORT_VERSION = 5;

function certFrom(entry: CertTableEntry, what: string): X509Certificate {
  try {
    return new X509Certificate(entry.data);
  } catch (e) {
    throw new VerificationError('CERT_MALFORMED', `${what} in cert_chain is not an X.509 certificate`, {
      cause: e,
    });
  }
}

function signedBy(child: X509Certificate, issuer: X509Certificate): boolean {
  try {
    return child.checkIssued(issuer) && child.verify(issuer.publicKey);
  } catch {
    return false;
  }
}

/**
 * The roots to verify against, given the certificate table. An ARK in the table must be signed by
 * a trusted ARK (it adds nothing else); an ASK in the table replaces the trusted intermediates,
 * provided a trusted ARK signed it. The VCEK or VLEK is the first one in the table.
 */
function rootsAndVek(
  table: readonly CertTableEntry[],
  roots: readonly AmdRootSet[],
  report: SnpReport,
): { roots: AmdRootSet[]; vek: VekCertificate } {
  const usable = roots.filter((r) => r.generation === undefined || r.generation === report.generation);
  let result = [...usable];
  const vekEntry = table.find((e) => e.type === 'VCEK' || e.type === 'VLEK');
  if (vekEntry === undefined) {
    throw new VerificationError('EVIDENCE_MALFORMED', 'cert_chain has no VCEK or VLEK');
  }
  for (const e of table) {
    if (e.type === 'ARK') {
      const ark = certFrom(e, 'ARK');
      if (!usable.some((r) => signedBy(ark, r.ark))) {
        throw new VerificationError('CERT_CHAIN_INVALID', 'the ARK in cert_chain is not a trusted AMD ARK');
      }
    }
  }
  const askEntry = table.find((e) => e.type === 'ASK');
  if (askEntry !== undefined) {
    const ask = certFrom(askEntry, 'ASK');
    result = usable.filter((r) => signedBy(ask, r.ark)).map((r) => ({ ...r, ask, asvk: ask }));
    if (result.length === 0) {
      throw new VerificationError(
        'CERT_CHAIN_INVALID',
        'the ASK in cert_chain is not signed by a trusted AMD ARK',
      );
    }
  }
  return { roots: result, vek: parseVekCertificate(vekEntry.data) };
}

/**
 * Without a certificate table the VCEK comes from the configured sources; it chains to the
 * trusted ASKs directly (no table ARK/ASK to consider). A VLEK is never published, so a report
 * signed by one needs its table.
 */
async function rootsAndFetchedVcek(
  report: SnpReport,
  roots: readonly AmdRootSet[],
  expected: ExpectedData,
): Promise<{ roots: AmdRootSet[]; vek: VekCertificate; verified?: () => void }> {
  if (vekKindOf(report) === 'vlek') {
    throw new VerificationError(
      'VCEK_UNAVAILABLE',
      'the report is signed by a VLEK, which only the evidence cert_chain can carry',
    );
  }
  // Version 3+ (checked before) always names its processor.
  const generation = report.generation!;
  const options = expected.snp ?? {};
  const fetched = await fetchVcek(report, generation, options);
  const usable = roots.filter((r) => r.generation === undefined || r.generation === generation);
  const vek = parseVekCertificate(fetched.der);
  if (fetched.kdsBaseUrl === undefined) return { roots: usable, vek };
  // A VCEK from KDS: its ASK from KDS too, refused when the ARK's CRL lists it.
  const fromKds = await kdsRoots(fetched.kdsBaseUrl, generation, usable, expected.now ?? new Date(), {
    httpGet: options.httpGet ?? defaultHttpGet(),
    timeoutMs: options.kdsTimeoutMs ?? DEFAULT_KDS_TIMEOUT_MS,
  });
  const url = fetched.kdsUrl;
  return {
    roots: fromKds,
    vek,
    ...(url !== undefined ? { verified: () => rememberKdsVcek(url, fetched.der) } : {}),
  };
}

export class SnpVerifier implements Verifier {
  readonly tee = 'snp' as const;

  async evaluate(evidence: unknown, expected: ExpectedData): Promise<VerifierResult[]> {
    const obj = evidenceObject(evidence, 'snp');
    const fields = reportFieldsFromSevJson(objectMember(obj, 'attestation_report'));
    const table = certTableFromSevJson(obj, 'cert_chain');
    if (
      fields.version < SNP_EVIDENCE_MIN_REPORT_VERSION ||
      fields.version > SNP_EVIDENCE_MAX_REPORT_VERSION
    ) {
      throw new VerificationError(
        'UNSUPPORTED_VERSION',
        `SNP report version ${fields.version} is not supported (${SNP_EVIDENCE_MIN_REPORT_VERSION} to ${SNP_EVIDENCE_MAX_REPORT_VERSION})`,
      );
    }
    // The signed bytes are rebuilt from the fields, reserved bytes zero, as the sev crate does.
    const report = parseSnpReport(encodeSnpReport(fields));
    const { roots, vek, verified } =
      table === undefined
        ? await rootsAndFetchedVcek(report, trustedRoots(expected), expected)
        : { ...rootsAndVek(table, trustedRoots(expected), report), verified: undefined };
    verifySnpReport(report, vek, roots, expected.now ?? new Date());
    verified?.();
    checkVmpl(report, 0);

    const reportData = Buffer.alloc(64);
    reportData.set(expected.reportData.subarray(0, 64));
    if (reportDataExpected(expected) && !reportData.equals(report.reportData)) {
      throw new VerificationError(
        'REPORT_DATA_MISMATCH',
        'SNP report_data differs from the expected report data',
      );
    }
    if (expected.initDataHash !== undefined) {
      const hostData = Buffer.alloc(32);
      hostData.set(expected.initDataHash.subarray(0, 32));
      if (!hostData.equals(report.hostData)) {
        throw new VerificationError('INIT_DATA_MISMATCH', 'SNP HOST_DATA differs from the initdata digest');
      }
    }
    const claims: SnpClaims = snpClaims(report);
    return [{ claims: claims as unknown as Record<string, unknown>, class: 'cpu' }];
  }
}
