// Turns what the handshake and the resource endpoint saw into verdict log entries. Everything goes
// through scrubClaims/scrubText with the request's secret values, so the log never holds the nonce, the
// TEE key, the token or resource bytes.

import {
  describeReferenceValue,
  type RegisteredReferenceValue,
  trustClaimMeaning,
} from '@broker/attestation';
import { isTee } from '@broker/protocol';
import { type PolicyVersion, policyHash } from '../policy/resource-policy.js';
import {
  type AppraisalSummary,
  keptClaims,
  overallStatus,
  summarizeAppraisals,
  type VerdictStore,
} from './log.js';
import type { PolicyVersions } from './policy-versions.js';
import { freezeTree, handshakeSecrets, scrubClaims, scrubText, secretValues } from './scrub.js';

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The claims of a JWT we issued ourselves (the signature was made here a moment ago, or verified). */
export function jwtPayload(token: string): Record<string, unknown> | undefined {
  const part = token.split('.')[1];
  if (part === undefined) return undefined;
  try {
    const v: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return isObject(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/** Members of an appraisal's annotated evidence beside the TEE's own claims (trustee's transform_claims). */
const NOT_TEE = new Set(['init_data', 'init_data_claims', 'report_data', 'runtime_data_claims']);

/**
 * The TEE of the token's CPU appraisal (`cpu0`, else the first): the member of its annotated evidence
 * (`{ <tee>: claims, init_data, … }`) that names a TEE.
 */
export function teeOfClaims(claims: unknown): string | undefined {
  const submods = isObject(claims) ? claims.submods : undefined;
  if (!isObject(submods)) return undefined;
  const names = Object.keys(submods).sort(
    (a, b) => Number(!a.startsWith('cpu')) - Number(!b.startsWith('cpu')),
  );
  for (const name of names.slice(0, 16)) {
    const a = submods[name];
    const ev = isObject(a) ? a['ear.veraison.annotated-evidence'] : undefined;
    if (!isObject(ev)) continue;
    const keys = Object.keys(ev).filter((k) => !NOT_TEE.has(k));
    const tee = keys.find((k) => isTee(k)) ?? keys.find((k) => isObject(ev[k]));
    if (tee !== undefined) return tee.slice(0, 32);
  }
  return undefined;
}

/** The stored attestation policy of an appraisal: policy id `default` and appraisal `cpu0` → `default_cpu`. */
export function attestationPolicyIdOf(policyId: string, submod: string): string {
  return `${policyId}_${submod.replace(/[0-9]+$/, '')}`;
}

/** Claims outside the affirming tier, in words: `executables 33 (warning): executables not recognised`. */
function claimWords(a: AppraisalSummary): string[] {
  const out: string[] = [];
  for (const row of a.vector ?? []) {
    if (row.tier !== 'warning' && row.tier !== 'contraindicated') continue;
    const meaning = trustClaimMeaning(row.claim, row.value);
    out.push(`${row.claim} ${row.value} (${row.tier})${meaning === undefined ? '' : `: ${meaning}`}`);
  }
  return out;
}

export interface AttestationEvent {
  readonly tee: string;
  readonly sessionId: string;
  readonly source?: string | undefined;
  /** The HTTP request's id (`x-request-id`), as its access-log line shows it. */
  readonly requestId?: string | undefined;
  readonly nonce: string;
  readonly teePubkey: unknown;
  /** The EAR token issued, or the reason the evidence was not verified. */
  readonly outcome: { readonly token: string } | { readonly error: string };
}

export interface ResourceEvent {
  readonly method: string;
  readonly resource: string;
  readonly sessionId?: string | undefined;
  readonly source?: string | undefined;
  readonly requestId?: string | undefined;
  readonly token: string;
  readonly claims: Record<string, unknown>;
  readonly status: 'allowed' | 'denied' | 'error';
  readonly reason?: string | undefined;
  /** The resource policy text that decided (absent when it could not be evaluated). */
  readonly policy?: PolicyVersion | undefined;
}

export interface VerdictRecorderOptions {
  /**
   * The registered record of a reference value (value, expiration, whether it has expired), to show
   * beside the evidence's; undefined when there is none. Best effort.
   */
  readonly referenceValue?: (name: string) => Promise<RegisteredReferenceValue | undefined>;
  /** The stored text of an attestation policy, to record its version. */
  readonly attestationPolicy?: (id: string) => Promise<string | undefined>;
  /** Where the texts of the versions that decided are kept for replay. */
  readonly versions?: PolicyVersions;
}

/** What a resource verdict keeps of one verified token: computed once, shared by its verdicts. */
interface ScrubbedToken {
  readonly token: string;
  readonly secrets: readonly string[];
  /** The scrubbed claims (frozen), or undefined when too large to keep. */
  readonly kept: unknown;
  readonly tee: string | undefined;
}

export class VerdictRecorder {
  /**
   * Per frozen claims object (the token verifier hands out one per verified token): a guest fetching
   * several resources with one token has its claims scrubbed once, not once per fetch.
   */
  private readonly scrubbed = new WeakMap<object, ScrubbedToken>();
  /** The last text and hash of each attestation policy id: hashed again only when the text changed. */
  private readonly attestationHashes = new Map<string, { text: string; hash: string }>();

  /** Attestation verdicts still looking up what they show, not yet handed to the log. */
  private readonly pending = new Set<Promise<void>>();

  constructor(
    readonly log: VerdictStore,
    private readonly options: VerdictRecorderOptions = {},
  ) {}

  /**
   * Records an attestation. The reply does not wait for this (it may read the store), so the recording is
   * tracked: `settled()` and a closing KBS wait for it rather than lose the last handshakes.
   */
  attestation(e: AttestationEvent): Promise<void> {
    const p = this.recordAttestation(e);
    this.pending.add(p);
    const done = () => {
      this.pending.delete(p);
    };
    p.then(done, done);
    return p;
  }

  /** Resolves once every decision recorded so far is in the log, and the log has written it. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.pending]);
    await this.log.flushed();
  }

  private async recordAttestation(e: AttestationEvent): Promise<void> {
    const base = {
      kind: 'attestation' as const,
      tee: e.tee,
      session: e.sessionId.slice(0, 8),
      ...(e.source !== undefined && { source: e.source }),
      ...(e.requestId !== undefined && { requestId: e.requestId }),
    };
    if ('error' in e.outcome) {
      const secrets = secretValues(e.nonce, e.teePubkey);
      this.log.record({
        ...base,
        status: 'failed',
        policyIds: [],
        appraisals: [],
        reason: scrubText(e.outcome.error, secrets),
      });
      return;
    }
    const raw = jwtPayload(e.outcome.token) ?? {};
    const secrets = [...secretValues(e.nonce, e.teePubkey, e.outcome.token), ...handshakeSecrets(raw)];
    const claims = scrubClaims(raw, secrets);
    const appraisals = await Promise.all(summarizeAppraisals(claims).map((a) => this.explain(a, secrets)));
    this.log.record({
      ...base,
      status: overallStatus(appraisals),
      policyIds: [...new Set(appraisals.map((a) => a.policyId))],
      appraisals,
      ...(keptClaims(claims) !== undefined && { claims }),
    });
  }

  /** An appraisal with the version of its policy and the reasons in words (registered values looked up). */
  private async explain(a: AppraisalSummary, secrets: readonly string[]): Promise<AppraisalSummary> {
    const { referenceValue, attestationPolicy, versions } = this.options;
    let policyVersion: string | undefined;
    if (attestationPolicy !== undefined && a.policyId !== '') {
      const id = attestationPolicyIdOf(a.policyId, a.name);
      try {
        const text = await attestationPolicy(id);
        if (text !== undefined) {
          const last = this.attestationHashes.get(id);
          policyVersion = last?.text === text ? last.hash : policyHash(text);
          if (last?.text !== text) {
            if (this.attestationHashes.size >= 64) this.attestationHashes.clear();
            this.attestationHashes.set(id, { text, hash: policyVersion });
          }
          versions?.remember('attestation', id, text, policyVersion);
        }
      } catch {
        policyVersion = undefined;
      }
    }
    const registered = async (name: string): Promise<RegisteredReferenceValue | undefined> => {
      if (referenceValue === undefined) return undefined;
      try {
        const r = await referenceValue(name);
        return r === undefined ? undefined : { ...r, value: scrubClaims(r.value, secrets) };
      } catch {
        return undefined;
      }
    };
    const why = claimWords(a);
    let referenceValues = a.referenceValues;
    if (a.referenceValues !== undefined) {
      const withExpected: Record<
        string,
        { evidence: unknown; expected?: unknown; expiration?: string; expired?: boolean }
      > = {};
      for (const [name, v] of Object.entries(a.referenceValues)) {
        const r = await registered(name);
        why.push(describeReferenceValue(name, v.evidence, r));
        withExpected[name] =
          r === undefined
            ? v
            : {
                ...v,
                ...(r.value !== undefined && { expected: r.value }),
                ...(r.expiration !== undefined && { expiration: r.expiration }),
                ...(r.expired === true && { expired: true }),
              };
      }
      referenceValues = withExpected;
    }
    for (const name of a.missingReferenceValues ?? []) {
      why.push(describeReferenceValue(name, undefined, await registered(name)));
    }
    return {
      ...a,
      ...(policyVersion !== undefined && { policyVersion }),
      ...(referenceValues !== undefined && { referenceValues }),
      ...(why.length > 0 && { why: why.map((w) => scrubText(w, secrets)) }),
    };
  }

  /** The scrubbed view of a token's claims, cached while the claims object lives (when frozen). */
  private scrub(token: string, raw: Record<string, unknown>): ScrubbedToken {
    const hit = this.scrubbed.get(raw);
    if (hit !== undefined && hit.token === token) return hit;
    const secrets = [...secretValues(token), ...handshakeSecrets(raw)];
    const claims = scrubClaims(raw, secrets);
    const out: ScrubbedToken = {
      token,
      secrets,
      kept: freezeTree(keptClaims(claims)),
      tee: teeOfClaims(claims),
    };
    // Only an immutable claims object can stand for its scrubbed copy later.
    if (Object.isFrozen(raw)) this.scrubbed.set(raw, out);
    return out;
  }

  resource(e: ResourceEvent): void {
    const { secrets, kept, tee } = this.scrub(e.token, e.claims);
    if (e.policy !== undefined)
      this.options.versions?.remember('resource', 'resource-policy', e.policy.text, e.policy.hash);
    this.log.record({
      kind: 'resource',
      status: e.status,
      method: e.method,
      resource: e.resource.slice(0, 512),
      ...(tee !== undefined && { tee }),
      ...(e.policy !== undefined && { policyVersion: e.policy.hash }),
      ...(e.sessionId !== undefined && { session: e.sessionId.slice(0, 8) }),
      ...(e.source !== undefined && { source: e.source }),
      ...(e.requestId !== undefined && { requestId: e.requestId }),
      ...(e.reason !== undefined && { reason: scrubText(e.reason, secrets) }),
      ...(kept !== undefined && { claims: kept }),
    });
  }
}
