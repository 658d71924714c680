// The `<config>-rvps-reference-values` ConfigMap. `brokerctl render` mounts it into the KBS as a
// `[mounted_files] reference_values` directory, and the KBS registers every `.json` file there (an RVPS
// message or an array of them) and registers it again whenever Kubernetes swaps the mounted files. So the
// ConfigMap carries the same sample message as `--format rvps-message`, under the key
// `reference-values.json`, and applying it replaces the fail-closed placeholder brokerctl generates.
import { stringify } from 'yaml';
import { UsageError } from './errors.js';
import { type RvpsSampleMessage, rvpsSampleMessage } from './rvps.js';
import type { ReferenceValues } from './values.js';

/** The data key the KBS deployment reads (packages/deploy `KBS_PATHS.referenceValueKey`). */
export const REFERENCE_VALUES_KEY = 'reference-values.json';
/** Annotations that say what the values were made from. */
export const ANNOTATION_PREFIX = 'broker.confidentialcontainers.org';

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export function configMapName(config: string): string {
  return `${config}-rvps-reference-values`;
}

export interface ConfigMapOptions {
  /** The BrokerConfig name (`<config>` in `<config>-rvps-reference-values`). */
  readonly config: string;
  readonly namespace: string;
  /** What the values describe, kept as annotations (image tag, initdata digest, TEE). */
  readonly annotations?: Readonly<Record<string, string>>;
  /** The message's provenance member (what the RVPS keeps with each value). */
  readonly provenance?: Readonly<Record<string, string>>;
}

export interface ConfigMapObject {
  readonly apiVersion: 'v1';
  readonly kind: 'ConfigMap';
  readonly metadata: {
    readonly name: string;
    readonly namespace: string;
    readonly labels: Record<string, string>;
    readonly annotations?: Record<string, string>;
  };
  readonly data: Record<string, string>;
}

/** The file content: a JSON array of RVPS messages (here one sample message with every name). */
export function referenceValuesFile(messages: readonly RvpsSampleMessage[]): string {
  return `${JSON.stringify(messages, null, 2)}\n`;
}

export function referenceValuesConfigMap(
  values: ReferenceValues,
  options: ConfigMapOptions,
): ConfigMapObject {
  if (!DNS1123_LABEL.test(options.config) || configMapName(options.config).length > 253) {
    throw new UsageError(`--name ${JSON.stringify(options.config)} is not a valid BrokerConfig name`);
  }
  if (!DNS1123_LABEL.test(options.namespace) || options.namespace.length > 63) {
    throw new UsageError(`--namespace ${JSON.stringify(options.namespace)} is not a valid namespace`);
  }
  const annotations = options.annotations ?? {};
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: configMapName(options.config),
      namespace: options.namespace,
      // The labels brokerctl puts on the placeholder, so selectors keep finding the object.
      labels: {
        'app.kubernetes.io/name': 'kbs',
        'app.kubernetes.io/instance': options.config,
        'app.kubernetes.io/part-of': 'broker',
        'app.kubernetes.io/managed-by': 'reference-values',
        'app.kubernetes.io/component': 'reference-values',
      },
      ...(Object.keys(annotations).length > 0 && { annotations: { ...annotations } }),
    },
    data: { [REFERENCE_VALUES_KEY]: referenceValuesFile([rvpsSampleMessage(values, options.provenance)]) },
  };
}

export function configMapYaml(cm: ConfigMapObject): string {
  return stringify(cm, { lineWidth: 0 });
}
