// The az-snp-vtpm evidence shapes (trustee deps/verifier/src/az_snp_vtpm/compat.rs), read like
// serde's untagged enum tries them: version 2, then 1, then the unversioned v0.
//
//   v1/v2 {"version":1|2, "tpm_quote":{"signature":hex,"message":hex,"pcrs":[hex]},
//          "hcl_report":base64url, "vcek":base64url(DER)}
//   v0    {"quote":{"signature":[u8],"message":[u8],"pcrs":[[u8;32]]}, "report":[u8], "vcek":"PEM"}
//
// v2 is v1 plus the guarantee that the HCL runtime claims' user-data holds the report data.
import { VerificationError } from '../errors.js';
import {
  arrayMember,
  base64UrlMember,
  byteArray,
  byteArrayMember,
  type EvidenceObject,
  evidenceObject,
  hexMember,
  member,
  objectMember,
  stringMember,
} from '../evidence.js';
import { MAX_CERT_DER_BYTES, pemCertificates } from '../snp/certs.js';
import { MAX_PCRS, PCR_SIZE } from '../tpm/quote.js';
import { MAX_HCL_REPORT_BYTES } from './hcl.js';

/** RSA-4096 at most. */
export const MAX_QUOTE_SIGNATURE_BYTES = 512;
/** A quote's TPMS_ATTEST is about 150 bytes; the TPM caps TPM2B_ATTEST far below this. */
export const MAX_QUOTE_MESSAGE_BYTES = 2048;
/** Room for a PEM VCEK with its ASK and ARK (v0 sent the bundle). */
const MAX_V0_VCEK_PEM_CHARS = 32 * 1024;

const b64Chars = (bytes: number) => Math.ceil(bytes / 3) * 4;

export interface TpmQuoteEvidence {
  readonly signature: Buffer;
  readonly message: Buffer;
  readonly pcrs: readonly Buffer[];
}

export interface AzSnpVtpmEvidence {
  readonly version: 0 | 1 | 2;
  readonly tpmQuote: TpmQuoteEvidence;
  readonly hclReport: Buffer;
  /** The VCEK, DER. */
  readonly vcek: Buffer;
}

/** `tpm_quote` of v1/v2 (also the az-tdx-vtpm shape): hex members. */
export function parseHexTpmQuote(quote: EvidenceObject): TpmQuoteEvidence {
  const signature = hexMember('signature', stringMember(quote, 'signature', 2 * MAX_QUOTE_SIGNATURE_BYTES));
  const message = hexMember('message', stringMember(quote, 'message', 2 * MAX_QUOTE_MESSAGE_BYTES));
  const pcrs = arrayMember(quote, 'pcrs', MAX_PCRS).map((p, i) => {
    if (typeof p !== 'string')
      throw new VerificationError('EVIDENCE_MALFORMED', `PCR value ${i} must be a hex string`);
    // Upstream reads any length and refuses non-32-byte values later; refuse early, and long input unread.
    if (p.length > 2 * PCR_SIZE)
      throw new VerificationError('EVIDENCE_MALFORMED', `PCR value ${i} is not 32 bytes`);
    return hexMember('pcrs', p);
  });
  return { signature, message, pcrs };
}

function parseV1(obj: EvidenceObject, version: 1 | 2): AzSnpVtpmEvidence {
  const tpmQuote = parseHexTpmQuote(objectMember(obj, 'tpm_quote'));
  const hclReport = base64UrlMember(
    'hcl_report',
    stringMember(obj, 'hcl_report', b64Chars(MAX_HCL_REPORT_BYTES)),
  );
  const vcek = base64UrlMember('vcek', stringMember(obj, 'vcek', b64Chars(MAX_CERT_DER_BYTES)));
  return { version, tpmQuote, hclReport, vcek };
}

function parseV0(obj: EvidenceObject): AzSnpVtpmEvidence {
  const quote = objectMember(obj, 'quote');
  const signature = byteArrayMember(quote, 'signature', { maxLength: MAX_QUOTE_SIGNATURE_BYTES });
  const message = byteArrayMember(quote, 'message', { maxLength: MAX_QUOTE_MESSAGE_BYTES });
  const pcrs = arrayMember(quote, 'pcrs', MAX_PCRS).map((p) => byteArray(p, 'pcrs', { length: PCR_SIZE }));
  const hclReport = byteArrayMember(obj, 'report', { maxLength: MAX_HCL_REPORT_BYTES });
  const pem = stringMember(obj, 'vcek', MAX_V0_VCEK_PEM_CHARS);
  // openssl's X509::from_pem takes the first certificate of the text.
  const vcek = pemCertificates(pem, 8)[0];
  if (vcek === undefined)
    throw new VerificationError('EVIDENCE_MALFORMED', 'evidence member "vcek" holds no PEM certificate');
  return { version: 0, tpmQuote: { signature, message, pcrs }, hclReport, vcek };
}

export function parseAzSnpVtpmEvidence(evidence: unknown): AzSnpVtpmEvidence {
  const obj = evidenceObject(evidence, 'az-snp-vtpm');
  const version = member(obj, 'version');
  let versionedError: VerificationError | undefined;
  if (version === 1 || version === 2) {
    try {
      return parseV1(obj, version);
    } catch (e) {
      if (!(e instanceof VerificationError)) throw e;
      versionedError = e;
    }
  }
  // serde's untagged enum falls back to v0, which ignores `version`.
  const looksV0 = member(obj, 'quote') !== undefined || member(obj, 'report') !== undefined;
  if (versionedError !== undefined && !looksV0) throw versionedError;
  if (!looksV0 && version !== undefined) {
    throw new VerificationError(
      'UNSUPPORTED_VERSION',
      'az-snp-vtpm evidence version must be 1 or 2 (or absent for v0)',
    );
  }
  try {
    return parseV0(obj);
  } catch (e) {
    throw versionedError ?? e;
  }
}
