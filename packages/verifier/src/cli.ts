// `kbs-verify`: runs one evidence file through the same verifiers the KBS uses, for operators
// debugging an attestation. Prints the claims as JSON, or the verification error.
import { readFileSync } from 'node:fs';
import {
  decodeBase64StdStrict,
  decodeBase64UrlStrict,
  isTee,
  MAX_JSON_BODY_BYTES,
  type Tee,
} from '@broker/protocol';
import { parseAzSnpVtpmEvidence } from './az-snp-vtpm/evidence.js';
import { parseAzTdxVtpmEvidence } from './az-tdx-vtpm/evidence.js';
import { VerificationError } from './errors.js';
import type { HttpGet } from './http/get.js';
import { getVerifier, supportedTees } from './registry.js';
import type { VcekSource } from './snp/vcek-source.js';
import {
  type IntelCollateralSource,
  intelCollateralSource,
  type TcbUpdateType,
} from './tdx/collateral-service.js';
import { parseTdxEvidence } from './tdx/index.js';
import { parseTdxQuote } from './tdx/quote.js';
import { parseQuoteMessage } from './tpm/quote.js';

export interface CliIo {
  readonly out: (s: string) => void;
  readonly err: (s: string) => void;
  /** Reads a file as bytes; `-` is standard input. */
  readonly readFile: (path: string) => Buffer;
  /** HTTP client for --collateral-service and --vcek-source kds; Node's by default (tests: a mock's CA). */
  readonly httpGet?: HttpGet;
}

const defaultIo: CliIo = {
  out: (s) => process.stdout.write(s),
  err: (s) => process.stderr.write(s),
  readFile: (p) => readFileSync(p === '-' ? 0 : p),
};

const USAGE = `usage: kbs-verify --tee TEE --evidence FILE [--report-data HEX] [--init-data-digest HEX]
                  [--time RFC3339] [--trusted-ark PEM]... [--vcek-store DIR]...
                  [--tcb-info FILE]... [--qe-identity FILE] [--collateral-signer PEM]...
                  [--trusted-root PEM]... [--pck-crl FILE] [--root-ca-crl FILE]
                  [--collateral-service URL [--tcb-update-type early|standard]]
                  [--vcek-source kds[=URL]]...

  --tee TEE               the TEE the evidence is for (listed by --help)
  --evidence FILE         evidence JSON as the guest sent it, or base64url of it; - reads stdin
  --report-data HEX       the report data the evidence must carry (the KBS's H(JCS(runtime data)));
                          without it, the value bound in the evidence is shown and not checked
  --init-data-digest HEX  the initdata digest the evidence must bind (PCR8, HOST_DATA, MR_CONFIG_ID)
  --time RFC3339          verification time for certificate validity (default: now)
  --trusted-ark PEM       also trust this test root (ARK + ASK/ASVK PEM bundle); repeatable
  --tcb-info FILE         tdx, az-tdx-vtpm: Intel TCB info JSON (PCS tdx/certification/v4/tcb); repeatable
  --qe-identity FILE      tdx, az-tdx-vtpm: Intel TD QE identity JSON (PCS tdx/certification/v4/qe/identity)
  --collateral-signer PEM tdx, az-tdx-vtpm: a certificate that signs collateral (the PCS issuer chain
                          header), besides Intel's built-in TCB Signing certificate; repeatable
  --trusted-root PEM      tdx, az-tdx-vtpm: also trust this test SGX root; repeatable
  --pck-crl FILE          tdx, az-tdx-vtpm: the PCK CA's CRL (DER or PEM): checks the PCK is not revoked
  --root-ca-crl FILE      tdx, az-tdx-vtpm: the root CA's CRL (DER or PEM)
  --collateral-service URL
                          tdx, az-tdx-vtpm: fetch the collateral from Intel's PCS or a PCCS
                          (https://…, only the host is used) or the PCS Client Tool's file (file://…),
                          as trustee's dcap_verifier collateral_service; instead of the offline files
  --tcb-update-type TYPE  with --collateral-service: early (default) or standard TCB info
  --vcek-store DIR        snp: look up the VCEK of evidence without cert_chain in this offline
                          store (trustee's OfflineStore layout, DIR/vcek/<hwid>/...); repeatable
  --vcek-source kds[=URL] snp: ask AMD's KDS (https://kdsintf.amd.com, or URL) for the VCEK, its
                          chain and CRL; repeatable; with --vcek-store, tried in the order given.
                          Without either, the tool asks nobody

Prints [{"class", "claims"}] as JSON and exits 0, or prints the error and exits 1 (2 for usage errors).
`;

class UsageError extends Error {}

/** A CRL file: PEM text stays text, anything else is DER. */
function crlArg(bytes: Buffer): Buffer {
  const text = bytes.toString('latin1');
  return text.includes('-----BEGIN X509 CRL-----') ? Buffer.from(text) : bytes;
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;

function hexArg(name: string, v: string): Buffer {
  if (!/^(?:[0-9a-fA-F]{2})*$/.test(v)) throw new UsageError(`${name} must be hex`);
  return Buffer.from(v, 'hex');
}

/** Evidence as JSON text, or base64url of the JSON (how the AS REST API and the AA's coco_as send it). */
function parseEvidence(bytes: Buffer): unknown {
  if (bytes.length > MAX_JSON_BODY_BYTES)
    throw new UsageError(`evidence file is larger than ${MAX_JSON_BODY_BYTES} bytes`);
  const text = bytes.toString('utf8').trim();
  try {
    return JSON.parse(text);
  } catch {
    const decoded = decodeBase64UrlStrict(text.replace(/=+$/, ''));
    if (decoded !== null) {
      try {
        return JSON.parse(decoded.toString('utf8'));
      } catch {
        // fall through
      }
    }
    throw new UsageError('evidence file is neither JSON nor base64url of JSON');
  }
}

/**
 * The report data the evidence itself carries, for a run without --report-data. Read without
 * verification: it only lets the other checks run, and is reported as unchecked.
 */
function boundReportData(tee: Tee, evidence: unknown): Buffer {
  const obj = (evidence ?? {}) as Record<string, unknown>;
  switch (tee) {
    case 'az-snp-vtpm':
      return Buffer.from(parseQuoteMessage(parseAzSnpVtpmEvidence(evidence).tpmQuote.message).extraData);
    case 'az-tdx-vtpm':
      return Buffer.from(parseQuoteMessage(parseAzTdxVtpmEvidence(evidence).tpmQuote.message).extraData);
    case 'tdx':
      return Buffer.from(parseTdxQuote(parseTdxEvidence(evidence).quote).body.reportData);
    case 'tpm': {
      const q = obj.tpm_quote as Record<string, unknown> | undefined;
      const msg = typeof q?.message === 'string' ? decodeBase64StdStrict(q.message) : null;
      if (msg === null)
        throw new VerificationError('EVIDENCE_MALFORMED', 'tpm evidence has no quote message');
      return Buffer.from(parseQuoteMessage(msg).extraData);
    }
    case 'snp': {
      const rd = (obj.attestation_report as Record<string, unknown> | undefined)?.report_data;
      if (!Array.isArray(rd) || !rd.every((b) => Number.isInteger(b) && b >= 0 && b <= 255)) {
        throw new VerificationError('EVIDENCE_MALFORMED', 'snp evidence has no report_data');
      }
      return Buffer.from(rd as number[]);
    }
    case 'sample': {
      const rd =
        typeof obj.report_data === 'string' ? decodeBase64StdStrict(obj.report_data) : Buffer.alloc(0);
      if (rd === null) throw new VerificationError('EVIDENCE_MALFORMED', 'sample report_data is not base64');
      return rd;
    }
    default:
      throw new UsageError(`--report-data is required for ${tee}`);
  }
}

/** Runs the command; returns the exit code (0 verified, 1 verification failed, 2 usage error). */
export async function main(argv: string[], io: CliIo = defaultIo): Promise<number> {
  let tee: Tee;
  let evidence: unknown;
  let reportData: Buffer | undefined;
  let initDataHash: Buffer | undefined;
  let now: Date | undefined;
  const trustedArks: string[] = [];
  const tcbInfos: Buffer[] = [];
  let qeIdentity: Buffer | undefined;
  const collateralSigners: string[] = [];
  const trustedSgxRoots: string[] = [];
  let pckCrl: Buffer | undefined;
  let rootCaCrl: Buffer | undefined;
  const vcekSources: VcekSource[] = [];
  let collateralServiceUrl: string | undefined;
  let tcbUpdateType: TcbUpdateType | undefined;
  let collateralService: IntelCollateralSource | undefined;
  try {
    let teeArg: string | undefined;
    let evidenceFile: string | undefined;
    for (let i = 0; i < argv.length; i++) {
      const a = argv[i]!;
      if (a === '-h' || a === '--help') {
        io.out(`${USAGE}\nsupported TEEs: ${supportedTees().join(', ')}\n`);
        return 0;
      }
      const value = () => {
        const v = argv[++i];
        if (v === undefined) throw new UsageError(`${a} needs a value`);
        return v;
      };
      if (a === '--tee') teeArg = value();
      else if (a === '--evidence') evidenceFile = value();
      else if (a === '--report-data') reportData = hexArg(a, value());
      else if (a === '--init-data-digest') initDataHash = hexArg(a, value());
      else if (a === '--time') {
        const v = value();
        const d = new Date(v);
        if (!RFC3339.test(v) || Number.isNaN(d.getTime()))
          throw new UsageError('--time must be an RFC 3339 date-time');
        now = d;
      } else if (a === '--trusted-ark') trustedArks.push(io.readFile(value()).toString('utf8'));
      else if (a === '--tcb-info') tcbInfos.push(io.readFile(value()));
      else if (a === '--qe-identity') qeIdentity = io.readFile(value());
      else if (a === '--collateral-signer') collateralSigners.push(io.readFile(value()).toString('utf8'));
      else if (a === '--trusted-root') trustedSgxRoots.push(io.readFile(value()).toString('utf8'));
      else if (a === '--pck-crl') pckCrl = crlArg(io.readFile(value()));
      else if (a === '--root-ca-crl') rootCaCrl = crlArg(io.readFile(value()));
      else if (a === '--vcek-store') vcekSources.push({ type: 'OfflineStore', path: value() });
      else if (a === '--vcek-source') {
        const v = value();
        const m = /^kds(?:=(.+))?$/i.exec(v);
        if (m === null) throw new UsageError('--vcek-source takes kds or kds=URL');
        vcekSources.push({ type: 'KDS', ...(m[1] !== undefined ? { baseUrl: m[1] } : {}) });
      } else if (a === '--collateral-service') collateralServiceUrl = value();
      else if (a === '--tcb-update-type') {
        const v = value();
        if (v !== 'early' && v !== 'standard') throw new UsageError('--tcb-update-type is early or standard');
        tcbUpdateType = v;
      } else throw new UsageError(`unexpected argument ${JSON.stringify(a)}`);
    }
    if (teeArg === undefined) throw new UsageError('--tee is required');
    if (evidenceFile === undefined) throw new UsageError('--evidence is required');
    if (!isTee(teeArg)) throw new UsageError(`unknown TEE ${JSON.stringify(teeArg)}`);
    if (tcbInfos.length > 0 !== (qeIdentity !== undefined)) {
      throw new UsageError('--tcb-info and --qe-identity go together');
    }
    if (collateralServiceUrl !== undefined && qeIdentity !== undefined) {
      throw new UsageError('--collateral-service and --tcb-info/--qe-identity exclude each other');
    }
    if (tcbUpdateType !== undefined && collateralServiceUrl === undefined) {
      throw new UsageError('--tcb-update-type needs --collateral-service');
    }
    if (collateralServiceUrl !== undefined) {
      try {
        collateralService = intelCollateralSource({
          url: collateralServiceUrl,
          ...(tcbUpdateType !== undefined ? { tcbUpdateType } : {}),
          ...(io.httpGet !== undefined ? { httpGet: io.httpGet } : {}),
        });
      } catch (e) {
        throw new UsageError((e as Error).message);
      }
    }
    tee = teeArg;
    evidence = parseEvidence(io.readFile(evidenceFile));
  } catch (e) {
    if (e instanceof UsageError) {
      io.err(`kbs-verify: ${e.message}\n${USAGE}`);
      return 2;
    }
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code === 'string') {
      io.err(`kbs-verify: ${(e as Error).message}\n`);
      return 2;
    }
    throw e;
  }

  try {
    const verifier = getVerifier(tee);
    if (reportData === undefined) {
      reportData = boundReportData(tee, evidence);
      io.err(
        `kbs-verify: report data NOT checked: using the evidence's own ${reportData.toString('hex') || '(empty)'}\n`,
      );
    }
    const results = await verifier.evaluate(evidence, {
      reportData,
      ...(initDataHash !== undefined ? { initDataHash } : {}),
      ...(now !== undefined ? { now } : {}),
      ...(trustedArks.length > 0 ? { trustedArks } : {}),
      ...(vcekSources.length > 0
        ? { snp: { vcekSources, ...(io.httpGet !== undefined ? { httpGet: io.httpGet } : {}) } }
        : {}),
      tdx: {
        ...(qeIdentity !== undefined
          ? {
              collateral: {
                tcbInfos,
                qeIdentity,
                ...(collateralSigners.length > 0 ? { signingCerts: collateralSigners } : {}),
                ...(pckCrl !== undefined ? { pckCrl } : {}),
                ...(rootCaCrl !== undefined ? { rootCaCrl } : {}),
              },
            }
          : {}),
        ...(collateralService !== undefined ? { collateralService } : {}),
        ...(trustedSgxRoots.length > 0 ? { trustedSgxRoots } : {}),
      },
    });
    io.out(
      `${JSON.stringify(
        results.map((r) => ({ class: r.class, claims: r.claims })),
        null,
        2,
      )}\n`,
    );
    return 0;
  } catch (e) {
    if (e instanceof VerificationError) {
      io.err(`kbs-verify: verification failed: ${e.code}: ${e.message}\n`);
      return 1;
    }
    if (e instanceof UsageError) {
      io.err(`kbs-verify: ${e.message}\n${USAGE}`);
      return 2;
    }
    throw e;
  }
}
