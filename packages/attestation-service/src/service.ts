// The attestation service process: the KBS's built-in attestation service on trustee's storage layout,
// with its RVPS either built in (the same storage, namespace `reference_value`) or remote over gRPC.

import {
  type AttestationService,
  type AttestationServiceOptions,
  COLLATERAL_FETCH_FAILURES_METRIC,
  createAttestationService,
} from '@broker/attestation';
import type { Logger } from '@broker/cli';
import {
  createRvps,
  openRvpsStorage,
  type Rvps,
  RvpsClient,
  type RvpsClientOptions,
} from '@broker/rvps-core';
import { Counter, Registry } from 'prom-client';
import type { AsSettings } from './config.js';

export interface OpenedAttestationService {
  readonly service: AttestationService;
  /** The RVPS the policies consult, also served on the AS's own port as trustee's grpc-as does. */
  readonly rvps: Rvps;
  /**
   * What `GET /metrics` serves: the collateral fetch failure counter, under the KBS's name for it, so
   * that a collateral outage alerts whether the attestation service runs in the KBS or on its own.
   */
  readonly metrics: Registry;
  /** Ids of the stored attestation policies (`default_cpu`, …), sorted. */
  listPolicies(): Promise<string[]>;
  close(): Promise<void>;
}

/** A remote RVPS seen through the KBS's Rvps interface. */
function remoteRvps(client: RvpsClient): Rvps {
  return {
    async register(message) {
      const text =
        typeof message === 'string' ? message : Buffer.from(message as Uint8Array).toString('utf8');
      await client.register(text);
      return [];
    },
    async query(name) {
      const text = await client.query(name);
      return text === undefined ? undefined : JSON.parse(text);
    },
    async get() {
      return undefined;
    },
  };
}

export interface OpenOptions {
  /** Clock in epoch ms; tests replace it. */
  readonly now?: () => number;
  /** The credential (admin JWT) presented to a GrpcRemote RVPS when registrations are forwarded to it. */
  readonly remoteRvps?: RvpsClientOptions;
  /** HTTP client of the collateral services; tests pass one that trusts a mock. */
  readonly httpGet?: AttestationServiceOptions['httpGet'];
}

export async function openAttestationService(
  settings: AsSettings,
  logger: Logger,
  options: OpenOptions = {},
): Promise<OpenedAttestationService> {
  const storage = await openRvpsStorage(settings.storage, {
    onEvent: (e) => {
      if (e.kind === 'disconnected')
        logger.error({ reason: e.reason }, 'PostgreSQL connection lost: requests fail until it returns');
      else if (e.kind === 'reconnected') logger.info('PostgreSQL connection restored');
    },
  });
  // A store other processes write to (another replica) is read on every use instead of cached.
  const shared =
    (storage.isShared?.('attestation_service_policy') ?? false) ||
    (storage.isShared?.('reference_value') ?? false);
  let client: RvpsClient | undefined;
  try {
    let rvps: Rvps;
    if (settings.rvps.type === 'GrpcRemote') {
      client = new RvpsClient(settings.rvps.address, 10_000, options.remoteRvps ?? {});
      // As trustee: the service does not start while its RVPS is unreachable.
      await client.query('__healthcheck__');
      rvps = remoteRvps(client);
    } else {
      rvps = createRvps(storage, {
        ...(options.now !== undefined && { now: () => new Date((options.now as () => number)()) }),
        ...(shared && { cacheTtlMs: 0 }),
      });
    }
    const metrics = new Registry();
    const collateralFailures = new Counter({
      ...COLLATERAL_FETCH_FAILURES_METRIC,
      labelNames: ['source'],
      registers: [metrics],
    });
    const service = await createAttestationService(settings.service, storage, logger, {
      queryReferenceValue: (name) => rvps.query(name),
      onCollateralFetchFailure: (source) => collateralFailures.labels(source).inc(),
      ...(options.httpGet !== undefined && { httpGet: options.httpGet }),
      ...(options.now !== undefined && { now: options.now }),
      ...(shared && { cacheTtlMs: 0 }),
    });
    return {
      service,
      rvps,
      metrics,
      async listPolicies() {
        const keys = await storage.list('attestation_service_policy');
        return keys
          .filter((k) => k.endsWith('.rego'))
          .map((k) => k.slice(0, -'.rego'.length))
          .sort();
      },
      async close() {
        await service.close();
        client?.close();
        await storage.close();
      },
    };
  } catch (e) {
    client?.close();
    await storage.close();
    throw e;
  }
}
