// Delivery of initdata to pods: the pod annotation (per pod) and peer-pods-cm (global default).

import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { type Document, isMap, YAMLMap } from 'yaml';
import { InitDataInputError, InputError } from '../errors.js';
import { isRecord } from '../fields.js';
import { isDns1123Label } from '../names.js';
import { parseYamlStream } from '../yaml-io.js';
import { type InstanceSize, parseInstanceSize } from './instance-size.js';

/**
 * kata-containers' name for the initdata annotation: the one kata's runtime and the peer-pods cloud-api-adaptor
 * read, and the one `initdata annotate` writes by default.
 */
export const KATA_INITDATA_ANNOTATION = 'io.katacontainers.config.hypervisor.cc_init_data';
/** The spec's neutral spelling of the same annotation (`initdata annotate --annotation spec`). */
export const SPEC_INITDATA_ANNOTATION = 'io.sandbox.config.hypervisor.cc_init_data';
/** What `initdata annotate` writes without `--annotation`. */
export const DEFAULT_INITDATA_ANNOTATION = KATA_INITDATA_ANNOTATION;
/** Both names, read alike. */
export const INITDATA_ANNOTATIONS: readonly string[] = Object.freeze([
  KATA_INITDATA_ANNOTATION,
  SPEC_INITDATA_ANNOTATION,
]);

/** `--annotation` values: `kata`, `spec` (or its older alias `sandbox`), or either full name. */
export function initDataAnnotationName(choice: string): string | undefined {
  if (choice === 'kata') return KATA_INITDATA_ANNOTATION;
  if (choice === 'spec' || choice === 'sandbox') return SPEC_INITDATA_ANNOTATION;
  return INITDATA_ANNOTATIONS.includes(choice) ? choice : undefined;
}

/**
 * The encoded initdata of a pod's annotations under either name; undefined when neither is set.
 * Both set to different values is an error: which one the runtime takes would be a guess.
 */
export function initDataAnnotationOf(
  annotations: Readonly<Record<string, unknown>>,
  where: string,
): string | undefined {
  const found = INITDATA_ANNOTATIONS.filter((k) => Object.hasOwn(annotations, k)).map(
    (k) => [k, annotations[k]] as const,
  );
  for (const [k, v] of found) {
    if (typeof v !== 'string') throw new InputError(`${where}: annotation ${k} is not a string`);
  }
  if (found.length === 2 && found[0]?.[1] !== found[1]?.[1]) {
    throw new InputError(
      `${where}: annotations ${KATA_INITDATA_ANNOTATION} and ${SPEC_INITDATA_ANNOTATION} differ`,
    );
  }
  return found[0]?.[1] as string | undefined;
}
export const PEER_PODS_CONFIGMAP = 'peer-pods-cm';
/** Kubernetes limits all annotations of an object together to 256 KiB. */
export const MAX_ANNOTATIONS_BYTES = 256 * 1024;

/** Where each workload kind keeps the pod's annotations. */
const ANNOTATION_PATHS: Record<string, string[]> = {
  Pod: ['metadata', 'annotations'],
  Deployment: ['spec', 'template', 'metadata', 'annotations'],
  StatefulSet: ['spec', 'template', 'metadata', 'annotations'],
  DaemonSet: ['spec', 'template', 'metadata', 'annotations'],
  ReplicaSet: ['spec', 'template', 'metadata', 'annotations'],
  Job: ['spec', 'template', 'metadata', 'annotations'],
  CronJob: ['spec', 'jobTemplate', 'spec', 'template', 'metadata', 'annotations'],
};

export interface AnnotateResult {
  readonly yaml: string;
  /** `Kind/name` of each annotated workload. */
  readonly annotated: string[];
  /** Workloads whose annotation was replaced. */
  readonly replaced: string[];
}

function annotationsSize(doc: Document, path: string[]): number {
  const node = doc.getIn(path);
  if (!isMap(node)) return 0;
  let n = 0;
  for (const [k, v] of Object.entries(node.toJSON() as Record<string, unknown>)) {
    n += Buffer.byteLength(k) + Buffer.byteLength(typeof v === 'string' ? v : (JSON.stringify(v) ?? ''));
  }
  return n;
}

/**
 * Adds the initdata annotation to every workload of a YAML stream (Pod, or the pod template of a
 * Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob). Comments and layout are kept.
 */
export function annotateWorkloads(
  text: string,
  encodedInitData: string,
  source: string,
  annotation: string = DEFAULT_INITDATA_ANNOTATION,
): AnnotateResult {
  if (!INITDATA_ANNOTATIONS.includes(annotation)) {
    throw new InputError(
      `${JSON.stringify(annotation)} is not an initdata annotation (${INITDATA_ANNOTATIONS.join(', ')})`,
    );
  }
  const docs = parseYamlStream(text, source);
  const annotated: string[] = [];
  const replaced: string[] = [];
  for (const doc of docs) {
    const js = doc.toJS({ maxAliasCount: 100 }) as unknown;
    if (!isRecord(js) || typeof js.kind !== 'string') continue;
    const path = ANNOTATION_PATHS[js.kind];
    if (path === undefined) continue;
    const name =
      isRecord(js.metadata) && typeof js.metadata.name === 'string' ? js.metadata.name : '(unnamed)';
    const existing = doc.getIn(path);
    if (existing !== undefined && existing !== null && !isMap(existing)) {
      throw new InputError(`${source}: ${js.kind}/${name} ${path.join('.')} is not a mapping`);
    }
    if (existing === undefined || existing === null) doc.setIn(path, new YAMLMap());
    // Either name counts as the pod's initdata: the other one is removed, so only one is left.
    let had = false;
    for (const other of INITDATA_ANNOTATIONS) {
      if (!doc.hasIn([...path, other])) continue;
      had = true;
      if (other !== annotation) doc.deleteIn([...path, other]);
    }
    if (had) replaced.push(`${js.kind}/${name}`);
    doc.setIn([...path, annotation], encodedInitData);
    if (annotationsSize(doc, path) > MAX_ANNOTATIONS_BYTES) {
      throw new InitDataInputError(
        `${js.kind}/${name}: annotations would exceed ${MAX_ANNOTATIONS_BYTES} bytes; use peer-pods-cm INITDATA instead`,
      );
    }
    annotated.push(`${js.kind}/${name}`);
  }
  if (annotated.length === 0) {
    throw new InputError(
      `${source}: no workload found (Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob)`,
    );
  }
  const yaml = docs
    .map((d, i) => {
      const s = d.toString({ lineWidth: 0 });
      return i > 0 && !s.startsWith('---') ? `---\n${s}` : s;
    })
    .join('');
  return { yaml, annotated, replaced };
}

/** The cloud-api-adaptor providers whose peer-pods-cm keys `initdata configmap` writes. */
export const PEER_PODS_PROVIDERS = ['azure', 'aws', 'gcp', 'libvirt', 'alibabacloud', 'ibmcloud'] as const;
export type PeerPodsProvider = (typeof PEER_PODS_PROVIDERS)[number];
export const DEFAULT_PEER_PODS_PROVIDER: PeerPodsProvider = 'azure';

export function isPeerPodsProvider(s: string): s is PeerPodsProvider {
  return (PEER_PODS_PROVIDERS as readonly string[]).includes(s);
}

/** The spec's provider-neutral key for the instance size; the adaptor does not read it. */
export const SPEC_INSTANCE_SIZE_KEY = 'CLOUD_INSTANCE_SIZE';

interface ProviderKeys {
  /** The default pod VM size. */
  readonly instanceSize?: string;
  /** The comma-separated sizes a pod may ask for. */
  readonly instanceSizes?: string;
  /** The pod VM disk, GiB. */
  readonly rootVolume?: string;
  readonly maxRootVolumeGiB: number;
  /** Why sizes or disk cannot be set, when they cannot. */
  readonly noSize?: string;
  readonly noRootVolume?: string;
  /** A size's shape on this cloud, for a first check of typos. */
  readonly sizeShape?: RegExp;
}

/**
 * The environment variables the cloud-api-adaptor reads for each provider (the flags its providers
 * register in `src/cloud-providers/<provider>/manager.go`, listed in the Helm chart's
 * `providers/<provider>.yaml`). libvirt sizes a VM by CPU and memory, not by name; alibabacloud has no
 * list of sizes; ibmcloud takes the disk from the image.
 */
export const PEER_PODS_PROVIDER_KEYS: Readonly<Record<PeerPodsProvider, ProviderKeys>> = Object.freeze({
  azure: {
    instanceSize: 'AZURE_INSTANCE_SIZE',
    instanceSizes: 'AZURE_INSTANCE_SIZES',
    rootVolume: 'ROOT_VOLUME_SIZE',
    maxRootVolumeGiB: 4095,
  },
  aws: {
    instanceSize: 'PODVM_INSTANCE_TYPE',
    instanceSizes: 'PODVM_INSTANCE_TYPES',
    rootVolume: 'ROOT_VOLUME_SIZE',
    maxRootVolumeGiB: 16384,
    sizeShape: /^[a-z][a-z0-9-]{0,15}\.[a-z0-9]{1,16}$/,
  },
  gcp: {
    instanceSize: 'GCP_MACHINE_TYPE',
    instanceSizes: 'GCP_INSTANCE_TYPES',
    rootVolume: 'ROOT_VOLUME_SIZE',
    maxRootVolumeGiB: 65536,
    sizeShape: /^[a-z][a-z0-9]{0,15}-[a-z0-9-]{1,48}$/,
  },
  libvirt: {
    rootVolume: 'LIBVIRT_ROOT_DISK_SIZE',
    maxRootVolumeGiB: 65536,
    noSize: 'libvirt sizes a pod VM by CPU and memory (LIBVIRT_CPU, LIBVIRT_MEMORY), not by an instance size',
  },
  alibabacloud: {
    instanceSize: 'PODVM_INSTANCE_TYPE',
    rootVolume: 'SYSTEM_DISK_SIZE',
    maxRootVolumeGiB: 2048,
    sizeShape: /^ecs\.[a-z0-9-]{1,32}\.[a-z0-9]{1,16}$/,
  },
  ibmcloud: {
    instanceSize: 'IBMCLOUD_PODVM_INSTANCE_PROFILE_NAME',
    instanceSizes: 'IBMCLOUD_PODVM_INSTANCE_PROFILE_LIST',
    maxRootVolumeGiB: 0,
    noRootVolume: 'the ibmcloud provider has no root volume size: the pod VM image sets it',
    sizeShape: /^[a-z][a-z0-9]{0,15}-[0-9]{1,3}x[0-9]{1,5}$/,
  },
});

export interface PeerPodsOptions {
  readonly encodedInitData: string;
  /** The adaptor's provider (default azure): picks the keys written. */
  readonly provider?: PeerPodsProvider;
  /** Pod VM disk in GiB; left to the adaptor's default when absent. */
  readonly rootVolumeSizeGiB?: number;
  /** The default pod VM size; left to the adaptor's default when absent. */
  readonly instanceSize?: string;
  /** The sizes pods may ask for (the adaptor's `*_INSTANCE_SIZES`/`*_INSTANCE_TYPES` list). */
  readonly instanceSizes?: readonly string[];
  /** Also write the spec's CLOUD_INSTANCE_SIZE (the adaptor ignores it). */
  readonly specInstanceSize?: boolean;
  readonly namespace?: string;
}

/** Largest Azure managed OS disk, GiB. */
export const MAX_ROOT_VOLUME_GIB = 4095;

export interface PeerPodsConfigMap {
  readonly configMap: IConfigMap;
  /** Azure's confidential size details, when the provider is azure and a size was given. */
  readonly size?: InstanceSize;
}

function checkedSize(provider: PeerPodsProvider, keys: ProviderKeys, s: string, flag: string): string {
  if (provider === 'azure') {
    const size = parseInstanceSize(s);
    if (size === undefined) {
      throw new InitDataInputError(
        `${flag} ${JSON.stringify(s.slice(0, 64))} is not a confidential VM size: use Standard_DC<n>as_v5 (AMD SEV-SNP) or Standard_DC<n>es_v5 (Intel TDX), n one of 2, 4, 8, 16, 32, 48, 64, 96 (the ads/eds variants too)`,
      );
    }
    return size.name;
  }
  if (keys.sizeShape !== undefined && !keys.sizeShape.test(s)) {
    throw new InitDataInputError(
      `${flag} ${JSON.stringify(s.slice(0, 64))} is not a ${provider} instance type`,
    );
  }
  return s;
}

/**
 * ConfigMap peer-pods-cm with the keys the cloud-api-adaptor reads for `provider`: CLOUD_PROVIDER,
 * INITDATA, the root volume size and the instance size(s) under the provider's own names.
 */
export function peerPodsConfigMap(o: PeerPodsOptions): PeerPodsConfigMap {
  const provider = o.provider ?? DEFAULT_PEER_PODS_PROVIDER;
  if (!isPeerPodsProvider(provider)) {
    throw new InitDataInputError(
      `--provider ${JSON.stringify(String(provider).slice(0, 64))}: use one of ${PEER_PODS_PROVIDERS.join(', ')}`,
    );
  }
  const keys = PEER_PODS_PROVIDER_KEYS[provider];
  const data: Record<string, string> = { CLOUD_PROVIDER: provider, INITDATA: o.encodedInitData };
  if (o.rootVolumeSizeGiB !== undefined) {
    if (keys.rootVolume === undefined) throw new InitDataInputError(keys.noRootVolume ?? 'no root volume');
    const n = o.rootVolumeSizeGiB;
    if (!Number.isInteger(n) || n < 1 || n > keys.maxRootVolumeGiB) {
      throw new InitDataInputError(
        `--root-volume-size must be a whole number of GiB from 1 to ${keys.maxRootVolumeGiB} for ${provider}`,
      );
    }
    data[keys.rootVolume] = String(n);
  }
  let size: InstanceSize | undefined;
  if (o.instanceSize !== undefined || (o.instanceSizes !== undefined && o.instanceSizes.length > 0)) {
    if (keys.instanceSize === undefined) throw new InitDataInputError(keys.noSize ?? 'no instance size');
    if (o.instanceSize !== undefined) {
      data[keys.instanceSize] = checkedSize(provider, keys, o.instanceSize, '--instance-size');
      if (provider === 'azure') size = parseInstanceSize(o.instanceSize);
    }
    if (o.instanceSizes !== undefined && o.instanceSizes.length > 0) {
      if (keys.instanceSizes === undefined) {
        throw new InitDataInputError(`the ${provider} provider takes one instance size, no list`);
      }
      const list = o.instanceSizes.map((s) => checkedSize(provider, keys, s, '--instance-sizes'));
      data[keys.instanceSizes] = [...new Set(list)].join(',');
    }
  }
  if (o.specInstanceSize === true) {
    if (o.instanceSize === undefined) {
      throw new InitDataInputError(`${SPEC_INSTANCE_SIZE_KEY} needs --instance-size`);
    }
    data[SPEC_INSTANCE_SIZE_KEY] = checkedSize(provider, keys, o.instanceSize, '--instance-size');
  }
  if (o.namespace !== undefined && !isDns1123Label(o.namespace)) {
    throw new InitDataInputError(`--namespace ${JSON.stringify(o.namespace)} is not a valid namespace`);
  }
  return {
    ...(size !== undefined && { size }),
    configMap: {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: PEER_PODS_CONFIGMAP, ...(o.namespace !== undefined && { namespace: o.namespace }) },
      data,
    },
  };
}
