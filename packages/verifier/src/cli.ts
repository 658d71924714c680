// `kbs-verify`: runs one evidence file through the same verifiers the KBS uses, for operators
// debugging an attestation. Prints the claims as JSON, or the verification error.
import { readFileSync } from 'node:fs';
import { choice, type OptionValues, required, runCommand, UsageError } from '@broker/cli';
import {
  decodeBase64StdStrict,
  decodeBase64UrlStrict,
  isTee,
  MAX_JSON_BODY_BYTES,
  type Tee,
} from '@broker/protocol';
import { parseAzSnpVtpmEvidence } from './az-snp-vtpm/evidence.js';
import { parseAzTdxVtpmEvidence } from './az-tdx-vtpm/evidence.js';
import { parseRvStore, parseTaStore } from './cca/stores.js';
import { parseCcaToken } from './cca/token.js';
import { VerificationError, VerifierError } from './errors.js';
import type { HttpGet } from './http/get.js';
import { parseNvidiaReport } from './nvidia/spdm.js';
import { getVerifier, supportedTees } from './registry.js';
import type { VcekSource } from './snp/vcek-source.js';
import { type IntelCollateralSource, intelCollateralSource } from './tdx/collateral-service.js';
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

const USAGE = `Usage: kbs-verify --tee TEE --evidence FILE [--report-data HEX] [--init-data-digest HEX]
                  [--time RFC3339] [--trusted-ark PEM]... [--vcek-store DIR]...
                  [--tcb-info FILE]... [--qe-identity FILE] [--collateral-signer PEM]...
                  [--trusted-root PEM]... [--pck-crl FILE] [--root-ca-crl FILE]
                  [--collateral-service URL [--tcb-update-type early|standard]]
                  [--vcek-source kds[=URL]]... [--ta-store FILE --rv-store FILE]

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
  --trusted-root PEM      tdx, az-tdx-vtpm: also trust this test SGX root; nvidia: this test device
                          root besides NVIDIA's; repeatable
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
  --ta-store FILE         cca: the TA store (tastore.json: CPAK per instance ID)
  --rv-store FILE         cca: the RV store (rvstore.json: platform reference values)

  -h, --help              Print help
  -V, --version           Print version

Prints [{"class", "claims"}] as JSON.
`;

const SPEC = {
  name: 'kbs-verify',
  version: '0.1.0',
  help: USAGE,
  options: {
    tee: { type: 'string' },
    evidence: { type: 'string' },
    'report-data': { type: 'string' },
    'init-data-digest': { type: 'string' },
    time: { type: 'string' },
    'trusted-ark': { type: 'string', multiple: true },
    'tcb-info': { type: 'string', multiple: true },
    'qe-identity': { type: 'string' },
    'collateral-signer': { type: 'string', multiple: true },
    'trusted-root': { type: 'string', multiple: true },
    'pck-crl': { type: 'string' },
    'root-ca-crl': { type: 'string' },
    'vcek-store': { type: 'string', multiple: true },
    'vcek-source': { type: 'string', multiple: true },
    'collateral-service': { type: 'string' },
    'tcb-update-type': { type: 'string' },
    'ta-store': { type: 'string' },
    'rv-store': { type: 'string' },
  },
  exitStatus: [
    [0, 'the evidence verified; the claims are printed'],
    [1, 'verification failed (the reason is printed), or a file is unreadable'],
  ],
} as const;

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
    case 'nvidia': {
      // The SPDM request nonce of the first device: every device carries the same one.
      const first = Array.isArray(obj.device_evidence_list) ? obj.device_evidence_list[0] : undefined;
      const hex = (first as Record<string, unknown> | undefined)?.evidence;
      if (typeof hex !== 'string' || !/^(?:[0-9a-fA-F]{2})+$/.test(hex)) {
        throw new VerificationError(
          'EVIDENCE_MALFORMED',
          'nvidia evidence has no hex report to take a nonce from',
        );
      }
      return parseNvidiaReport(Buffer.from(hex, 'hex')).request.nonce;
    }
    case 'cca': {
      const token = obj.token;
      if (!Array.isArray(token))
        throw new VerificationError('EVIDENCE_MALFORMED', 'cca evidence has no token');
      return parseCcaToken(Buffer.from(token as number[])).realmClaims.challenge;
    }
    default:
      throw new UsageError(`--report-data is required for ${tee}`);
  }
}

/** Runs the command; returns the exit code (0 verified, 1 verification failed, 2 usage error). */
export function main(argv: string[], io: CliIo = defaultIo): Promise<number> {
  const help = { ...SPEC, help: `${USAGE}\nsupported TEEs: ${supportedTees().join(', ')}\n` };
  return runCommand(help, argv, ({ values }) => verify(values, io), io);
}

async function verify(values: OptionValues<typeof SPEC.options>, io: CliIo): Promise<number> {
  const reportDataArg = values['report-data'];
  let reportData = reportDataArg === undefined ? undefined : hexArg('--report-data', reportDataArg);
  const initDataArg = values['init-data-digest'];
  const initDataHash = initDataArg === undefined ? undefined : hexArg('--init-data-digest', initDataArg);
  let now: Date | undefined;
  if (values.time !== undefined) {
    const d = new Date(values.time);
    if (!RFC3339.test(values.time) || Number.isNaN(d.getTime()))
      throw new UsageError('--time must be an RFC 3339 date-time');
    now = d;
  }
  const vcekSources: VcekSource[] = [];
  for (const dir of values['vcek-store'] ?? []) vcekSources.push({ type: 'OfflineStore', path: dir });
  for (const v of values['vcek-source'] ?? []) {
    const m = /^kds(?:=(.+))?$/i.exec(v);
    if (m === null) throw new UsageError('--vcek-source takes kds or kds=URL');
    vcekSources.push({ type: 'KDS', ...(m[1] !== undefined ? { baseUrl: m[1] } : {}) });
  }
  const tcbUpdateType = choice('tcb-update-type', values['tcb-update-type'], ['early', 'standard'] as const);
  const teeArg = required('tee', values.tee);
  const evidenceFile = required('evidence', values.evidence);
  if (!isTee(teeArg))
    throw new UsageError(`unknown TEE '${teeArg.slice(0, 64)}' (allowed: ${supportedTees().join(', ')})`);
  const tcbInfoFiles = values['tcb-info'] ?? [];
  const qeIdentityFile = values['qe-identity'];
  if (tcbInfoFiles.length > 0 !== (qeIdentityFile !== undefined)) {
    throw new UsageError('--tcb-info and --qe-identity go together');
  }
  const collateralServiceUrl = values['collateral-service'];
  if (collateralServiceUrl !== undefined && qeIdentityFile !== undefined) {
    throw new UsageError('--collateral-service and --tcb-info/--qe-identity exclude each other');
  }
  if (tcbUpdateType !== undefined && collateralServiceUrl === undefined) {
    throw new UsageError('--tcb-update-type needs --collateral-service');
  }
  let collateralService: IntelCollateralSource | undefined;
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
  if ((values['ta-store'] === undefined) !== (values['rv-store'] === undefined)) {
    throw new UsageError('--ta-store and --rv-store go together');
  }
  const tee: Tee = teeArg;
  // Files are read once the command line is known good; an unreadable one is a runtime failure (1).
  const trustedArks = (values['trusted-ark'] ?? []).map((f) => io.readFile(f).toString('utf8'));
  const tcbInfos = tcbInfoFiles.map((f) => io.readFile(f));
  const qeIdentity = qeIdentityFile === undefined ? undefined : io.readFile(qeIdentityFile);
  const collateralSigners = (values['collateral-signer'] ?? []).map((f) => io.readFile(f).toString('utf8'));
  const trustedSgxRoots = (values['trusted-root'] ?? []).map((f) => io.readFile(f).toString('utf8'));
  const pckCrl = values['pck-crl'] === undefined ? undefined : crlArg(io.readFile(values['pck-crl']));
  const rootCaCrl =
    values['root-ca-crl'] === undefined ? undefined : crlArg(io.readFile(values['root-ca-crl']));
  const taStore =
    values['ta-store'] === undefined ? undefined : io.readFile(values['ta-store']).toString('utf8');
  const rvStore =
    values['rv-store'] === undefined ? undefined : io.readFile(values['rv-store']).toString('utf8');
  const evidence = parseEvidence(io.readFile(evidenceFile));

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
      ...(trustedSgxRoots.length > 0 ? { nvidia: { trustedRoots: trustedSgxRoots } } : {}),
      ...(taStore !== undefined && rvStore !== undefined
        ? {
            cca: {
              stores: { trustAnchors: parseTaStore(taStore), platformRefValues: parseRvStore(rvStore) },
            },
          }
        : {}),
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
      throw new VerifierError(e.code, `verification failed: ${e.code}: ${e.message}`, { cause: e });
    }
    throw e;
  }
}
