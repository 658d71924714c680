// The az-tdx-vtpm evidence shapes (trustee deps/verifier/src/az_tdx_vtpm/compat.rs), tried in
// serde's untagged order: version 2, version 1, then the unversioned v0.
//
//   v1/v2 {"version":1|2, "tpm_quote":{"signature":hex,"message":hex,"pcrs":[hex]},
//          "hcl_report":base64url, "td_quote":base64url}
//   v0    {"tpm_quote":{"signature":[u8],"message":[u8],"pcrs":[[u8;32]]}, "hcl_report":[u8],
//          "td_quote":[u8]}
//
// v2 also promises that the HCL runtime claims' user-data holds the report data.
import {
  MAX_QUOTE_MESSAGE_BYTES,
  MAX_QUOTE_SIGNATURE_BYTES,
  parseHexTpmQuote,
  type TpmQuoteEvidence,
} from '../az-snp-vtpm/evidence.js';
import { MAX_HCL_REPORT_BYTES } from '../az-snp-vtpm/hcl.js';
import { VerificationError } from '../errors.js';
import {
  arrayMember,
  base64UrlMember,
  byteArray,
  byteArrayMember,
  type EvidenceObject,
  evidenceObject,
  member,
  objectMember,
  stringMember,
} from '../evidence.js';
import { MAX_QUOTE_BYTES } from '../tdx/quote.js';
import { MAX_PCRS, PCR_SIZE } from '../tpm/quote.js';

const b64Chars = (bytes: number) => Math.ceil(bytes / 3) * 4;

export interface AzTdxVtpmEvidence {
  readonly version: 0 | 1 | 2;
  readonly tpmQuote: TpmQuoteEvidence;
  readonly hclReport: Buffer;
  readonly tdQuote: Buffer;
}

function parseV1(obj: EvidenceObject, version: 1 | 2): AzTdxVtpmEvidence {
  return {
    version,
    tpmQuote: parseHexTpmQuote(objectMember(obj, 'tpm_quote')),
    hclReport: base64UrlMember('hcl_report', stringMember(obj, 'hcl_report', b64Chars(MAX_HCL_REPORT_BYTES))),
    tdQuote: base64UrlMember('td_quote', stringMember(obj, 'td_quote', b64Chars(MAX_QUOTE_BYTES))),
  };
}

function parseV0(obj: EvidenceObject): AzTdxVtpmEvidence {
  const quote = objectMember(obj, 'tpm_quote');
  return {
    version: 0,
    tpmQuote: {
      signature: byteArrayMember(quote, 'signature', { maxLength: MAX_QUOTE_SIGNATURE_BYTES }),
      message: byteArrayMember(quote, 'message', { maxLength: MAX_QUOTE_MESSAGE_BYTES }),
      pcrs: arrayMember(quote, 'pcrs', MAX_PCRS).map((p) => byteArray(p, 'pcrs', { length: PCR_SIZE })),
    },
    hclReport: byteArrayMember(obj, 'hcl_report', { maxLength: MAX_HCL_REPORT_BYTES }),
    tdQuote: byteArrayMember(obj, 'td_quote', { maxLength: MAX_QUOTE_BYTES }),
  };
}

export function parseAzTdxVtpmEvidence(evidence: unknown): AzTdxVtpmEvidence {
  const obj = evidenceObject(evidence, 'az-tdx-vtpm');
  const version = member(obj, 'version');
  if (version === 1 || version === 2) return parseV1(obj, version);
  if (version !== undefined) {
    throw new VerificationError(
      'UNSUPPORTED_VERSION',
      'az-tdx-vtpm evidence version must be 1 or 2 (or absent for v0)',
    );
  }
  return parseV0(obj);
}
