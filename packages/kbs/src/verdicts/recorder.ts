// Turns what the handshake and the resource endpoint saw into verdict log entries. Everything goes
// through scrubClaims/scrubText with the request's secret values, so the log never holds the nonce, the
// TEE key, the token or resource bytes.
import { keptClaims, overallStatus, summarizeAppraisals, type VerdictStore } from './log.js';
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

/** The TEE of the first appraisal's annotated evidence (`{ <tee>: claims }`). */
function teeOfClaims(claims: unknown): string | undefined {
  const submods = isObject(claims) ? claims.submods : undefined;
  if (!isObject(submods)) return undefined;
  for (const a of Object.values(submods)) {
    const ev = isObject(a) ? a['ear.veraison.annotated-evidence'] : undefined;
    if (isObject(ev)) return Object.keys(ev)[0];
  }
  return undefined;
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

  constructor(
    readonly log: VerdictStore,
    /** The registered value of a reference value, to show next to the evidence's (best effort). */
    private readonly referenceValue?: (name: string) => Promise<unknown>,
  ) {}

  async attestation(e: AttestationEvent): Promise<void> {
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
    const appraisals = await Promise.all(
      summarizeAppraisals(claims).map(async (a) => {
        if (a.referenceValues === undefined || this.referenceValue === undefined) return a;
        const withExpected: Record<string, { evidence: unknown; expected?: unknown }> = {};
        for (const [name, v] of Object.entries(a.referenceValues)) {
          let expected: unknown;
          try {
            expected = scrubClaims(await this.referenceValue(name), secrets);
          } catch {
            expected = undefined;
          }
          withExpected[name] = expected === undefined ? v : { ...v, expected };
        }
        return { ...a, referenceValues: withExpected };
      }),
    );
    this.log.record({
      ...base,
      status: overallStatus(appraisals),
      policyIds: [...new Set(appraisals.map((a) => a.policyId))],
      appraisals,
      ...(keptClaims(claims) !== undefined && { claims }),
    });
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
    this.log.record({
      kind: 'resource',
      status: e.status,
      method: e.method,
      resource: e.resource.slice(0, 512),
      ...(tee !== undefined && { tee }),
      ...(e.sessionId !== undefined && { session: e.sessionId.slice(0, 8) }),
      ...(e.source !== undefined && { source: e.source }),
      ...(e.requestId !== undefined && { requestId: e.requestId }),
      ...(e.reason !== undefined && { reason: scrubText(e.reason, secrets) }),
      ...(kept !== undefined && { claims: kept }),
    });
  }
}
