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

/**
 * The AR4SI meaning of each value a trust claim may take (draft-ietf-rats-ar4si, section on
 * trustworthiness claims), said briefly. Values every claim shares come first.
 */
const SHARED_MEANINGS: Readonly<Record<number, string>> = {
  [-1]: 'the verifier malfunctioned',
  0: 'no claim made',
  1: 'the evidence was not what the verifier expected',
  99: 'the evidence failed cryptographic validation',
};

const CLAIM_MEANINGS: Readonly<Record<string, Readonly<Record<number, string>>>> = {
  'instance-identity': {
    2: 'recognised instance, not known to be compromised',
    96: 'recognised instance, known to be compromised',
    97: 'instance not recognised',
  },
  configuration: {
    2: 'approved configuration',
    3: 'configuration with no known vulnerabilities',
    32: 'configuration with known vulnerabilities',
    36: 'security-relevant configuration not available to the verifier',
    96: 'configuration that cannot be supported',
  },
  executables: {
    2: 'only approved executables loaded at run time',
    3: 'only approved executables loaded at boot',
    32: 'approved executables, but with known vulnerabilities',
    33: 'executables not recognised',
    96: 'executables known to be contraindicated',
  },
  'file-system': {
    2: 'only approved files',
    32: 'files not recognised',
    96: 'files known to be contraindicated',
  },
  hardware: {
    2: 'genuine hardware and firmware',
    32: 'genuine hardware with known vulnerabilities',
    96: 'hardware known to be contraindicated',
    97: 'hardware or firmware not recognised',
  },
  'runtime-opaque': {
    2: 'memory encrypted and isolated',
    32: 'memory isolated but not encrypted',
    96: 'memory visible to others',
  },
  'storage-opaque': {
    2: 'secrets encrypted with hardware-bound keys',
    32: 'secrets encrypted with software keys',
    96: 'secrets stored unencrypted',
  },
  'sourced-data': {
    2: 'data from trusted sources only',
    32: 'data from sources not trusted',
    96: 'data from contraindicated sources',
  },
};

/** What `value` of trust claim `claim` means, e.g. `executables` 33 → "executables not recognised". */
export function trustClaimMeaning(claim: string, value: number): string | undefined {
  return CLAIM_MEANINGS[claim]?.[value] ?? SHARED_MEANINGS[value];
}

export interface TrustVectorRow {
  readonly claim: string;
  readonly value: number;
  readonly tier: string;
  /** The AR4SI meaning; absent for a value AR4SI does not name. */
  readonly meaning?: string;
}

/** The vector as rows of claim, value, tier and meaning, in AR4SI's claim order. */
export function trustVectorRows(vector: unknown): TrustVectorRow[] {
  if (!isObject(vector)) return [];
  const rows: TrustVectorRow[] = [];
  for (const claim of TRUST_CLAIM_NAMES) {
    const value = vector[claim];
    if (typeof value !== 'number' || !Number.isInteger(value)) continue;
    const meaning = trustClaimMeaning(claim, value);
    rows.push({ claim, value, tier: tierOf(value), ...(meaning !== undefined && { meaning }) });
  }
  return rows;
}

/** A reference value as registered when the verdict was recorded, for the words below. */
export interface RegisteredReferenceValue {
  readonly value?: unknown;
  readonly expiration?: string;
  readonly expired?: boolean;
}

/**
 * One missed reference value in words: "`snp_pcr08`: measured 3f…, reference values: none (expired
 * 2026-11-30)". `evidence` is the measured value (absent when the policy only reported the name
 * missing); `registered` what the RVPS held (undefined: nothing, or not known).
 */
export function describeReferenceValue(
  name: string,
  evidence: unknown,
  registered: RegisteredReferenceValue | undefined,
): string {
  const measured = evidence === undefined ? '' : `measured ${shortHex(evidence)}, `;
  let rv: string;
  if (registered === undefined) rv = 'none (not registered)';
  else if (registered.expired === true) {
    rv = `none (expired ${registered.expiration?.slice(0, 10) ?? 'at an unknown date'})`;
  } else rv = short(registered.value);
  return `\`${short(name)}\`: ${measured}reference values: ${rv}`;
}

/** A digest cut to its first 12 characters (`3f9a…`); other values as `short`. */
function shortHex(v: unknown): string {
  if (typeof v === 'string' && /^[0-9a-fA-F]{17,}$/.test(v)) return `${v.slice(0, 12)}…`;
  return short(v);
}
