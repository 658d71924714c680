// trustee's `tdx` verifier: evidence `{"cc_eventlog": std-base64 | null, "quote": std-base64}`
// from the attestation agent's configfs-tsm attester. The quote passes DCAP verification with
// offline collateral (verify.ts), its REPORT_DATA must be the expected report data and its
// MR_CONFIG_ID the initdata digest (both zero-padded or cut as trustee does), and the event log,
// when sent, must replay to RTMR0..3.
import { VerificationError } from '../errors.js';
import { base64StdMember, evidenceObject, member, stringMember } from '../evidence.js';
import {
  type ExpectedData,
  regularize,
  reportDataExpected,
  type Verifier,
  type VerifierResult,
} from '../verifier.js';
import { checkRtmrReplay, type EventLogEntry, MAX_EVENT_LOG_BYTES, parseCcEventLog } from './ccel.js';
import { tdxClaims } from './claims.js';
import { MAX_QUOTE_BYTES } from './quote.js';
import { trustedSgxRoots } from './trust.js';
import { establishTcbOnline, verifyQuoteSignatures } from './verify.js';

const b64Chars = (bytes: number) => Math.ceil(bytes / 3) * 4;

export interface TdxEvidence {
  readonly quote: Buffer;
  readonly ccEventLog?: Buffer;
}

export function parseTdxEvidence(evidence: unknown): TdxEvidence {
  const obj = evidenceObject(evidence, 'tdx');
  const quoteText = stringMember(obj, 'quote', b64Chars(MAX_QUOTE_BYTES));
  if (quoteText === '') throw new VerificationError('EVIDENCE_MALFORMED', 'TDX quote is empty');
  const quote = base64StdMember('quote', quoteText);
  const el = member(obj, 'cc_eventlog');
  if (el === undefined || el === null || el === '') return { quote };
  const ccEventLog = base64StdMember(
    'cc_eventlog',
    stringMember(obj, 'cc_eventlog', b64Chars(MAX_EVENT_LOG_BYTES)),
  );
  return { quote, ccEventLog };
}

export class TdxVerifier implements Verifier {
  readonly tee = 'tdx' as const;

  async evaluate(evidence: unknown, expected: ExpectedData): Promise<VerifierResult[]> {
    const ev = parseTdxEvidence(evidence);
    const options = expected.tdx ?? {};
    const now = expected.now ?? new Date();
    // The bindings first, the collateral last: a quote that is not this session's fails as such.
    const signed = verifyQuoteSignatures(ev.quote, trustedSgxRoots(options.trustedSgxRoots), now);
    const body = signed.quote.body;
    if (reportDataExpected(expected) && !regularize(expected.reportData, 64).equals(body.reportData)) {
      throw new VerificationError(
        'REPORT_DATA_MISMATCH',
        'TDX quote REPORT_DATA differs from the expected report data',
      );
    }
    if (
      expected.initDataHash !== undefined &&
      !regularize(expected.initDataHash, 48).equals(body.mrConfigId)
    ) {
      throw new VerificationError(
        'INIT_DATA_MISMATCH',
        'TDX quote MR_CONFIG_ID differs from the initdata digest',
      );
    }
    let eventLog: readonly EventLogEntry[] | undefined;
    if (ev.ccEventLog !== undefined) {
      const log = parseCcEventLog(ev.ccEventLog);
      checkRtmrReplay(log, body.rtmrs);
      eventLog = log.entries;
    }
    const verified = await establishTcbOnline(signed, options, now);
    const claims = {
      ...tdxClaims(verified.quote, verified.pck.platform, eventLog),
      ...verified.collateralClaims,
    };
    return [{ claims, class: 'cpu' }];
  }
}
