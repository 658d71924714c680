/**
 * What the router needs from the confidential data hub and the attestation
 * agent. The ttrpc implementations live in `ttrpc-backends.ts`; tests use
 * in-memory fakes. A backend failure rejects with `BackendError`, whose
 * message is the plain-text body of the 500 answer.
 */

import { ApiServerError, type ApiServerErrorCode } from './errors.js';

/** Result of `ExtendRuntimeMeasurement`, as the attestation agent's proto enum numbers it. */
export const ExtendResult = {
  OK: 0,
  NOT_SUPPORTED: 1,
  NOT_ENABLED: 2,
} as const;

export interface ResourceBackend {
  /** Calls CDH `GetResource` with a full resource URI such as `kbs:///default/key/1`. */
  getResource(uri: string): Promise<Uint8Array>;
  close(): Promise<void>;
}

export interface AttestationBackend {
  /** AA `GetToken`: the token bytes as the agent returns them (for `kbs`, `{"token","tee_keypair"}`). */
  getToken(tokenType: string): Promise<Uint8Array>;
  getEvidence(runtimeData: Uint8Array): Promise<Uint8Array>;
  getAdditionalEvidence(runtimeData: Uint8Array): Promise<Uint8Array>;
  /** AA `ExtendRuntimeMeasurement` without a register index; resolves with the result enum number. */
  extendRuntimeMeasurement(domain: string, operation: string, content: string): Promise<number>;
  getTeeType(): Promise<string>;
  getAdditionalTees(): Promise<string[]>;
  close(): Promise<void>;
}

/** A call to the data hub or the attestation agent failed; `message` is what the client is told. */
export class BackendError extends ApiServerError {
  override readonly code: ApiServerErrorCode = 'BACKEND_FAILED';
  override readonly name: string = 'BackendError';
}
