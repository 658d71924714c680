// The one seam between the protocol code and whoever watches the KBS's decisions: the RCAR handshake
// (rcar.ts) and the resource path (api.ts) say what they decided, and the observers (the verdict log of
// the operator console) do what they like with it, out of the request's way.
import type { Logger } from 'pino';
import type { AttestationEvent, ResourceEvent, VerdictRecorder } from './verdicts/recorder.js';

export type { AttestationEvent, ResourceEvent };

export interface DecisionObserver {
  /** An /attest whose evidence the attestation service judged: the token it issued, or why not. */
  attestation(event: AttestationEvent): void;
  /** A resource request the resource policy decided (allowed, denied, or not evaluated). */
  resource(event: ResourceEvent): void;
}

/** Nobody is watching. */
export const NO_OBSERVER: DecisionObserver = { attestation() {}, resource() {} };

/**
 * The verdict log as an observer. An attestation is recorded without holding up the reply (looking up the
 * registered reference values it shows may read the store); a failure to record never fails a request.
 */
export function verdictObserver(recorder: VerdictRecorder, logger: Logger): DecisionObserver {
  const failed = (e: unknown) => logger.warn({ reason: (e as Error).message }, 'verdict not recorded');
  return {
    attestation(event) {
      recorder.attestation(event).catch(failed);
    },
    resource(event) {
      try {
        recorder.resource(event);
      } catch (e) {
        failed(e);
      }
    },
  };
}
