// `brokerctl render`: every object of the spec's "Creating it generates" table for one BrokerConfig, plus
// the Deployment and Service that run the KBS. What an operator would reconcile in the cluster is done
// here offline, so the output applies as-is with `kubectl apply -f`.
import { createHash } from 'node:crypto';
import { DEFAULT_REPOSITORY_PREFIX, IMAGES_VERSION } from '@broker/images/version';
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IEnvVar } from 'kubernetes-models/v1/EnvVar';
import type { ISecret } from 'kubernetes-models/v1/Secret';
import type { IService } from 'kubernetes-models/v1/Service';
import type { IVolume } from 'kubernetes-models/v1/Volume';
import type { IVolumeMount } from 'kubernetes-models/v1/VolumeMount';
import type { BrokerConfig } from './broker-config.js';
import { CertificateError } from './errors.js';
import {
  KBS_CONFIG_FILE,
  KBS_PATHS,
  POSTGRES_URL_ENV,
  REDIS_URL_ENV,
  renderKbsConfigToml,
} from './kbs-config.js';
import { type KubeObject, objectLabels } from './kube-object.js';
import { renderMonitoring } from './monitoring.js';
import {
  CRD_VERSION,
  DEPLOYMENT_NAME,
  type GeneratedNames,
  generatedNames,
  KBS_CONTAINER_NAME,
  KBS_PORT,
  KBS_PORT_NAME,
  METRICS_PORT,
  METRICS_PORT_NAME,
  METRICS_SERVICE_NAME,
  ROUTE_NAME,
  resourceVolumeName,
  routeHost,
  SERVICE_NAME,
} from './names.js';
import { pemPublicKeyOfCertificate } from './pem-export.js';
import { ATTESTATION_POLICY, referenceValuesJson, resourcePolicy, tdxQcnlConfig } from './policies.js';
import { httpsMaterial, type SourceSecret, type TlsMaterial, tokenMaterial } from './source-secrets.js';

/** The plain environment of the KBS container (also the KbsConfig's `KbsEnvVars`): trustee's RUST_LOG. */
export function kbsEnvVars(cfg: BrokerConfig): Record<string, string> {
  return { RUST_LOG: cfg.profileType === 'Restricted' ? 'info' : 'debug' };
}

/**
 * Image run when neither the BrokerConfig nor the command line names one: the kbs image `make images`
 * builds (`localhost/broker/kbs:<version>`; load it into the node's runtime or push it under that name).
 */
export const DEFAULT_KBS_IMAGE = `${DEFAULT_REPOSITORY_PREFIX}/kbs:${IMAGES_VERSION}`;
/** The key of trustee-operator's GPU attestation policy ConfigMap (policy `default_gpu`). */
export const GPU_POLICY_KEY = 'default_gpu.rego';

export interface RenderOptions {
  /** Cluster apps domain; the route host is `kbs-route-<namespace>.<clusterDomain>`. */
  readonly clusterDomain: string;
  /** Source Secrets by name: the TLS Secrets the BrokerConfig names. */
  readonly secrets: ReadonlyMap<string, SourceSecret>;
  /** Overrides `spec.kbsImage`. */
  readonly image?: string;
  /** Clock for certificate validity checks. */
  readonly now?: Date;
  /** Also the ServiceMonitor, PrometheusRule and Grafana dashboard (`--monitoring`). */
  readonly monitoring?: boolean;
}

export { type KubeObject, objectLabels } from './kube-object.js';

export interface RouteObject {
  apiVersion: 'route.openshift.io/v1';
  kind: 'Route';
  metadata: { name: string; namespace: string; labels: Record<string, string> };
  spec: {
    host: string;
    to: { kind: 'Service'; name: string; weight: number };
    port: { targetPort: string };
    tls: { termination: 'passthrough' | 'edge'; insecureEdgeTerminationPolicy: 'None' | 'Redirect' };
    wildcardPolicy: 'None';
  };
}

const DNS_NAME = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$/;

function b64(buf: Buffer | string): string {
  return (typeof buf === 'string' ? Buffer.from(buf, 'utf8') : buf).toString('base64');
}

function selectorLabels(cfg: BrokerConfig): Record<string, string> {
  return { 'app.kubernetes.io/name': 'kbs', 'app.kubernetes.io/instance': cfg.name };
}

function secret(
  cfg: BrokerConfig,
  name: string,
  component: string,
  data: Record<string, Buffer | string>,
): ISecret {
  const encoded: Record<string, string> = {};
  for (const [k, v] of Object.entries(data)) encoded[k] = b64(v);
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: cfg.namespace, labels: objectLabels(cfg, component) },
    type: 'Opaque',
    data: encoded,
  };
}

function configMap(
  cfg: BrokerConfig,
  name: string,
  component: string,
  data: Record<string, string>,
): IConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, namespace: cfg.namespace, labels: objectLabels(cfg, component) },
    data,
  };
}

function sourceSecret(opts: RenderOptions, name: string, field: string): SourceSecret {
  const s = opts.secrets.get(name);
  if (s === undefined) {
    throw new CertificateError(
      `${field} names Secret ${name}, which was not given: add it to the input (a kubernetes.io/tls Secret document, e.g. from \`brokerctl certs\` or \`kubectl get secret ${name} -o yaml\` once cert-manager issued it), or pass it with --secrets FILE`,
    );
  }
  return s;
}

export interface RenderedBrokerConfig {
  readonly objects: KubeObject[];
  readonly routeHost: string;
  readonly names: GeneratedNames;
  readonly kbsConfigToml: string;
  /** ServiceMonitor, PrometheusRule and dashboard ConfigMap (also in `objects` with `monitoring`). */
  readonly monitoring: KubeObject[];
}

export function renderBrokerConfig(cfg: BrokerConfig, opts: RenderOptions): RenderedBrokerConfig {
  if (!DNS_NAME.test(opts.clusterDomain)) {
    throw new CertificateError(
      `--cluster-domain ${JSON.stringify(opts.clusterDomain)} is not a lowercase DNS name with a dot`,
    );
  }
  const host = routeHost(cfg.namespace, opts.clusterDomain);
  if (host.split('.')[0]!.length > 63) {
    throw new CertificateError(`route host label kbs-route-${cfg.namespace} is longer than 63 characters`);
  }
  const n = generatedNames(cfg.name);
  const p = KBS_PATHS;

  let https: TlsMaterial | undefined;
  if (cfg.httpsTlsSecretName !== undefined) {
    https = httpsMaterial(
      sourceSecret(opts, cfg.httpsTlsSecretName, 'spec.httpsSpec.tlsSecretName'),
      host,
      opts.now,
    );
  }
  let token: TlsMaterial | undefined;
  if (cfg.tokenTlsSecretName !== undefined) {
    token = tokenMaterial(
      sourceSecret(opts, cfg.tokenTlsSecretName, 'spec.attestationTokenVerificationSpec.tlsSecretName'),
    );
  }

  const secrets: ISecret[] = [];
  if (https !== undefined) {
    secrets.push(secret(cfg, n.httpsKeySecret, 'https', { [p.httpsKeyKey]: https.keyPem }));
    secrets.push(secret(cfg, n.httpsCertSecret, 'https', { [p.httpsCertKey]: https.certPem }));
  }
  if (token !== undefined) {
    secrets.push(secret(cfg, n.authSecret, 'auth', { [p.authKey]: pemPublicKeyOfCertificate(token.cert) }));
    secrets.push(secret(cfg, n.attestationKeySecret, 'attestation', { [p.attestationKeyKey]: token.keyPem }));
    secrets.push(
      secret(cfg, n.attestationCertSecret, 'attestation', { [p.attestationCertKey]: token.certPem }),
    );
  }

  const kbsConfigToml = renderKbsConfigToml(cfg);
  const configMaps: IConfigMap[] = [
    configMap(cfg, n.kbsConfigMap, 'config', { [p.configKey]: kbsConfigToml }),
    configMap(cfg, n.rvpsReferenceValuesConfigMap, 'reference-values', {
      [p.referenceValueKey]: referenceValuesJson(),
    }),
    configMap(cfg, n.attestationPolicyConfigMap, 'attestation-policy', {
      [p.attestationPolicyKey]: ATTESTATION_POLICY,
    }),
    configMap(cfg, n.tdxConfigMap, 'tdx-config', {
      [p.tdxQcnlKey]: tdxQcnlConfig(cfg.collateral?.intelCollateralService),
    }),
    configMap(cfg, n.resourcePolicyConfigMap, 'resource-policy', {
      [p.resourcePolicyKey]: resourcePolicy(cfg.profileType),
    }),
  ];

  const kbsConfig: KubeObject = {
    apiVersion: `${cfg.crdGroup}/${CRD_VERSION}`,
    kind: 'KbsConfig',
    metadata: { name: n.kbsConfig, namespace: cfg.namespace, labels: objectLabels(cfg, 'config') },
    spec: {
      kbsConfigMapName: n.kbsConfigMap,
      ...(token !== undefined && { kbsAuthSecretName: n.authSecret }),
      ...(https !== undefined && {
        kbsHttpsKeySecretName: n.httpsKeySecret,
        kbsHttpsCertSecretName: n.httpsCertSecret,
      }),
      ...(token !== undefined && {
        kbsAttestationKeySecretName: n.attestationKeySecret,
        kbsAttestationCertSecretName: n.attestationCertSecret,
      }),
      kbsSecretResources: [...cfg.kbsSecretResources],
      kbsRvpsRefValuesConfigMapName: n.rvpsReferenceValuesConfigMap,
      kbsAttestationPolicyConfigMapName: n.attestationPolicyConfigMap,
      kbsResourcePolicyConfigMapName: n.resourcePolicyConfigMap,
      kbsServiceType: cfg.kbsServiceType,
      kbsDeploymentType: 'AllInOneDeployment',
      // trustee-operator's casing.
      KbsEnvVars: kbsEnvVars(cfg),
      KbsDeploymentSpec: { replicas: cfg.replicas },
      ...(cfg.gpuAttestationPolicyConfigMap !== undefined && {
        kbsGpuAttestationPolicyConfigMapName: cfg.gpuAttestationPolicyConfigMap,
      }),
      ...(cfg.localCertCache !== undefined && {
        kbsLocalCertCacheSpec: { secrets: cfg.localCertCache.map((e) => ({ ...e })) },
      }),
      ...(cfg.redis !== undefined && { kbsRedisSpec: { ...cfg.redis } }),
      ...(cfg.postgres !== undefined && { kbsPostgresSpec: { ...cfg.postgres } }),
    },
  };

  const service: IService = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: SERVICE_NAME, namespace: cfg.namespace, labels: objectLabels(cfg, 'kbs') },
    spec: {
      type: cfg.kbsServiceType,
      selector: selectorLabels(cfg),
      ports: [{ name: KBS_PORT_NAME, port: KBS_PORT, targetPort: KBS_PORT_NAME, protocol: 'TCP' }],
      // Replicas share sessions through Redis or PostgreSQL, so no client needs to stick to one pod.
      sessionAffinity: 'None',
    },
  };

  // The metrics listener is plain HTTP on the pod network: reachable through this ClusterIP Service
  // (what the ServiceMonitor scrapes), never through kbs-service, whose type may expose it, or the Route.
  const metricsService: IService = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: METRICS_SERVICE_NAME, namespace: cfg.namespace, labels: objectLabels(cfg, 'metrics') },
    spec: {
      type: 'ClusterIP',
      selector: selectorLabels(cfg),
      ports: [
        { name: METRICS_PORT_NAME, port: METRICS_PORT, targetPort: METRICS_PORT_NAME, protocol: 'TCP' },
      ],
    },
  };

  const deployment = renderDeployment(cfg, n, https !== undefined, token !== undefined, opts);
  // The KBS reloads policies, reference values, resources and TLS files in place; the server
  // configuration itself is read at start, so a change of it changes the pod template and
  // `kubectl apply` rolls the pods.
  const hash = createHash('sha256');
  hash.update(kbsConfigToml);
  const template = deployment.spec?.template;
  if (template?.metadata !== undefined) {
    template.metadata.annotations = { [`${cfg.crdGroup}/kbs-config-sha256`]: hash.digest('hex') };
  }

  const route: RouteObject = {
    apiVersion: 'route.openshift.io/v1',
    kind: 'Route',
    metadata: { name: ROUTE_NAME, namespace: cfg.namespace, labels: objectLabels(cfg, 'kbs') },
    spec: {
      host,
      to: { kind: 'Service', name: SERVICE_NAME, weight: 100 },
      port: { targetPort: KBS_PORT_NAME },
      // The KBS terminates TLS itself; the router only forwards the bytes.
      tls:
        https !== undefined
          ? { termination: 'passthrough', insecureEdgeTerminationPolicy: 'None' }
          : { termination: 'edge', insecureEdgeTerminationPolicy: 'Redirect' },
      wildcardPolicy: 'None',
    },
  };

  const monitoring = renderMonitoring(cfg, n);
  const objects = [
    ...secrets,
    ...configMaps,
    kbsConfig,
    service,
    metricsService,
    deployment,
    route,
    ...(opts.monitoring === true ? monitoring : []),
  ] as KubeObject[];
  return { objects, routeHost: host, names: n, kbsConfigToml, monitoring };
}

function renderDeployment(
  cfg: BrokerConfig,
  n: GeneratedNames,
  https: boolean,
  token: boolean,
  opts: RenderOptions,
): IDeployment {
  const p = KBS_PATHS;
  const volumes: IVolume[] = [];
  const mounts: IVolumeMount[] = [];
  const secretDir = (name: string, secretName: string, mountPath: string) => {
    volumes.push({ name, secret: { secretName } });
    mounts.push({ name, mountPath, readOnly: true });
  };
  const configMapDir = (name: string, configMapName: string, mountPath: string) => {
    volumes.push({ name, configMap: { name: configMapName } });
    mounts.push({ name, mountPath, readOnly: true });
  };
  const configMapFile = (name: string, configMapName: string, key: string, mountPath: string) => {
    volumes.push({ name, configMap: { name: configMapName, items: [{ key, path: key }] } });
    mounts.push({ name, mountPath, subPath: key, readOnly: true });
  };

  configMapDir('kbs-config', n.kbsConfigMap, p.configDir);
  if (https) {
    secretDir('https-key', n.httpsKeySecret, p.httpsKeyDir);
    secretDir('https-cert', n.httpsCertSecret, p.httpsCertDir);
  }
  if (token) {
    secretDir('auth-secret', n.authSecret, p.authDir);
    secretDir('attestation-key', n.attestationKeySecret, p.attestationKeyDir);
    secretDir('attestation-cert', n.attestationCertSecret, p.attestationCertDir);
  }
  // Whole-directory mounts: Kubernetes swaps their content in place and the KBS reloads it
  // ([mounted_files]); subPath mounts would never change in a running pod.
  if (cfg.gpuAttestationPolicyConfigMap === undefined) {
    configMapDir('attestation-policy', n.attestationPolicyConfigMap, p.attestationPolicyDir);
  } else {
    // One directory of both policies (trustee-operator mounts default_gpu.rego beside default_cpu.rego);
    // a projected volume keeps it a whole-directory mount that the KBS reloads.
    volumes.push({
      name: 'attestation-policy',
      projected: {
        sources: [
          { configMap: { name: n.attestationPolicyConfigMap } },
          {
            configMap: {
              name: cfg.gpuAttestationPolicyConfigMap,
              items: [{ key: GPU_POLICY_KEY, path: GPU_POLICY_KEY }],
            },
          },
        ],
      },
    });
    mounts.push({ name: 'attestation-policy', mountPath: p.attestationPolicyDir, readOnly: true });
  }
  configMapDir('resource-policy', n.resourcePolicyConfigMap, p.resourcePolicyDir);
  configMapDir('reference-values', n.rvpsReferenceValuesConfigMap, p.referenceValueDir);
  // The resources root exists even with no resource Secret; each Secret is mounted below it. It is
  // mounted writable: the container runtime creates each Secret's mountpoint (`default/<secret>`) inside
  // it after mounting it, which a read-only mount refuses (runc: "mkdir …: read-only file system") and
  // the pod never starts. It stays empty (1 MiB at most); the Secrets themselves are read-only.
  volumes.push({ name: 'resources', emptyDir: { sizeLimit: '1Mi' } });
  mounts.push({ name: 'resources', mountPath: p.resourcesDir });
  // trustee's DCAP library reads this fixed path.
  configMapFile('tdx-config', n.tdxConfigMap, p.tdxQcnlKey, p.tdxQcnlFile);
  volumes.push({ name: 'tmp', emptyDir: { sizeLimit: '16Mi' } });
  mounts.push({ name: 'tmp', mountPath: p.tmpDir });
  // kbsLocalCertCacheSpec: each Secret at its path, as trustee-operator mounts them.
  for (const [i, e] of (cfg.localCertCache ?? []).entries()) {
    secretDir(`cert-cache-${i}`, e.secretName, e.mountPath);
  }
  for (const s of cfg.kbsSecretResources) {
    const v = resourceVolumeSpec(s);
    volumes.push(v.volume);
    mounts.push(v.mount);
  }

  const scheme = https ? 'HTTPS' : 'HTTP';
  const container: IContainer = {
    name: KBS_CONTAINER_NAME,
    image: opts.image ?? cfg.kbsImage ?? DEFAULT_KBS_IMAGE,
    imagePullPolicy: 'IfNotPresent',
    command: ['kbs', '--config-file', KBS_CONFIG_FILE],
    ports: [
      { name: KBS_PORT_NAME, containerPort: KBS_PORT, protocol: 'TCP' },
      { name: METRICS_PORT_NAME, containerPort: METRICS_PORT, protocol: 'TCP' },
    ],
    env: [
      ...Object.entries(kbsEnvVars(cfg)).map(([name, value]) => ({ name, value })),
      // The URLs may hold passwords: they come from their Secrets, never from a ConfigMap.
      ...(cfg.redis !== undefined ? [secretEnv(REDIS_URL_ENV, cfg.redis)] : []),
      ...(cfg.postgres !== undefined ? [secretEnv(POSTGRES_URL_ENV, cfg.postgres)] : []),
    ],
    readinessProbe: {
      httpGet: { path: '/healthz', port: KBS_PORT_NAME, scheme },
      initialDelaySeconds: 2,
      periodSeconds: 10,
      timeoutSeconds: 5,
      failureThreshold: 3,
    },
    livenessProbe: {
      httpGet: { path: '/healthz', port: KBS_PORT_NAME, scheme },
      initialDelaySeconds: 15,
      periodSeconds: 30,
      timeoutSeconds: 5,
      failureThreshold: 3,
    },
    resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '1Gi' } },
    securityContext: {
      privileged: false,
      allowPrivilegeEscalation: false,
      runAsNonRoot: true,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    },
    volumeMounts: mounts,
  };

  const selector = selectorLabels(cfg);
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: DEPLOYMENT_NAME, namespace: cfg.namespace, labels: objectLabels(cfg, 'kbs') },
    spec: {
      replicas: cfg.replicas,
      selector: { matchLabels: selector },
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
      template: {
        metadata: { labels: { ...objectLabels(cfg, 'kbs'), ...selector } },
        spec: {
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
          ...(cfg.replicas > 1 && {
            topologySpreadConstraints: [
              {
                maxSkew: 1,
                topologyKey: 'kubernetes.io/hostname',
                whenUnsatisfiable: 'ScheduleAnyway',
                labelSelector: { matchLabels: selector },
              },
            ],
          }),
          containers: [container],
          volumes,
        },
      },
    },
  };
}

function secretEnv(
  name: string,
  spec: { readonly urlSecretName: string; readonly urlSecretKey: string },
): IEnvVar {
  return { name, valueFrom: { secretKeyRef: { name: spec.urlSecretName, key: spec.urlSecretKey } } };
}

/** Volume and mount of one `kbsSecretResources` Secret: the repository folder `default/<secret>/`. */
export function resourceVolumeSpec(secretName: string): { volume: IVolume; mount: IVolumeMount } {
  const name = resourceVolumeName(secretName);
  return {
    volume: { name, secret: { secretName } },
    mount: { name, mountPath: `${KBS_PATHS.resourcesDir}/default/${secretName}`, readOnly: true },
  };
}
