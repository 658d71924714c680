// The bounds of every Rego evaluation the KBS and the attestation service make (resource policy,
// attestation policies, their checks and dry runs), and the checks a policy passes before it is stored.
//
// Evaluation is synchronous on the process's one event loop, so each evaluation is bounded in steps (so
// in time) and in the memory it builds; an evaluation that reaches a bound stops with a RegoLimitError,
// and the KBS refuses that request. Checks, uploads and dry runs, which anyone allowed to call them can
// send at will, run one at a time, each followed by a pause as long as it ran: /healthz and guest
// requests wait for at most one evaluation, and checks take at most half of the event loop's time.
// At most MAX_WAITING_CHECKS wait; more are refused (`busy`).
import { createHash } from 'node:crypto';
import { type EngineLimits, RegoLimitError, type RegoLimitKind } from '@broker/rego';
import { AttestationError, type PolicyCheckCode } from './errors.js';

/**
 * Limits of a policy evaluation. trustee's default policies take about 200 steps on a sample or TDX
 * appraisal; 1,000,000 steps is tens of milliseconds on an idle core, a few hundred on a loaded one.
 * 64 MiB is what one evaluation may build (strings, arrays, sets, objects; see the rego README's
 * `maxMemoryBytes`).
 */
export const POLICY_EVAL_LIMITS: Readonly<Pick<EngineLimits, 'maxSteps' | 'maxMemoryBytes'>> = Object.freeze({
  maxSteps: 1_000_000,
  maxMemoryBytes: 64 * 1024 * 1024,
});

/** Checks and dry runs waiting for their turn beyond the one running; more are refused (`busy`). */
export const MAX_WAITING_CHECKS = 4;

/** A policy refused before it is stored or dry run; nothing was changed. */
export class PolicyCheckError extends AttestationError {
  override readonly name: string = 'PolicyCheckError';
  declare readonly code: PolicyCheckCode;
  constructor(
    code: PolicyCheckCode,
    message: string,
    /** Which limit, for `limit_exceeded`. */
    readonly limit?: RegoLimitKind,
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
  }
}

/** The RegoLimitError an error is or was caused by. */
export function limitErrorOf(e: unknown): RegoLimitError | undefined {
  for (let c: unknown = e, i = 0; c instanceof Error && i < 8; c = c.cause, i++) {
    if (c instanceof RegoLimitError) return c;
  }
  return undefined;
}

/**
 * Policy texts whose evaluation exceeded a limit, by kind and SHA-256 of the text: the next check or dry
 * run of the same text is refused at once, without evaluating it again. Bounded; the oldest is dropped.
 */
export class LimitFailures {
  private readonly failures = new Map<string, RegoLimitError>();
  constructor(private readonly max = 256) {}

  private static key(kind: string, text: string): string {
    return `${kind}:${createHash('sha256').update(text).digest('hex')}`;
  }

  get(kind: string, text: string): RegoLimitError | undefined {
    return this.failures.get(LimitFailures.key(kind, text));
  }

  remember(kind: string, text: string, e: RegoLimitError): void {
    const key = LimitFailures.key(kind, text);
    this.failures.delete(key);
    this.failures.set(key, e);
    if (this.failures.size > this.max) this.failures.delete(this.failures.keys().next().value as string);
  }
}

/** The process's memory of failed policy texts (checks, uploads and dry runs share it). */
export const limitFailures = new LimitFailures();

/** The longest pause after one evaluation, in ms. */
const MAX_PAUSE_MS = 1000;

/**
 * Runs evaluations one at a time, each after a turn of the event loop and followed by a pause as long as
 * it ran (at most MAX_PAUSE_MS), so that requests arriving meanwhile are served between them and the
 * queue takes at most half of the loop's time; at most `maxWaiting` wait, more are refused with `busy`.
 */
export class EvaluationQueue {
  private tail: Promise<unknown> = Promise.resolve();
  private waiting = 0;
  /** Evaluations run so far (for tests and metrics). */
  ran = 0;

  constructor(private readonly maxWaiting = MAX_WAITING_CHECKS) {}

  /**
   * Runs `f` in its turn. `capped` (the default, for checks and dry runs) refuses it with `busy` when the
   * queue is full; uploads pass `false` and always wait their turn, so that dry runs cannot keep an
   * administrator's upload or a hot reload out.
   */
  run<T>(f: () => T | Promise<T>, capped = true): Promise<T> {
    if (capped && this.waiting > this.maxWaiting) {
      return Promise.reject(
        new PolicyCheckError(
          'busy',
          `too many policy checks and dry runs at once (one runs, at most ${this.maxWaiting} wait); try again`,
        ),
      );
    }
    this.waiting++;
    const turn = this.tail.then(() => new Promise<void>((r) => setImmediate(r)));
    let started = 0;
    const result = turn.then(() => {
      this.ran++;
      started = performance.now();
      return f();
    });
    const pause = () =>
      new Promise<void>((r) => setTimeout(r, Math.min(MAX_PAUSE_MS, performance.now() - started)));
    this.tail = result.then(pause, pause);
    return result.finally(() => {
      this.waiting--;
    });
  }
}

/** The process's queue of policy checks, uploads and dry runs (one event loop, one queue). */
export const policyChecks = new EvaluationQueue();

/** The refusal for a text that exceeded `e` (now or earlier). */
export function limitRefusal(what: string, e: RegoLimitError, remembered: boolean): PolicyCheckError {
  return new PolicyCheckError(
    'limit_exceeded',
    `${what} exceeded a limit of policy evaluation (${e.limit}): ${e.message}${
      remembered ? ' (remembered from an earlier evaluation of the same text)' : ''
    }`,
    e.limit,
    { cause: e },
  );
}
