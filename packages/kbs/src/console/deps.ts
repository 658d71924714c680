// What the console reads and changes, gathered from the KBS's wiring: resources and policies from the
// store, reference values from the built-in RVPS's namespace, health from the metrics (and over Redis
// the replica count).
import type { AttestationService } from '@broker/attestation';
import type { KvStorage } from '@broker/kv-storage';
import { expireReferenceValue, listReferenceValues } from '@broker/rvps-core';
import { type KbsConfig, sessionStorageOf } from '../config.js';
import type { KbsMetrics } from '../metrics.js';
import type { OpenedVerdicts } from '../verdicts/open.js';
import { PolicyVersions } from '../verdicts/policy-versions.js';
import { Health } from './health.js';
import type { ConsoleDeps, ReferenceValueAccess, ResourceEntry } from './routes.js';
import { ConsoleSessions } from './sessions.js';

const MAX_LISTED_RESOURCES = 1000;
const POLICY_NS = 'attestation_service_policy';
const POLICY_SUFFIX = '.rego';

export interface ConsoleWiring {
  readonly config: KbsConfig;
  readonly storage: KvStorage;
  /** Where the resource plugin keeps resources; undefined without one. */
  readonly resourceStore: KvStorage | undefined;
  readonly metrics: KbsMetrics;
  readonly attestation: AttestationService;
  readonly verdicts: OpenedVerdicts;
  readonly now?: (() => number) | undefined;
}

export function consoleDeps(w: ConsoleWiring): ConsoleDeps {
  const { config, storage, resourceStore } = w;
  const as = config.attestationService;
  const remoteAs = as.grpc !== undefined;
  const referenceValues: ReferenceValueAccess = remoteAs
    ? {
        unavailable:
          'the attestation service is another process (coco_as_grpc): its reference values are kept there',
      }
    : as.rvps.type === 'GrpcRemote'
      ? {
          unavailable: `reference values are kept by the remote RVPS at ${as.rvps.address ?? ''}; manage them there`,
        }
      : {
          list: () => listReferenceValues(storage, () => new Date((w.now ?? Date.now)())),
          expire: (name) => expireReferenceValue(storage, name),
        };
  const replicas = w.verdicts.replicas;
  return {
    sessions: new ConsoleSessions(w.now),
    listResources: async () => {
      if (resourceStore === undefined) return [];
      const out: ResourceEntry[] = [];
      for (const key of (await resourceStore.list('repository')).sort().slice(0, MAX_LISTED_RESOURCES)) {
        out.push({ path: key, size: (await resourceStore.get('repository', key))?.byteLength ?? 0 });
      }
      return out;
    },
    resourcePolicyText: async () => {
      const raw = await storage.get('kbs', 'resource-policy.rego');
      return raw === undefined ? undefined : Buffer.from(raw).toString('utf8');
    },
    health: new Health(
      w.metrics,
      {
        backend: config.storageBackend.storageType,
        sessions: sessionStorageOf(config),
        verdictLog: w.verdicts.store.backend,
      },
      w.now,
      replicas === undefined ? undefined : () => replicas.count(),
    ),
    referenceValues,
    policyVersions: new PolicyVersions(storage),
    ...(!remoteAs && {
      attestationPolicies: {
        list: async () =>
          (await storage.list(POLICY_NS))
            .filter((k) => k.endsWith(POLICY_SUFFIX))
            .map((k) => k.slice(0, -POLICY_SUFFIX.length)),
        get: async (id) => {
          const raw = await storage.get(POLICY_NS, id + POLICY_SUFFIX);
          return raw === undefined ? undefined : Buffer.from(raw).toString('utf8');
        },
        referenceValue: (name) => w.attestation.getReferenceValue(name),
      },
    }),
  };
}
