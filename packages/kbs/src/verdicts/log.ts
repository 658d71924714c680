// The verdict log: the last N attestations and resource requests, for the operator console and
// `GET /kbs/v0/admin/verdicts`; in memory here, in Redis with redis-log.ts. Entries are built from
// scrubbed claims only (see scrub.ts).
import {
  explainAppraisal,
  REFERENCE_VALUES_EXTENSION,
  type TrustVectorRow,
  trustVectorRows,
} from '@broker/attestation';

export const DEFAULT_VERDICT_LOG_SIZE = 1000;
/** A scrubbed claims tree larger than this (JSON) is not kept; the summary still is. */
export const MAX_KEPT_CLAIMS_BYTES = 64 * 1024;
const MAX_LISTED_APPRAISALS = 16;
const MAX_REFERENCE_NAMES = 32;

export type EarStatus = 'affirming' | 'warning' | 'contraindicated' | 'none';

export interface AppraisalSummary {
  readonly name: string;
  readonly status: string;
  readonly trustVector: Record<string, unknown>;
  /** The trust vector as rows of claim, value, tier and AR4SI meaning. */
  readonly vector?: readonly TrustVectorRow[];
  readonly policyId: string;
  /** The version (SHA-256 of the text) of the attestation policy that appraised it, when known. */
  readonly policyVersion?: string;
  /**
   * Why it is not affirming, in words: each claim outside the affirming tier with its meaning, each
   * missed reference value with what was measured and what was registered.
   */
  readonly why?: readonly string[];
  /** Why it is not affirming: claims outside the affirming tier, reference values not matched. */
  readonly failing: readonly string[];
  /** Reference values not matched: the evidence's value and the registered one(s). */
  readonly referenceValues?: Readonly<
    Record<string, { evidence: unknown; expected?: unknown; expiration?: string; expired?: boolean }>
  >;
  /** Reference values the policy looked for but that are not registered. */
  readonly missingReferenceValues?: readonly string[];
}

interface Common {
  readonly id: number;
  readonly time: string;
  readonly tee?: string;
  /** The first 8 characters of the session id. */
  readonly session?: string;
  readonly source?: string;
  /** The id of the HTTP request that led to it (`x-request-id`), as in the KBS's access log. */
  readonly requestId?: string;
  readonly claims?: unknown;
  readonly reason?: string;
}

export interface AttestationVerdict extends Common {
  readonly kind: 'attestation';
  /** The worst EAR status of the appraisals, or `failed` when the evidence was not verified. */
  readonly status: EarStatus | 'failed';
  readonly policyIds: readonly string[];
  readonly appraisals: readonly AppraisalSummary[];
}

export interface ResourceVerdict extends Common {
  readonly kind: 'resource';
  readonly status: 'allowed' | 'denied' | 'error';
  readonly method: string;
  readonly resource: string;
  /** The version (SHA-256 of the text) of the resource policy that decided. */
  readonly policyVersion?: string;
}

export type Verdict = AttestationVerdict | ResourceVerdict;
export type NewVerdict = Omit<AttestationVerdict, 'id' | 'time'> | Omit<ResourceVerdict, 'id' | 'time'>;

export interface VerdictQuery {
  readonly status?: string;
  readonly tee?: string;
  readonly kind?: string;
  /** The `x-request-id` of the request that led to it. */
  readonly requestId?: string;
  readonly limit?: number;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const RANK: Record<string, number> = { affirming: 0, none: 1, warning: 2, contraindicated: 3 };

/** The appraisals of (scrubbed) EAR claims, as the log shows them. */
export function summarizeAppraisals(claims: unknown): AppraisalSummary[] {
  const submods = isObject(claims) ? claims.submods : undefined;
  if (!isObject(submods)) return [];
  return Object.keys(submods)
    .sort()
    .slice(0, MAX_LISTED_APPRAISALS)
    .map((name) => {
      const a = submods[name];
      const o = isObject(a) ? a : {};
      const report = o[REFERENCE_VALUES_EXTENSION];
      const mismatched = isObject(report) && isObject(report.mismatched) ? report.mismatched : undefined;
      const missing = isObject(report) && Array.isArray(report.missing) ? report.missing : undefined;
      const vector = trustVectorRows(o['ear.trustworthiness-vector']);
      return {
        name,
        status: typeof o['ear.status'] === 'string' ? o['ear.status'] : 'missing',
        trustVector: isObject(o['ear.trustworthiness-vector']) ? o['ear.trustworthiness-vector'] : {},
        ...(vector.length > 0 && { vector }),
        policyId: typeof o['ear.appraisal-policy-id'] === 'string' ? o['ear.appraisal-policy-id'] : '',
        failing: explainAppraisal(a),
        ...(mismatched !== undefined && {
          referenceValues: Object.fromEntries(
            Object.keys(mismatched)
              .slice(0, MAX_REFERENCE_NAMES)
              .map((n) => [n, { evidence: mismatched[n] }]),
          ),
        }),
        ...(missing !== undefined && {
          missingReferenceValues: missing.slice(0, MAX_REFERENCE_NAMES).map(String),
        }),
      };
    });
}

/** The worst status among the appraisals; `none` when there is none. */
export function overallStatus(appraisals: readonly AppraisalSummary[]): EarStatus {
  let worst: EarStatus = appraisals.length === 0 ? 'none' : 'affirming';
  for (const a of appraisals) {
    const s = (a.status in RANK ? a.status : 'contraindicated') as EarStatus;
    if ((RANK[s] ?? 3) > (RANK[worst] ?? 0)) worst = s;
  }
  return worst;
}

/** Claims kept only when small enough. */
export function keptClaims(claims: unknown): unknown {
  const json = JSON.stringify(claims);
  return json !== undefined && json.length <= MAX_KEPT_CLAIMS_BYTES ? claims : undefined;
}

/** Where verdicts are kept: recording never waits (it is on the request path), reading may. */
export interface VerdictStore {
  /** How many verdicts are kept. */
  readonly size: number;
  /** `Memory` (this process's), `Redis` or `Postgres` (every replica's). */
  readonly backend: 'Memory' | 'Redis' | 'Postgres';
  record(v: NewVerdict): void;
  get(id: number): Promise<Verdict | undefined>;
  /** Newest first. */
  list(q?: VerdictQuery): Promise<Verdict[]>;
  /** Resolves once every verdict recorded so far is where readers see it (a shared store writes behind). */
  flushed(): Promise<void>;
  close(): Promise<void>;
}

/** Whether a verdict matches the query's filters. */
export function matches(v: Verdict, q: VerdictQuery): boolean {
  if (q.status !== undefined && v.status !== q.status) return false;
  if (q.tee !== undefined && v.tee !== q.tee) return false;
  if (q.kind !== undefined && v.kind !== q.kind) return false;
  if (q.requestId !== undefined && v.requestId !== q.requestId) return false;
  return true;
}

/** A ring buffer of the last `size` verdicts of this process, newest first when listed. */
export class VerdictLog implements VerdictStore {
  readonly backend = 'Memory' as const;
  private readonly ring: (Verdict | undefined)[];
  private next = 0;
  private seq = 0;

  constructor(
    readonly size: number = DEFAULT_VERDICT_LOG_SIZE,
    private readonly now: () => number = Date.now,
  ) {
    if (!Number.isInteger(size) || size < 1)
      throw new RangeError('verdict log size must be a positive integer');
    this.ring = new Array(size);
  }

  record(v: NewVerdict): void {
    const entry = { ...v, id: ++this.seq, time: new Date(this.now()).toISOString() } as Verdict;
    this.ring[this.next] = entry;
    this.next = (this.next + 1) % this.size;
  }

  async get(id: number): Promise<Verdict | undefined> {
    for (const v of this.ring) if (v?.id === id) return v;
    return undefined;
  }

  async list(q: VerdictQuery = {}): Promise<Verdict[]> {
    const limit = Math.min(q.limit ?? this.size, this.size);
    const out: Verdict[] = [];
    for (let i = 1; i <= this.size && out.length < limit; i++) {
      const v = this.ring[(this.next - i + this.size) % this.size];
      if (v === undefined) break;
      if (matches(v, q)) out.push(v);
    }
    return out;
  }

  /** Recorded is listed at once: nothing is written behind. */
  async flushed(): Promise<void> {}

  async close(): Promise<void> {}
}
