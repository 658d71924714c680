// Delivery of initdata to pods: the pod annotation (per pod) and peer-pods-cm (global default).

import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { type Document, isMap, YAMLMap } from 'yaml';
import { InitDataInputError, InputError } from '../errors.js';
import { isRecord } from '../fields.js';
import { isDns1123Label } from '../names.js';
import { parseYamlStream } from '../yaml-io.js';
import { type InstanceSize, parseInstanceSize } from './instance-size.js';

/** The spec's annotation name, written by default. */
export const INITDATA_ANNOTATION = 'io.sandbox.config.hypervisor.cc_init_data';
/** kata-containers' own name for it (`initdata annotate --annotation kata`). */
export const KATA_INITDATA_ANNOTATION = 'io.katacontainers.config.hypervisor.cc_init_data';
/** Both names, read alike. */
export const INITDATA_ANNOTATIONS: readonly string[] = Object.freeze([
  INITDATA_ANNOTATION,
  KATA_INITDATA_ANNOTATION,
]);

/** `--annotation` values: a short name or either full name. */
export function initDataAnnotationName(choice: string): string | undefined {
  if (choice === 'kata') return KATA_INITDATA_ANNOTATION;
  if (choice === 'sandbox') return INITDATA_ANNOTATION;
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
      `${where}: annotations ${INITDATA_ANNOTATION} and ${KATA_INITDATA_ANNOTATION} differ`,
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
  annotation: string = INITDATA_ANNOTATION,
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

export interface PeerPodsOptions {
  readonly encodedInitData: string;
  /** CVM disk in GiB. */
  readonly rootVolumeSizeGiB: number;
  readonly instanceSize: string;
  readonly namespace?: string;
}

/** Largest Azure managed OS disk, GiB. */
export const MAX_ROOT_VOLUME_GIB = 4095;

export function peerPodsConfigMap(o: PeerPodsOptions): { configMap: IConfigMap; size: InstanceSize } {
  if (
    !Number.isInteger(o.rootVolumeSizeGiB) ||
    o.rootVolumeSizeGiB < 1 ||
    o.rootVolumeSizeGiB > MAX_ROOT_VOLUME_GIB
  ) {
    throw new InitDataInputError(
      `--root-volume-size must be a whole number of GiB from 1 to ${MAX_ROOT_VOLUME_GIB}`,
    );
  }
  const size = parseInstanceSize(o.instanceSize);
  if (size === undefined) {
    throw new InitDataInputError(
      `--instance-size ${JSON.stringify(o.instanceSize.slice(0, 64))} is not a confidential VM size: use Standard_DC<n>as_v5 (AMD SEV-SNP) or Standard_DC<n>es_v5 (Intel TDX), n one of 2, 4, 8, 16, 32, 48, 64, 96 (the ads/eds variants too)`,
    );
  }
  if (o.namespace !== undefined && !isDns1123Label(o.namespace)) {
    throw new InitDataInputError(`--namespace ${JSON.stringify(o.namespace)} is not a valid namespace`);
  }
  return {
    size,
    configMap: {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: PEER_PODS_CONFIGMAP, ...(o.namespace !== undefined && { namespace: o.namespace }) },
      data: {
        INITDATA: o.encodedInitData,
        ROOT_VOLUME_SIZE: String(o.rootVolumeSizeGiB),
        CLOUD_INSTANCE_SIZE: size.name,
      },
    },
  };
}
