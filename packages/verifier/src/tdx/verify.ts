// DCAP verification of a TDX quote, offline: the steps Intel's quote verification library takes,
// with the collateral supplied by configuration instead of fetched.
//
//  1. parse the quote (v4/v5, TDX, ECDSA P-256, QE report certification data, PEM PCK chain);
//  2. the PCK chain: leaf ← PCK CA ← a trusted SGX root (Intel's, or a configured test root),
//     every certificate valid at the verification time;
//  3. the QE report is signed by the PCK leaf key;
//  4. the QE report binds the attestation key: REPORT_DATA = SHA-256(key ‖ QE auth data) ‖ 0³²;
//  5. the quote (header and TD report body) is signed by the attestation key;
//  6. the collateral: QE identity and TCB info signed by a TCB signing certificate that chains
//     to a trusted root; the QE matches the QE identity; the TCB info for the PCK's FMSPC rates
//     the platform (tcb.ts). Collateral past its nextUpdate still counts but sets
//     `collateral_expiration_status` to "1", as the library does.
import { createHash, type X509Certificate } from 'node:crypto';
import { VerificationError } from '../errors.js';
import {
  type ParsedCollateral,
  parseCollateral,
  type QeIdentity,
  type SignedDocument,
  type TdxCollateralConfig,
  type TdxTcbInfo,
  verifyCollateralSignature,
} from './collateral.js';
import type { IntelCollateralSource } from './collateral-service.js';
import { type Crl, checkCrl, isRevoked } from './crl.js';
import { type PckChain, parsePckChain } from './pck.js';
import { INTEL_QE_VENDOR_ID, parseTdxQuote, type TdxQuote } from './quote.js';
import { evaluateQe, evaluateTcb, type TcbEvaluation } from './tcb.js';
import { p256Key, rootKeyId, type SgxRoot, trustedSgxRoots, verifyChain, verifyP256 } from './trust.js';

/** `tdx` / `az-tdx-vtpm` verifier settings. */
export interface TdxVerifierOptions {
  /** Intel collateral for the TCB status, configured offline; it wins over `collateralService`. */
  readonly collateral?: TdxCollateralConfig;
  /**
   * Where to fetch collateral for each quote (trustee's `dcap_verifier.collateral_service`: Intel's
   * PCS, a PCCS, or the PCS Client Tool's file). Without it and `collateral`, verification fails
   * with COLLATERAL_UNAVAILABLE. Share one object across verifications: it holds the cache.
   */
  readonly collateralService?: IntelCollateralSource;
  /**
   * SGX roots trusted besides Intel's (PEM, self-signed), e.g. the mock TEE's test root. Leave
   * unset in production.
   */
  readonly trustedSgxRoots?: readonly string[];
}

export interface VerifiedTdxQuote {
  readonly quote: TdxQuote;
  readonly pck: PckChain;
  readonly root: SgxRoot;
  readonly tcb: TcbEvaluation;
  /** trustee's claims from the quote verification library's supplemental data. */
  readonly collateralClaims: Record<string, unknown>;
}

const rfc3339 = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, 'Z');

/** Steps 1-5: everything that does not need collateral. */
export function verifyQuoteSignatures(
  bytes: Uint8Array,
  roots: readonly SgxRoot[],
  now: Date,
): { quote: TdxQuote; pck: PckChain; root: SgxRoot } {
  const quote = parseTdxQuote(bytes);
  if (!quote.header.vendorId.equals(INTEL_QE_VENDOR_ID)) {
    throw new VerificationError('UNSUPPORTED_VERSION', "TDX quote QE vendor id is not Intel's");
  }
  const pck = parsePckChain(quote.pckChain);
  const root = verifyChain(pck.leaf, pck.intermediate, roots, now, 'PCK certificate');
  if (!verifyP256(pck.leaf.publicKey, quote.qeReport.raw, quote.qeReportSignature)) {
    throw new VerificationError('REPORT_SIGNATURE_INVALID', 'QE report is not signed by the PCK certificate');
  }
  const binding = createHash('sha256').update(quote.attestationKey).update(quote.qeAuthData).digest();
  const rd = quote.qeReport.reportData;
  if (!rd.subarray(0, 32).equals(binding) || rd.subarray(32).some((b) => b !== 0)) {
    throw new VerificationError(
      'REPORT_SIGNATURE_INVALID',
      'QE report data is not SHA-256(attestation key ‖ QE authentication data): the QE does not vouch for the key',
    );
  }
  if (!verifyP256(p256Key(quote.attestationKey), quote.signedData, quote.signature)) {
    throw new VerificationError('REPORT_SIGNATURE_INVALID', 'TDX quote is not signed by its attestation key');
  }
  return { quote, pck, root };
}

function collateralClaims(
  pck: PckChain,
  root: SgxRoot,
  tcb: TcbEvaluation,
  info: TdxTcbInfo,
  identity: QeIdentity,
  signers: readonly X509Certificate[],
  now: Date,
  collateral: ParsedCollateral,
): Record<string, unknown> {
  const certs = [pck.leaf, pck.intermediate, root.cert, ...signers];
  const crls = [collateral.pckCrl, collateral.rootCaCrl].filter((c): c is Crl => c !== undefined);
  const issued = [
    ...certs.map((c) => c.validFromDate),
    info.issueDate,
    identity.issueDate,
    ...crls.map((c) => c.thisUpdate),
  ];
  const expiring = [
    ...certs.map((c) => c.validToDate),
    info.nextUpdate,
    identity.nextUpdate,
    ...crls.flatMap((c) => (c.nextUpdate !== undefined ? [c.nextUpdate] : [])),
  ];
  const min = (ds: Date[]) => new Date(Math.min(...ds.map((d) => d.getTime())));
  const max = (ds: Date[]) => new Date(Math.max(...ds.map((d) => d.getTime())));
  const earliestExpiration = min(expiring);
  const p = pck.platform;
  const sgxType = ['Standard', 'Scalable', 'Scalable with Integrity'][p.sgxType] ?? `Unknown (${p.sgxType})`;
  return {
    earliest_issue_date: rfc3339(min(issued)),
    latest_issue_date: rfc3339(max(issued)),
    earliest_expiration_date: rfc3339(earliestExpiration),
    tcb_date: rfc3339(new Date(tcb.tcbDate)),
    tcb_eval_num: Math.min(info.tcbEvaluationDataNumber, identity.tcbEvaluationDataNumber),
    ...(collateral.pckCrl?.crlNumber !== undefined ? { pck_crl_num: collateral.pckCrl.crlNumber } : {}),
    ...(collateral.rootCaCrl?.crlNumber !== undefined
      ? { root_ca_crl_num: collateral.rootCaCrl.crlNumber }
      : {}),
    platform_provider_id: p.ppid.toString('hex'),
    sgx_type: sgxType,
    ...(p.sgxType > 0 && p.dynamicPlatform !== undefined
      ? { is_dynamic_platform: p.dynamicPlatform, is_cached_keys: p.cachedKeys, is_smt_enabled: p.smtEnabled }
      : {}),
    root_key_id: rootKeyId(root.cert),
    tcb_status: tcb.status,
    collateral_expiration_status: now.getTime() > earliestExpiration.getTime() ? '1' : '0',
    advisory_ids: [...tcb.advisoryIds],
    // What DCAP's quote verification library reports from supplemental data minor version 5 on.
    tcb_date_current: rfc3339(new Date(tcb.current.tcbDate)),
    tcb_status_current: tcb.current.status,
    advisory_ids_current: [...tcb.current.advisoryIds],
  };
}

/**
 * Revocation, when CRLs are configured: the root's CRL must not list the PCK CA or a collateral
 * signer, the PCK CA's CRL must not list the PCK. Each CRL must be signed by its issuer.
 */
function checkRevocation(
  collateral: ParsedCollateral,
  pck: PckChain,
  root: SgxRoot,
  signers: readonly X509Certificate[],
  now: Date,
): void {
  const revoked = (what: string) => new VerificationError('CERT_REVOKED', `${what} is revoked`);
  if (collateral.rootCaCrl !== undefined) {
    checkCrl(collateral.rootCaCrl, root.cert, now, 'root CA CRL');
    if (isRevoked(collateral.rootCaCrl, pck.intermediate)) throw revoked('the PCK CA certificate');
    for (const s of signers)
      if (isRevoked(collateral.rootCaCrl, s)) throw revoked('the collateral signing certificate');
  }
  if (collateral.pckCrl !== undefined) {
    checkCrl(collateral.pckCrl, pck.intermediate, now, 'PCK CRL');
    if (isRevoked(collateral.pckCrl, pck.leaf)) throw revoked('the PCK certificate');
  }
}

/** Step 6 for a quote that passed steps 1-5. */
export function evaluateCollateral(
  quote: TdxQuote,
  pck: PckChain,
  root: SgxRoot,
  collateral: ParsedCollateral,
  roots: readonly SgxRoot[],
  now: Date,
): { tcb: TcbEvaluation; claims: Record<string, unknown> } {
  const identity = collateral.qeIdentity;
  const qeSigner = verifyCollateralSignature(identity, collateral.signers, roots, now, 'QE identity');
  if (identity.body.issueDate.getTime() > now.getTime()) {
    throw new VerificationError('COLLATERAL_INVALID', 'QE identity was issued after the verification time');
  }
  const qeLevel = evaluateQe(quote.qeReport, identity.body);
  const fmspc = pck.platform.fmspc;
  const info: SignedDocument<TdxTcbInfo> | undefined = collateral.tcbInfos.find((t) =>
    t.body.fmspc.equals(fmspc),
  );
  if (info === undefined) {
    const have =
      collateral.tcbInfos.map((t) => t.body.fmspc.toString('hex').toUpperCase()).join(', ') || 'none';
    throw new VerificationError(
      'COLLATERAL_MISMATCH',
      `no TCB info for the PCK's FMSPC ${fmspc.toString('hex').toUpperCase()} (configured: ${have})`,
    );
  }
  const tcbSigner = verifyCollateralSignature(info, collateral.signers, roots, now, 'TCB info');
  if (info.body.issueDate.getTime() > now.getTime()) {
    throw new VerificationError('COLLATERAL_INVALID', 'TCB info was issued after the verification time');
  }
  const tcb = evaluateTcb(pck.platform, quote.body, qeLevel, info.body);
  const signers = qeSigner === tcbSigner ? [qeSigner] : [qeSigner, tcbSigner];
  checkRevocation(collateral, pck, root, signers, now);
  const claims = collateralClaims(pck, root, tcb, info.body, identity.body, signers, now, collateral);
  return { tcb, claims };
}

/** Step 6 from the configured collateral, for a quote that passed steps 1-5. */
export function establishTcb(
  signed: { readonly quote: TdxQuote; readonly pck: PckChain; readonly root: SgxRoot },
  options: TdxVerifierOptions,
  now: Date,
): VerifiedTdxQuote {
  if (options.collateral === undefined) {
    throw new VerificationError(
      'COLLATERAL_UNAVAILABLE',
      'no TDX collateral (TCB info and QE identity) is configured: the TCB status cannot be established',
    );
  }
  const roots = trustedSgxRoots(options.trustedSgxRoots);
  const collateral = parseCollateral(options.collateral);
  const { tcb, claims } = evaluateCollateral(signed.quote, signed.pck, signed.root, collateral, roots, now);
  return { ...signed, tcb, collateralClaims: claims };
}

/**
 * Step 6 with the configured collateral or, when there is none, collateral fetched from
 * `options.collateralService` for the PCK's FMSPC and CA.
 */
export async function establishTcbOnline(
  signed: { readonly quote: TdxQuote; readonly pck: PckChain; readonly root: SgxRoot },
  options: TdxVerifierOptions,
  now: Date,
): Promise<VerifiedTdxQuote> {
  const service = options.collateralService;
  if (options.collateral !== undefined || service === undefined) return establishTcb(signed, options, now);
  const roots = trustedSgxRoots(options.trustedSgxRoots);
  const collateral = await service.collateralFor({
    fmspc: signed.pck.platform.fmspc,
    pckCa: signed.pck.platform.platformCa ? 'platform' : 'processor',
    roots,
    now,
  });
  const { tcb, claims } = evaluateCollateral(signed.quote, signed.pck, signed.root, collateral, roots, now);
  return { ...signed, tcb, collateralClaims: claims };
}

/** The whole DCAP verification (steps 1-6). */
export function verifyTdxQuote(bytes: Uint8Array, options: TdxVerifierOptions, now: Date): VerifiedTdxQuote {
  if (Number.isNaN(now.getTime())) throw new RangeError('verification time is not a valid date');
  const signed = verifyQuoteSignatures(bytes, trustedSgxRoots(options.trustedSgxRoots), now);
  return establishTcb(signed, options, now);
}
