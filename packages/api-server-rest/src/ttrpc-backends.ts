/**
 * The CDH and AA backends over ttrpc, through `@broker/guest-api`'s typed
 * clients behind a `LazyConnection`: connected on first use, replaced when the
 * connection is lost, every call bounded by a deadline (upstream: 50 s) so a
 * CDH stuck on a KBS that is down answers with an error instead of hanging.
 */
import { AttestationAgentClient, DataHubClient } from '@broker/guest-api';
import { parseTtrpcAddress } from '@broker/ttrpc';
import type { AttestationBackend, ResourceBackend } from './backends.js';
import { LazyConnection } from './lazy-connection.js';

/** Upstream api-server-rest's `--cdh_addr` default. */
export const DEFAULT_CDH_ADDR = 'unix:///run/confidential-containers/cdh.sock';
/** Upstream api-server-rest's `--aa_addr` default. */
export const DEFAULT_AA_ADDR = 'unix:///run/confidential-containers/attestation-agent/attestation-agent.sock';

/** api-server-rest's ttrpc deadline (upstream `TTRPC_TIMEOUT`, 50 s). */
export const DEFAULT_TTRPC_TIMEOUT_MS = 50_000;
/** How long to wait for a socket connection; a unix socket answers at once, so this is a safety net. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;

export interface TtrpcBackendOptions {
  /** Deadline of each ttrpc call (sent as `timeout_nano` and enforced locally); default 50 s. */
  readonly timeoutMs?: number;
  /** Deadline of opening the connection; default 5 s. */
  readonly connectTimeoutMs?: number;
}

/**
 * The data hub at `address` (default `unix:///run/confidential-containers/cdh.sock`).
 * A malformed address throws `InvalidTtrpcAddress` here, at start-up, rather than on every request.
 */
export function dataHubBackend(
  address: string = DEFAULT_CDH_ADDR,
  options: TtrpcBackendOptions = {},
): ResourceBackend {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TTRPC_TIMEOUT_MS;
  const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const where = parseTtrpcAddress(address);
  const conn = new LazyConnection<DataHubClient>({
    name: 'CDH',
    address,
    connect: () => DataHubClient.connect(where, { timeoutMs, connectTimeoutMs }),
    close: (c) => c.close(),
    isClosed: (c) => c.closed,
  });
  return {
    getResource: (uri) => conn.call((c) => c.getResource(uri), { retryInFlight: true }),
    close: () => conn.close(),
  };
}

/**
 * The attestation agent at `address` (default
 * `unix:///run/confidential-containers/attestation-agent/attestation-agent.sock`).
 * Every call except `ExtendRuntimeMeasurement` is retried once on a new
 * connection when the connection drops mid-call; an event-log extension that
 * may already have happened is not repeated.
 */
export function attestationAgentBackend(
  address: string = DEFAULT_AA_ADDR,
  options: TtrpcBackendOptions = {},
): AttestationBackend {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TTRPC_TIMEOUT_MS;
  const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const where = parseTtrpcAddress(address);
  const conn = new LazyConnection<AttestationAgentClient>({
    name: 'Attestation Agent',
    address,
    connect: () => AttestationAgentClient.connect(where, { timeoutMs, connectTimeoutMs }),
    close: (c) => c.close(),
    isClosed: (c) => c.closed,
  });
  const retry = { retryInFlight: true };
  return {
    getToken: (tokenType) => conn.call((c) => c.getToken(tokenType), retry),
    getEvidence: (data) => conn.call((c) => c.getEvidence(data), retry),
    getAdditionalEvidence: (data) => conn.call((c) => c.getAdditionalEvidence(data), retry),
    extendRuntimeMeasurement: (domain, operation, content) =>
      conn.call((c) => c.extendRuntimeMeasurement({ domain, operation, content }), { retryInFlight: false }),
    getTeeType: () => conn.call((c) => c.getTeeType(), retry),
    getAdditionalTees: () => conn.call((c) => c.getAdditionalTees(), retry),
    close: () => conn.close(),
  };
}
