// The RCAR handshake (trustee kbs/src/attestation/backend.rs): /auth hands out a challenge bound to a new
// session; /attest checks the evidence through the attestation service and turns the session Attested.
import { randomBytes } from 'node:crypto';
import type { AttestationService } from '@broker/attestation';
import {
  type Attestation,
  type Challenge,
  type HashAlgorithm,
  isTee,
  KbsError,
  type KbsRequest,
  parseAttestation,
  parseJson,
  parseKbsRequest,
  runtimeDataClaims,
  type Tee,
} from '@broker/protocol';
import type { Logger } from 'pino';
import { KbsServiceError } from './errors.js';
import type { KbsMetrics } from './metrics.js';
import { type DecisionObserver, NO_OBSERVER } from './observer.js';
import { jsonReply, type Reply } from './reply.js';
import { type Session, type SessionStore, sessionCookie } from './session.js';

const NONCE_BYTES = 32;
/**
 * Largest `extra-params` of an /auth request, as JSON bytes. The request is kept in the session until it
 * expires, so without a cap one unauthenticated client could fill the session budget with a few large
 * requests and push out every other guest's handshake. Guests send `""` or, for SE, a short list of hash
 * algorithms (well under a few hundred bytes); trustee stores whatever fits the 2 MiB body limit.
 */
export const MAX_EXTRA_PARAMS_BYTES = 4096;
/** The version requirement trustee states in its mismatch message. */
const VERSION_REQ = '=0.4.0';
const SEMVER_RE = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$/;

export interface RcarDeps {
  readonly sessions: SessionStore;
  readonly attestation: AttestationService;
  readonly metrics: KbsMetrics;
  readonly logger: Logger;
  /** Told of each verdict on evidence (the operator console's verdict log). */
  readonly observer?: DecisionObserver;
}

function authFailed(context: string, cause?: unknown): KbsError {
  return new KbsError('AttestationError', `Attestation error: RCAR handshake Auth failed: ${context}`, {
    cause,
  });
}

/**
 * Upstream hides why /attest failed from the client; the reason goes to the log. `verdict` is true when the
 * attestation service judged the evidence (counted as a failure of its TEE), false when the request was
 * refused before that (counted as an error).
 */
class AttestFailed extends KbsError {
  readonly reason: string;
  constructor(
    reason: string,
    cause?: unknown,
    readonly verdict = false,
  ) {
    super('AttestationError', 'Attestation error: RCAR handshake Attest failed', { cause });
    this.reason = reason;
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** trustee's generate_extra_params: hash negotiation exists for SE only, which must get sha512. */
export function challengeExtraParams(tee: Tee, params: unknown): unknown {
  if (
    tee !== 'se' ||
    params === null ||
    !isRecord(params) ||
    !Object.hasOwn(params, 'supported-hash-algorithms')
  ) {
    return '';
  }
  const algs = params['supported-hash-algorithms'];
  if (!Array.isArray(algs)) throw new KbsServiceError('REQUEST_INVALID', 'SE expected hash algorithm array');
  const lower = algs.filter((a): a is string => typeof a === 'string').map((a) => a.toLowerCase());
  if (!lower.includes('sha512'))
    throw new KbsServiceError('REQUEST_INVALID', 'SE TEE does not support sha512');
  return { 'selected-hash-algorithm': 'sha512' };
}

function parseRequest(body: Uint8Array): KbsRequest {
  let doc: unknown;
  try {
    doc = parseJson(body);
  } catch (e) {
    throw authFailed('deserialize Request', e);
  }
  // serde rejects the whole Request (unknown TEE, missing member) before the version is looked at.
  if (
    !isRecord(doc) ||
    typeof doc.version !== 'string' ||
    !isTee(doc.tee) ||
    !Object.hasOwn(doc, 'extra-params')
  ) {
    throw authFailed('deserialize Request');
  }
  const version = doc.version;
  if (!SEMVER_RE.test(version)) throw authFailed('failed to parse KBS version');
  const extraBytes = Buffer.byteLength(JSON.stringify(doc['extra-params']) ?? '', 'utf8');
  if (extraBytes > MAX_EXTRA_PARAMS_BYTES) {
    throw authFailed(`extra-params is ${extraBytes} bytes, more than the ${MAX_EXTRA_PARAMS_BYTES} allowed`);
  }
  try {
    return parseKbsRequest(doc);
  } catch (e) {
    throw authFailed(
      `KBS Client Protocol Version Mismatch: expect ${VERSION_REQ} while the request is ${version.slice(0, 64)}`,
      e,
    );
  }
}

export class Rcar {
  constructor(private readonly deps: RcarDeps) {}

  async auth(body: Uint8Array): Promise<Reply> {
    const { metrics } = this.deps;
    metrics.authRequests.inc();
    let request: KbsRequest;
    let challenge: Challenge;
    try {
      request = parseRequest(body);
      let extra: unknown;
      try {
        extra = challengeExtraParams(request.tee, request['extra-params']);
      } catch (e) {
        throw authFailed('Attestation Service generate challenge failed', e);
      }
      challenge = { nonce: randomBytes(NONCE_BYTES).toString('base64'), 'extra-params': extra };
    } catch (e) {
      metrics.authErrors.inc();
      throw e;
    }
    metrics.authSuccesses.inc();
    const session = await this.deps.sessions.create(request, challenge);
    return jsonReply(JSON.stringify(challenge), { 'set-cookie': sessionCookie(session) });
  }

  async attest(
    body: Uint8Array,
    sessionId: string | undefined,
    source?: string,
    requestId?: string,
  ): Promise<Reply> {
    const { metrics } = this.deps;
    metrics.attestationRequests.inc();
    try {
      return await this.handshake(body, sessionId, source, requestId);
    } catch (e) {
      // Each refused /attest is counted once: a verdict on the evidence as a failure of its TEE (in
      // handshake, which knows the TEE), anything before it as an error.
      if (e instanceof AttestFailed && !e.verdict) metrics.attestationErrors.inc();
      throw e;
    }
  }

  private async handshake(
    body: Uint8Array,
    sessionId: string | undefined,
    source: string | undefined,
    requestId: string | undefined,
  ): Promise<Reply> {
    const { metrics, sessions, logger } = this.deps;
    const observer = this.deps.observer ?? NO_OBSERVER;
    if (sessionId === undefined) throw new AttestFailed('cookie not found');
    let attestation: Attestation;
    try {
      attestation = parseAttestation(parseJson(body));
    } catch (e) {
      throw new AttestFailed(`deserialize Attestation: ${(e as Error).message}`, e);
    }
    const session: Session | undefined = await sessions.get(sessionId);
    if (session === undefined) throw new AttestFailed('session not found');
    const cookie = { 'set-cookie': sessionCookie(session) };
    if (session.status === 'Attested') {
      // trustee returns the token it already issued, without verifying again.
      return jsonReply(JSON.stringify({ token: session.token }), cookie);
    }
    const nonce = session.challenge.nonce;
    if (attestation['runtime-data'].nonce !== nonce) {
      throw new AttestFailed(
        "the nonce in the handshake session is different from the client side in KBS protocol's Attestation message",
      );
    }
    const teePubkey = attestation['runtime-data']['tee-pubkey'];
    const additionalText = attestation['tee-evidence'].additional_evidence;
    const additional: { tee: Tee; evidence: unknown; runtimeData: Record<string, unknown> }[] = [];
    if (additionalText !== '') {
      let map: unknown;
      try {
        map = JSON.parse(additionalText);
      } catch (e) {
        throw new AttestFailed('additional evidence is not JSON', e);
      }
      if (!isRecord(map)) throw new AttestFailed('additional evidence is not a map of TEE to evidence');
      for (const [tee, evidence] of Object.entries(map)) {
        if (!isTee(tee)) {
          throw new AttestFailed(
            `additional evidence names an unknown TEE ${JSON.stringify(tee.slice(0, 32))}`,
          );
        }
        additional.push({
          tee,
          evidence,
          runtimeData: runtimeDataClaims({ nonce, 'tee-pubkey': teePubkey }),
        });
      }
    }
    const tee = session.request.tee;
    const hash: HashAlgorithm = tee === 'se' ? 'sha512' : 'sha384';
    const verdict = { tee, sessionId: session.id, source, requestId, nonce, teePubkey };
    let token: string;
    try {
      token = await this.deps.attestation.verify({
        tee,
        evidence: attestation['tee-evidence'].primary_evidence,
        runtimeData: runtimeDataClaims({
          nonce,
          'tee-pubkey': teePubkey,
          'additional-evidence': additionalText,
        }),
        runtimeDataHashAlgorithm: hash,
        initData: attestation['init-data'],
        additional,
        policyIds: ['default'],
      });
    } catch (e) {
      metrics.attestationFailures.labels(tee).inc();
      observer.attestation({ ...verdict, outcome: { error: (e as Error).message } });
      logger.warn(
        { tee, session: session.id.slice(0, 8), reason: (e as Error).message },
        'attestation failed',
      );
      throw new AttestFailed(`verify TEE evidence failed: ${(e as Error).message}`, e, true);
    }
    metrics.attestationSuccesses.labels(tee).inc();
    observer.attestation({ ...verdict, outcome: { token } });
    logger.info(
      { tee, session: session.id.slice(0, 8) },
      'attestation succeeded: evidence verified, token issued',
    );
    const attested = await sessions.attest(session, token);
    return jsonReply(JSON.stringify({ token }), { 'set-cookie': sessionCookie(attested) });
  }
}

export { AttestFailed };
