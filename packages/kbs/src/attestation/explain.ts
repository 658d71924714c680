// One line, for the KBS log, saying why an appraisal is not affirming: the trust claims outside the
// affirming tier and, when the policy reported it, which reference values did not match. Read from
// the EAR claims of a verified token (a resource request) or from a fresh appraisal (an /attest).
import { REFERENCE_VALUES_EXTENSION } from './broker-policy.js';
import { TRUST_CLAIM_NAMES, tierOf } from './ear.js';

/** Log lines stay readable, and a token cannot make them huge. */
export const MAX_EXPLANATION_LENGTH = 4096;
const MAX_LISTED = 32;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const short = (v: unknown): string => {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s === undefined ? 'undefined' : s.length > 130 ? `${s.slice(0, 128)}…` : s;
};

/** `executables=33 (warning)` for every claim of the vector that is neither affirming nor none. */
function untrustedClaims(vector: unknown): string[] {
  if (!isObject(vector)) return [];
  const out: string[] = [];
  for (const name of TRUST_CLAIM_NAMES) {
    const v = vector[name];
    if (typeof v !== 'number' || !Number.isInteger(v)) continue;
    const tier = tierOf(v);
    if (tier === 'warning' || tier === 'contraindicated') out.push(`${name}=${v} (${tier})`);
  }
  return out;
}

/** The `broker.reference-values` report: PCRs not matched (with the evidence's value) and values not registered. */
function referenceValueFindings(report: unknown): string[] {
  if (!isObject(report)) return [];
  const out: string[] = [];
  const mismatched = report.mismatched;
  if (isObject(mismatched)) {
    const names = Object.keys(mismatched).slice(0, MAX_LISTED);
    if (names.length > 0) {
      out.push(
        `reference values not matched: ${names.map((n) => `${short(n)} (evidence ${short(mismatched[n])})`).join(', ')}`,
      );
    }
  }
  const missing = report.missing;
  if (Array.isArray(missing) && missing.length > 0) {
    out.push(`reference values not registered: ${missing.slice(0, MAX_LISTED).map(short).join(', ')}`);
  }
  return out;
}

/** Why one appraisal (a `submods` member) is not affirming: the claims, then the reference values; empty when it is. */
export function explainAppraisal(appraisal: unknown): string[] {
  if (!isObject(appraisal)) return ['no appraisal'];
  const status = appraisal['ear.status'];
  if (status === 'affirming') return [];
  const claims = untrustedClaims(appraisal['ear.trustworthiness-vector']);
  return [
    ...(claims.length > 0 ? [claims.join(', ')] : []),
    ...referenceValueFindings(appraisal[REFERENCE_VALUES_EXTENSION]),
  ];
}

/**
 * Why the token's appraisals are not all affirming, e.g. `cpu0 warning (policy default): configuration=36
 * (warning); reference values not matched: snp_pcr08 (evidence 5a…)`; undefined when every appraisal
 * is affirming (the resource policy then denied for another reason).
 */
export function explainAppraisals(claims: Record<string, unknown>): string | undefined {
  const submods = claims.submods;
  if (!isObject(submods)) return 'the token has no appraisals (submods)';
  const parts: string[] = [];
  for (const name of Object.keys(submods).sort().slice(0, MAX_LISTED)) {
    const appraisal = submods[name];
    const reasons = explainAppraisal(appraisal);
    if (isObject(appraisal) && appraisal['ear.status'] === 'affirming') continue;
    const status = isObject(appraisal) ? short(appraisal['ear.status']) : 'missing';
    const policy = isObject(appraisal) ? short(appraisal['ear.appraisal-policy-id']) : 'none';
    parts.push(
      `${short(name)} ${status} (policy ${policy})${reasons.length > 0 ? `: ${reasons.join('; ')}` : ''}`,
    );
  }
  if (parts.length === 0) return undefined;
  const text = parts.join(' | ');
  return text.length > MAX_EXPLANATION_LENGTH ? `${text.slice(0, MAX_EXPLANATION_LENGTH - 1)}…` : text;
}
