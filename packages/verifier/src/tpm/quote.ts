// TPM quote checks shared by the `tpm`, `az-snp-vtpm` (and later `az-tdx-vtpm`) verifiers: the
// attestation key signed the TPMS_ATTEST, the PCR values sent hash to its pcrDigest, and its
// extraData carries the nonce.
import { constants, createHash, type KeyObject, verify } from 'node:crypto';
import { pcr8FromInitDataDigest } from '@broker/protocol';
import { parseAttest, TPM_ALG, TpmParseError, type TpmsAttest } from '@broker/tpm';
import { VerificationError } from '../errors.js';

/** The quotes verified here are over SHA-256 PCRs, as Azure's vTPM and the AA's tpm attester take them. */
export const PCR_SIZE = 32;
/** TPM2_PCR_SELECT_MAX allows 32 PCRs per bank. */
export const MAX_PCRS = 32;
/** The PCR where the AA measures the initdata digest. */
export const INITDATA_PCR = 8;

/** Parses the quote message (TPMS_ATTEST of type quote); a malformed one is REPORT_MALFORMED. */
export function parseQuoteMessage(message: Uint8Array): TpmsAttest {
  try {
    return parseAttest(message);
  } catch (e) {
    if (e instanceof TpmParseError) {
      throw new VerificationError('REPORT_MALFORMED', `TPM quote message: ${e.message}`, { cause: e });
    }
    throw e;
  }
}

/**
 * Checks an RSASSA-PKCS1-v1_5 / SHA-256 signature (raw, modulus-sized) by `akKey` over the quote
 * message, as az-cvm-vtpm's Quote::verify_signature does.
 */
export function verifyQuoteSignature(akKey: KeyObject, message: Uint8Array, signature: Uint8Array): void {
  if (akKey.asymmetricKeyType !== 'rsa') {
    throw new VerificationError('AK_INVALID', `the attestation key is ${akKey.asymmetricKeyType}, not RSA`);
  }
  let ok = false;
  try {
    ok = verify('sha256', message, { key: akKey, padding: constants.RSA_PKCS1_PADDING }, signature);
  } catch {
    ok = false;
  }
  if (!ok)
    throw new VerificationError('QUOTE_SIGNATURE_INVALID', 'TPM quote is not signed by the attestation key');
}

/**
 * Checks the PCR values sent against the quote: the quote must select one SHA-256 bank, the list
 * must hold exactly the selected PCRs (ascending), and SHA-256 over them must be the quote's
 * pcrDigest. Returns PCR index → value.
 *
 * Upstream hashes whatever list is sent and numbers it from 0; with the full selection both agree.
 * Numbering by the selection keeps a partial quote from labelling PCRs with the wrong indices.
 */
export function checkQuotePcrs(attest: TpmsAttest, pcrs: readonly Uint8Array[]): Map<number, Buffer> {
  const selection = attest.attested.pcrSelect.filter((s) => s.pcrs.length > 0);
  if (selection.length !== 1 || selection[0]!.hashAlg !== TPM_ALG.SHA256) {
    throw new VerificationError(
      'PCR_DIGEST_MISMATCH',
      'TPM quote does not select exactly one SHA-256 PCR bank',
    );
  }
  const indices = [...new Set(selection[0]!.pcrs)].sort((a, b) => a - b);
  if (indices.length !== pcrs.length) {
    throw new VerificationError(
      'PCR_DIGEST_MISMATCH',
      `the evidence lists ${pcrs.length} PCR values but the quote selects ${indices.length}`,
    );
  }
  const h = createHash('sha256');
  const out = new Map<number, Buffer>();
  pcrs.forEach((v, i) => {
    if (v.length !== PCR_SIZE) {
      throw new VerificationError(
        'EVIDENCE_MALFORMED',
        `PCR value ${i} is ${v.length} bytes, not ${PCR_SIZE}`,
      );
    }
    h.update(v);
    out.set(indices[i]!, Buffer.from(v));
  });
  if (!h.digest().equals(attest.attested.pcrDigest)) {
    throw new VerificationError(
      'PCR_DIGEST_MISMATCH',
      "the PCR values do not hash to the quote's PCR digest",
    );
  }
  return out;
}

/** PCR8 must be SHA-256(32 zero bytes ‖ initdata digest): the AA's single extend of a fresh PCR. */
export function checkInitDataPcr(
  pcrs: ReadonlyMap<number, Buffer>,
  initDataHash: Uint8Array | undefined,
): void {
  if (initDataHash === undefined) return;
  if (initDataHash.length !== 32) {
    throw new VerificationError(
      'INIT_DATA_MISMATCH',
      `PCR${INITDATA_PCR} binding needs a SHA-256 initdata digest, got ${initDataHash.length} bytes`,
    );
  }
  const pcr = pcrs.get(INITDATA_PCR);
  if (pcr === undefined) {
    throw new VerificationError('INIT_DATA_MISMATCH', `the quote does not cover PCR${INITDATA_PCR}`);
  }
  if (!pcr.equals(pcr8FromInitDataDigest(initDataHash))) {
    throw new VerificationError(
      'INIT_DATA_MISMATCH',
      `PCR${INITDATA_PCR} does not hold the expected initdata digest`,
    );
  }
}

/** `pcr00`…`pcr23` (by index) → lowercase hex, as upstream names them. */
export function pcrClaims(pcrs: ReadonlyMap<number, Buffer>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [i, v] of [...pcrs].sort((a, b) => a[0] - b[0]))
    out[`pcr${String(i).padStart(2, '0')}`] = v.toString('hex');
  return out;
}
