/**
 * A Kubernetes Secret holding a pointer, ready for `kubectl apply -f -`.
 * The pointer is not secret (the cluster is untrusted by design), so
 * `stringData` keeps the manifest readable; `data` (base64) is what
 * `kubectl create secret --from-literal` would store.
 */

import { stringify } from 'yaml';
import { SealedSecretError } from './errors.js';

export type SecretField = 'stringData' | 'data';

export interface K8sSecretOptions {
  readonly name: string;
  readonly namespace?: string;
  /** The data key, which becomes the file name in a secret volume. */
  readonly key: string;
  /** Default `stringData`. */
  readonly field?: SecretField;
}

export class InvalidK8sName extends SealedSecretError {
  override readonly name: string = 'InvalidK8sName';
  override readonly code = 'K8S_NAME_INVALID';
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const SECRET_KEY = /^[-._a-zA-Z0-9]+$/;

/** Checks names as the API server would, so a bad manifest fails here rather than at apply time. */
function check(options: K8sSecretOptions): void {
  if (options.name.length > 253 || !DNS_SUBDOMAIN.test(options.name)) {
    throw new InvalidK8sName(
      `secret name ${JSON.stringify(options.name.slice(0, 300))} is not a DNS subdomain`,
    );
  }
  if (
    options.namespace !== undefined &&
    (options.namespace.length > 63 || !DNS_LABEL.test(options.namespace))
  ) {
    throw new InvalidK8sName(
      `namespace ${JSON.stringify(options.namespace.slice(0, 100))} is not a DNS label`,
    );
  }
  const { key } = options;
  if (key.length > 253 || !SECRET_KEY.test(key) || key === '.' || key === '..') {
    throw new InvalidK8sName(
      `secret key ${JSON.stringify(key.slice(0, 300))} must consist of alphanumerics, '-', '_' or '.'`,
    );
  }
}

/** The YAML of an Opaque Secret with `key` = `pointer`. */
export function k8sSecretManifest(pointer: string, options: K8sSecretOptions): string {
  check(options);
  const field = options.field ?? 'stringData';
  const metadata: Record<string, string> = { name: options.name };
  if (options.namespace !== undefined) metadata.namespace = options.namespace;
  const value = field === 'data' ? Buffer.from(pointer).toString('base64') : pointer;
  return stringify(
    { apiVersion: 'v1', kind: 'Secret', metadata, type: 'Opaque', [field]: { [options.key]: value } },
    { lineWidth: 0 },
  );
}
