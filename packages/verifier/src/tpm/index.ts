// A plain TPM 2.0 (trustee's `tpm` verifier): the quote is checked against the attestation key
// the evidence itself carries. Nothing vouches for that key here: a policy must compare the
// `ak_public` claim with trusted keys (the `trusted_aks` reference value).
import { createPublicKey, type KeyObject } from 'node:crypto';
import { parseSignature, TPM_ALG, TpmParseError, type TpmtSignature } from '@broker/tpm';
import { VerificationError } from '../errors.js';
import {
  arrayMember,
  base64StdMember,
  evidenceObject,
  hexMember,
  objectMember,
  stringMember,
} from '../evidence.js';
import { type ExpectedData, reportDataExpected, type Verifier, type VerifierResult } from '../verifier.js';
import {
  checkInitDataPcr,
  checkQuotePcrs,
  INITDATA_PCR,
  MAX_PCRS,
  PCR_SIZE,
  parseQuoteMessage,
  pcrClaims,
  verifyQuoteSignature,
} from './quote.js';

/** The AA's tpm attester puts the report data, resized to this, in the quote's qualifying data. */
export const TPM_REPORT_DATA_SIZE = 32;
/** DER SPKI of an RSA-4096 key is about 550 bytes. */
const MAX_AK_PUBLIC_CHARS = 4096;
const MAX_SIGNATURE_CHARS = 1024;
const MAX_MESSAGE_CHARS = 4096;

/** `pcr00`… (hex), `init_data` (hex PCR8), `report_data` (hex nonce) and the AK as sent. */
export type TpmClaims = Record<string, string> & {
  report_data: string;
  /** Base64 DER SubjectPublicKeyInfo, exactly as the evidence carried it: compare with `trusted_aks`. */
  ak_public: string;
  init_data?: string;
};

function akKey(akPublic: string): KeyObject {
  const der = base64StdMember('ak_public', akPublic);
  try {
    return createPublicKey({ key: der, format: 'der', type: 'spki' });
  } catch (e) {
    throw new VerificationError('AK_INVALID', 'ak_public is not a DER SubjectPublicKeyInfo', { cause: e });
  }
}

function tpmSignature(bytes: Buffer): TpmtSignature {
  try {
    return parseSignature(bytes);
  } catch (e) {
    if (e instanceof TpmParseError) {
      throw new VerificationError('REPORT_MALFORMED', `TPM quote signature: ${e.message}`, { cause: e });
    }
    throw e;
  }
}

export class TpmVerifier implements Verifier {
  readonly tee = 'tpm' as const;

  async evaluate(evidence: unknown, expected: ExpectedData): Promise<VerifierResult[]> {
    const obj = evidenceObject(evidence, 'tpm');
    const akPublic = stringMember(obj, 'ak_public', MAX_AK_PUBLIC_CHARS);
    const quote = objectMember(obj, 'tpm_quote');
    const signature = tpmSignature(
      base64StdMember('signature', stringMember(quote, 'signature', MAX_SIGNATURE_CHARS)),
    );
    const message = base64StdMember('message', stringMember(quote, 'message', MAX_MESSAGE_CHARS));
    const pcrs = arrayMember(quote, 'pcrs', MAX_PCRS).map((p, i) => {
      if (typeof p !== 'string' || p.length !== 2 * PCR_SIZE) {
        throw new VerificationError(
          'EVIDENCE_MALFORMED',
          `PCR value ${i} must be ${2 * PCR_SIZE} hex characters`,
        );
      }
      return hexMember('pcrs', p);
    });

    // The attester signs with RSASSA and SHA-256 (trustee accepts nothing else).
    if (signature.sigAlg !== TPM_ALG.RSASSA || signature.hash !== TPM_ALG.SHA256) {
      throw new VerificationError('UNSUPPORTED_ALGORITHM', 'TPM quote signature is not RSASSA with SHA-256');
    }
    verifyQuoteSignature(akKey(akPublic), message, signature.sig);
    const attest = parseQuoteMessage(message);
    const pcrMap = checkQuotePcrs(attest, pcrs);

    const padded = Buffer.alloc(TPM_REPORT_DATA_SIZE);
    padded.set(expected.reportData.subarray(0, TPM_REPORT_DATA_SIZE));
    const nonce = Buffer.from(attest.extraData);
    if (reportDataExpected(expected) && !nonce.equals(padded)) {
      throw new VerificationError(
        'REPORT_DATA_MISMATCH',
        'TPM quote nonce differs from the expected report data',
      );
    }
    checkInitDataPcr(pcrMap, expected.initDataHash);

    const pcr8 = pcrMap.get(INITDATA_PCR);
    const claims: TpmClaims = {
      ...(pcr8 !== undefined ? { init_data: pcr8.toString('hex') } : {}),
      report_data: nonce.toString('hex'),
      ak_public: akPublic,
      ...pcrClaims(pcrMap),
    };
    return [{ claims, class: 'cpu' }];
  }
}
