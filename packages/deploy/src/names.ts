// Names of the objects a BrokerConfig generates (the spec's "Creating it generates" table) and the
// Kubernetes name rules the inputs must satisfy.
import { createHash } from 'node:crypto';

export const DEFAULT_CRD_GROUP = 'broker.confidentialcontainers.org';
export const CRD_VERSION = 'v1alpha1';
export const ROUTE_NAME = 'kbs-route';
export const DEPLOYMENT_NAME = 'kbs-deployment';
export const SERVICE_NAME = 'kbs-service';
export const KBS_CONTAINER_NAME = 'kbs';
export const KBS_PORT = 8080;
export const KBS_PORT_NAME = 'kbs-port';
/**
 * The KBS's `[http_server] metrics_socket`: plain HTTP on the pod's network (`0.0.0.0`), reached through
 * the ClusterIP Service `kbs-metrics` only, never through `kbs-service` or the Route.
 */
export const METRICS_PORT = 9090;
export const METRICS_PORT_NAME = 'metrics';
export const METRICS_SERVICE_NAME = 'kbs-metrics';

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export function isDns1123Label(s: string): boolean {
  return s.length <= 63 && DNS1123_LABEL.test(s);
}

export function isDns1123Subdomain(s: string): boolean {
  return s.length <= 253 && DNS1123_SUBDOMAIN.test(s);
}

/** A CRD group is a DNS subdomain with at least one dot (the API server requires it). */
export function isCrdGroup(s: string): boolean {
  return isDns1123Subdomain(s) && s.includes('.');
}

export function generatedNames(config: string) {
  return {
    httpsKeySecret: `${config}-https-key-secret`,
    httpsCertSecret: `${config}-https-cert-secret`,
    authSecret: `${config}-auth-secret`,
    attestationKeySecret: `${config}-attestation-key-secret`,
    attestationCertSecret: `${config}-attestation-cert-secret`,
    kbsConfigMap: `${config}-kbs-config`,
    rvpsReferenceValuesConfigMap: `${config}-rvps-reference-values`,
    attestationPolicyConfigMap: `${config}-attestation-policy`,
    tdxConfigMap: `${config}-tdx-config`,
    resourcePolicyConfigMap: `${config}-resource-policy`,
    kbsConfig: `${config}-kbs-config`,
    serviceMonitor: `${config}-kbs`,
    prometheusRule: `${config}-kbs-alerts`,
    dashboardConfigMap: `${config}-kbs-dashboard`,
  } as const;
}

export type GeneratedNames = ReturnType<typeof generatedNames>;

/** `kbs-route-<namespace>.<cluster_domain>`, as the spec gives the route host. */
export function routeHost(namespace: string, clusterDomain: string): string {
  return `${ROUTE_NAME}-${namespace}.${clusterDomain}`;
}

/**
 * The pod volume that carries a `kbsSecretResources` Secret. Volume names are DNS labels; Secret names may
 * be longer subdomains, so those get a digest-based name. `render` and `add-secret` must agree on it.
 */
export function resourceVolumeName(secret: string): string {
  const plain = `res-${secret}`;
  if (isDns1123Label(plain)) return plain;
  return `res-${createHash('sha256').update(secret).digest('hex').slice(0, 16)}`;
}
