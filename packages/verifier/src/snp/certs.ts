// Endorsement key certificates (VCEK, VLEK), their chain to AMD's roots, and the TCB they certify.
//
// Chain: ARK (self-signed) → ASK → VCEK, or ARK → ASVK → VLEK. The built-in roots are AMD's
// real ones for Milan, Genoa and Turin; other roots (a test ARK for the mock TEE) count only when
// the caller configures them.
import { type KeyObject, X509Certificate } from 'node:crypto';
import { VerificationError, VerifierError } from '../errors.js';
import {
  type CertificateFields,
  certificateFields,
  decodeOctetString,
  decodeSmallUint,
} from '../x509/der.js';
import {
  GENOA_ARK_PEM,
  GENOA_ASK_PEM,
  GENOA_ASVK_PEM,
  MILAN_ARK_PEM,
  MILAN_ASK_PEM,
  MILAN_ASVK_PEM,
  TURIN_ARK_PEM,
  TURIN_ASK_PEM,
  TURIN_ASVK_PEM,
} from './amd-roots.gen.js';
import { isZero, type SnpGeneration, type SnpReport, type TcbVersion } from './report.js';

/** AMD's VCEK/VLEK certificate extensions (VCEK specification, "VCEK Certificate Extensions"). */
export const OID_BL_SPL = '1.3.6.1.4.1.3704.1.3.1';
export const OID_TEE_SPL = '1.3.6.1.4.1.3704.1.3.2';
export const OID_SNP_SPL = '1.3.6.1.4.1.3704.1.3.3';
export const OID_UCODE_SPL = '1.3.6.1.4.1.3704.1.3.8';
export const OID_FMC_SPL = '1.3.6.1.4.1.3704.1.3.9';
export const OID_HWID = '1.3.6.1.4.1.3704.1.4';

/** A VCEK is about 1.4 KB; anything near this limit is not one. */
export const MAX_CERT_DER_BYTES = 16 * 1024;
/** A root bundle holds an ARK and up to an ASK and an ASVK. */
export const MAX_ROOT_BUNDLE_CHARS = 64 * 1024;

export type VekKind = 'vcek' | 'vlek';

/** One ARK with the intermediates it signed. */
export interface AmdRootSet {
  /** `Milan`, `Genoa`, `Turin`, or `configured` for a caller-supplied root. */
  readonly name: string;
  /** Set for AMD's built-in roots: reports naming another processor generation do not use them. */
  readonly generation?: SnpGeneration;
  readonly builtin: boolean;
  readonly ark: X509Certificate;
  /** Issues VCEKs. */
  readonly ask?: X509Certificate;
  /** Issues VLEKs. */
  readonly asvk?: X509Certificate;
}

function selfSigned(c: X509Certificate): boolean {
  return signedBy(c, c);
}

// OpenSSL throws, rather than answering false, for some malformed keys and signatures.
function signedBy(child: X509Certificate, issuer: X509Certificate): boolean {
  try {
    return child.checkIssued(issuer) && child.verify(issuer.publicKey);
  } catch {
    return false;
  }
}

let builtins: readonly AmdRootSet[] | undefined;

/** AMD's roots for Milan, Genoa and Turin, parsed and self-checked once. */
export function builtinAmdRoots(): readonly AmdRootSet[] {
  if (builtins === undefined) {
    const make = (generation: SnpGeneration, ark: string, ask: string, asvk: string): AmdRootSet => {
      const set = {
        name: generation,
        generation,
        builtin: true,
        ark: new X509Certificate(ark),
        ask: new X509Certificate(ask),
        asvk: new X509Certificate(asvk),
      };
      // These are constants of this program; a failure here is a build defect, not bad input.
      if (!selfSigned(set.ark) || !signedBy(set.ask, set.ark) || !signedBy(set.asvk, set.ark)) {
        throw new VerifierError('BUILTIN_CERTS_INVALID', `built-in AMD ${generation} roots do not verify`);
      }
      return set;
    };
    builtins = [
      make('Milan', MILAN_ARK_PEM, MILAN_ASK_PEM, MILAN_ASVK_PEM),
      make('Genoa', GENOA_ARK_PEM, GENOA_ASK_PEM, GENOA_ASVK_PEM),
      make('Turin', TURIN_ARK_PEM, TURIN_ASK_PEM, TURIN_ASVK_PEM),
    ];
  }
  return builtins;
}

const PEM_CERT_RE = /-----BEGIN CERTIFICATE-----([A-Za-z0-9+/=\s]+?)-----END CERTIFICATE-----/g;

/** The DER certificates of a PEM text, in order. */
export function pemCertificates(pem: string, maxCerts: number): Buffer[] {
  const out: Buffer[] = [];
  for (const m of pem.matchAll(PEM_CERT_RE)) {
    if (out.length === maxCerts) {
      throw new VerificationError('EVIDENCE_TOO_LARGE', `PEM holds more than ${maxCerts} certificates`);
    }
    out.push(Buffer.from(m[1]!.replace(/\s+/g, ''), 'base64'));
  }
  return out;
}

function parseCertificate(
  der: Uint8Array,
  what: string,
): { cert: X509Certificate; fields: CertificateFields } {
  if (der.length > MAX_CERT_DER_BYTES) {
    throw new VerificationError('EVIDENCE_TOO_LARGE', `${what} is larger than ${MAX_CERT_DER_BYTES} bytes`);
  }
  // The DER walk first: it refuses trailing bytes and odd encodings that OpenSSL may let pass.
  const fields = certificateFields(der);
  try {
    const cert = new X509Certificate(der);
    // Node decodes the key lazily; a broken key must fail here, as a malformed certificate.
    void cert.publicKey;
    return { cert, fields };
  } catch (e) {
    throw new VerificationError('CERT_MALFORMED', `${what} is not an X.509 certificate`, { cause: e });
  }
}

/**
 * A caller-supplied root: a PEM bundle with one self-signed ARK and the ASK and/or ASVK it
 * signed (in any order; an intermediate whose CN mentions VLEK is the ASVK), like AMD's
 * `cert_chain` downloads. Only for test roots such as the mock TEE's.
 */
export function parseAmdRootBundle(pem: string): AmdRootSet {
  if (pem.length > MAX_ROOT_BUNDLE_CHARS) {
    throw new VerificationError(
      'EVIDENCE_TOO_LARGE',
      `root bundle is longer than ${MAX_ROOT_BUNDLE_CHARS} characters`,
    );
  }
  const parsed = pemCertificates(pem, 3).map((der, i) =>
    parseCertificate(der, `root bundle certificate ${i + 1}`),
  );
  const arks = parsed.map((p) => p.cert).filter(selfSigned);
  if (arks.length !== 1) {
    throw new VerificationError('CERT_CHAIN_INVALID', 'root bundle must hold exactly one self-signed ARK');
  }
  const ark = arks[0]!;
  let ask: X509Certificate | undefined;
  let asvk: X509Certificate | undefined;
  for (const { cert: c, fields } of parsed) {
    if (c === ark) continue;
    if (!signedBy(c, ark)) {
      throw new VerificationError('CERT_CHAIN_INVALID', 'root bundle intermediate is not signed by its ARK');
    }
    const isAsvk = /VLEK/i.test(fields.commonName ?? '');
    if (isAsvk ? asvk !== undefined : ask !== undefined) {
      throw new VerificationError('CERT_CHAIN_INVALID', 'root bundle holds two intermediates of one kind');
    }
    if (isAsvk) asvk = c;
    else ask = c;
  }
  if (ask === undefined && asvk === undefined) {
    throw new VerificationError('CERT_CHAIN_INVALID', 'root bundle has no ASK or ASVK');
  }
  return { name: 'configured', builtin: false, ark, ...(ask ? { ask } : {}), ...(asvk ? { asvk } : {}) };
}

// Configured bundles arrive as PEM text on every call; parse each once.
const bundleCache = new Map<string, AmdRootSet>();
const BUNDLE_CACHE_MAX = 16;

/** Roots from configuration: parsed sets are used as they are, PEM bundles parsed (and cached). */
export function configuredRoots(input: readonly (string | AmdRootSet)[] | undefined): AmdRootSet[] {
  if (input === undefined) return [];
  return input.map((r) => {
    if (typeof r !== 'string') return r;
    let set = bundleCache.get(r);
    if (set === undefined) {
      set = parseAmdRootBundle(r);
      if (bundleCache.size >= BUNDLE_CACHE_MAX) bundleCache.delete(bundleCache.keys().next().value!);
      bundleCache.set(r, set);
    }
    return set;
  });
}

export interface VekCertificate {
  readonly der: Buffer;
  readonly cert: X509Certificate;
  readonly publicKey: KeyObject;
  readonly commonName?: string;
  /** extnID → extnValue contents. */
  readonly extensions: ReadonlyMap<string, Uint8Array>;
}

/** Parses a VCEK or VLEK certificate (DER). */
export function parseVekCertificate(der: Uint8Array): VekCertificate {
  const bytes = Buffer.from(der);
  const { cert, fields } = parseCertificate(bytes, 'endorsement key certificate');
  return {
    der: bytes,
    cert,
    publicKey: cert.publicKey,
    ...(fields.commonName !== undefined ? { commonName: fields.commonName } : {}),
    extensions: fields.extensions,
  };
}

/** Checks that `cert` is within its validity period at `now`. */
export function checkValidity(cert: X509Certificate, now: Date, what: string): void {
  const t = now.getTime();
  if (Number.isNaN(t)) throw new RangeError('verification time is not a valid date');
  if (t < cert.validFromDate.getTime() || t > cert.validToDate.getTime()) {
    throw new VerificationError(
      'CERT_NOT_VALID_AT_TIME',
      `${what} is valid from ${cert.validFromDate.toISOString()} to ${cert.validToDate.toISOString()}, not at ${now.toISOString()}`,
    );
  }
}

export interface VekChain {
  readonly root: AmdRootSet;
  readonly issuer: X509Certificate;
}

/**
 * Finds the trusted intermediate that issued `vek` (ASK for a VCEK, ASVK for a VLEK) among
 * `roots`, and checks every certificate of the chain is valid at `now`. Built-in roots of another
 * processor generation than the report's are skipped.
 */
export function verifyVekChain(
  vek: VekCertificate,
  kind: VekKind,
  roots: readonly AmdRootSet[],
  now: Date,
  generation?: SnpGeneration,
): VekChain {
  for (const root of roots) {
    if (root.generation !== undefined && generation !== undefined && root.generation !== generation) continue;
    const issuer = kind === 'vcek' ? root.ask : root.asvk;
    if (issuer === undefined || !signedBy(vek.cert, issuer)) continue;
    const label = root.builtin ? `AMD ${root.name}` : 'configured';
    checkValidity(vek.cert, now, kind.toUpperCase());
    checkValidity(issuer, now, `${label} ${kind === 'vcek' ? 'ASK' : 'ASVK'}`);
    checkValidity(root.ark, now, `${label} ARK`);
    return { root, issuer };
  }
  const where = generation !== undefined ? ` for ${generation}` : '';
  throw new VerificationError(
    'CERT_CHAIN_INVALID',
    `${kind.toUpperCase()} is not signed by a trusted AMD ${kind === 'vcek' ? 'ASK' : 'ASVK'}${where}`,
  );
}

function tcbExtension(vek: VekCertificate, oid: string, name: string): number {
  const raw = vek.extensions.get(oid);
  if (raw === undefined) {
    throw new VerificationError(
      'CERT_MALFORMED',
      `endorsement key certificate lacks the ${name} SPL extension`,
    );
  }
  const v = decodeSmallUint(raw);
  if (v === null || v > 255) {
    throw new VerificationError(
      'CERT_MALFORMED',
      `endorsement key certificate ${name} SPL is not an integer 0-255`,
    );
  }
  return v;
}

/** The TCB a VCEK/VLEK certifies, from its extensions; `fmc` only when `withFmc`. */
export function vekTcb(vek: VekCertificate, withFmc: boolean): TcbVersion {
  return {
    bootloader: tcbExtension(vek, OID_BL_SPL, 'boot loader'),
    tee: tcbExtension(vek, OID_TEE_SPL, 'TEE'),
    snp: tcbExtension(vek, OID_SNP_SPL, 'SNP'),
    microcode: tcbExtension(vek, OID_UCODE_SPL, 'microcode'),
    ...(withFmc ? { fmc: tcbExtension(vek, OID_FMC_SPL, 'FMC') } : {}),
  };
}

/**
 * The VCEK's hardware ID: 64 bytes, or 8 on Turin. Older VCEKs hold the raw bytes, newer ones a
 * DER OCTET STRING.
 */
export function vcekHwid(vek: VekCertificate): Uint8Array | undefined {
  const raw = vek.extensions.get(OID_HWID);
  if (raw === undefined) return undefined;
  if (raw.length === 64) return raw;
  const inner = decodeOctetString(raw);
  const id = inner ?? raw;
  if (id.length !== 64 && id.length !== 8) {
    throw new VerificationError('CERT_MALFORMED', 'VCEK hardware ID extension is neither 64 nor 8 bytes');
  }
  return id;
}

/**
 * Checks the report's REPORTED_TCB against the TCB the endorsement key was derived for (and its
 * FMC on Turin), and that a VCEK belongs to the report's chip. A masked chip ID (all zero) cannot
 * be compared and is let through, since the signature already binds the key to the report.
 */
export function verifyReportTcb(report: SnpReport, vek: VekCertificate, kind: VekKind): void {
  const withFmc = report.tcbLayout === 'turin';
  const certified = vekTcb(vek, withFmc);
  const reported = report.reportedTcb;
  const fields: [keyof TcbVersion, string][] = [
    ['microcode', 'microcode'],
    ['snp', 'SNP'],
    ['tee', 'TEE'],
    ['bootloader', 'boot loader'],
    ...(withFmc ? ([['fmc', 'FMC']] as [keyof TcbVersion, string][]) : []),
  ];
  for (const [k, name] of fields) {
    if (certified[k] !== reported[k]) {
      throw new VerificationError(
        'TCB_MISMATCH',
        `reported TCB ${name} SVN ${reported[k]} differs from the endorsement key's ${certified[k]}`,
      );
    }
  }
  if (kind !== 'vcek' || isZero(report.chipId)) return;
  const hwid = vcekHwid(vek);
  if (hwid === undefined)
    throw new VerificationError('CERT_MALFORMED', 'VCEK lacks the hardware ID extension');
  const chip = hwid.length === 8 ? report.chipId.subarray(0, 8) : report.chipId;
  if (!chip.equals(hwid)) {
    throw new VerificationError('CHIP_ID_MISMATCH', "the VCEK was issued for another chip than the report's");
  }
}
