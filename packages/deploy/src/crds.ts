// CustomResourceDefinitions of BrokerConfig and KbsConfig (`{crd_group}/v1alpha1`), with structural
// schemas that match what `parseBrokerConfig` accepts and what `render` writes.
import type { ICustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition';
import type { IJSONSchemaProps } from 'kubernetes-models/apiextensions.k8s.io/v1/JSONSchemaProps';
import {
  DEFAULT_CERT_CACHE_MOUNT_PATH,
  MAX_CERT_CACHE_SECRETS,
  MAX_REPLICAS,
  MAX_SECRET_RESOURCES,
  PROFILE_TYPES,
  SERVICE_TYPES,
} from './broker-config.js';
import { CRD_VERSION, DEFAULT_CRD_GROUP } from './names.js';

const SECRET_NAME: IJSONSchemaProps = {
  type: 'string',
  maxLength: 253,
  pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$',
};
const OBJECT_NAME = SECRET_NAME;

function tlsSecretSpec(description: string): IJSONSchemaProps {
  return {
    type: 'object',
    description,
    properties: {
      tlsSecretName: { ...SECRET_NAME, description: 'kubernetes.io/tls Secret in the same namespace' },
    },
  };
}

const REDIS_SPEC: IJSONSchemaProps = {
  type: 'object',
  description:
    'Redis holding the handshake sessions that replicas share (and, without postgresSpec, the rest of the state)',
  required: ['urlSecretName'],
  properties: {
    urlSecretName: { ...SECRET_NAME, description: 'Secret holding the Redis URL (redis:// or rediss://)' },
    urlSecretKey: { type: 'string', default: 'url', pattern: '^[-._a-zA-Z0-9]+$', maxLength: 253 },
  },
};

const POSTGRES_SPEC: IJSONSchemaProps = {
  type: 'object',
  description:
    'PostgreSQL holding policies, reference values and resources (and, without redisSpec, the sessions) that replicas share',
  required: ['urlSecretName'],
  properties: {
    urlSecretName: {
      ...SECRET_NAME,
      description:
        'Secret holding the PostgreSQL URI (postgresql://user:password@host:port/db), passed as POSTGRES_URL',
    },
    urlSecretKey: { type: 'string', default: 'url', pattern: '^[-._a-zA-Z0-9]+$', maxLength: 253 },
  },
};

const SECRET_RESOURCES: IJSONSchemaProps = {
  type: 'array',
  description: 'Secrets released as kbs:///default/<secret>/<key>',
  maxItems: MAX_SECRET_RESOURCES,
  items: SECRET_NAME,
};

const SERVICE_TYPE: IJSONSchemaProps = { type: 'string', enum: [...SERVICE_TYPES], default: 'ClusterIP' };

/** trustee-operator's `KbsLocalCertCacheSpec`: Secrets of offline AMD VCEKs and where they are mounted. */
const LOCAL_CERT_CACHE_SPEC: IJSONSchemaProps = {
  type: 'object',
  description: 'Offline AMD VCEKs (air-gapped): each Secret mounted at mountPath (trustee-operator)',
  properties: {
    secrets: {
      type: 'array',
      maxItems: MAX_CERT_CACHE_SECRETS,
      items: {
        type: 'object',
        required: ['secretName'],
        properties: {
          secretName: SECRET_NAME,
          mountPath: { type: 'string', maxLength: 1024, default: DEFAULT_CERT_CACHE_MOUNT_PATH },
        },
      },
    },
  },
};

/** trustee-operator's `DeploymentType`. */
export const DEPLOYMENT_TYPES = ['AllInOneDeployment', 'MicroservicesDeployment'] as const;

/**
 * trustee-operator KbsConfigSpec fields that mean nothing for this KBS: the CRD declares them and a
 * validation rule refuses each by name, with the reason. (trustee-operator dropped `tdxConfigSpec`; so
 * does this CRD.)
 */
export const REFUSED_KBS_CONFIG_FIELDS: readonly (readonly [string, string, IJSONSchemaProps])[] = [
  [
    'kbsAsConfigMapName',
    'the attestation service is built into the KBS (no microservices deployment)',
    { type: 'string' },
  ],
  [
    'kbsRvpsConfigMapName',
    'the RVPS is built into the KBS (no microservices deployment)',
    { type: 'string' },
  ],
  [
    'ibmSEConfigSpec',
    'IBM Secure Execution is not supported',
    { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
  ],
];

export function brokerConfigSchema(): IJSONSchemaProps {
  return {
    type: 'object',
    description: 'Configuration of one key broker service deployment',
    required: ['spec'],
    properties: {
      apiVersion: { type: 'string' },
      kind: { type: 'string' },
      metadata: { type: 'object' },
      spec: {
        type: 'object',
        properties: {
          profileType: {
            type: 'string',
            enum: [...PROFILE_TYPES],
            default: 'Restricted',
            description: 'Restricted turns every security flag on',
          },
          kbsServiceType: SERVICE_TYPE,
          httpsSpec: tlsSecretSpec('HTTPS key and certificate'),
          attestationTokenVerificationSpec: tlsSecretSpec(
            'Attestation token signing key (EC P-256) and certificate',
          ),
          kbsSecretResources: SECRET_RESOURCES,
          replicas: { type: 'integer', minimum: 1, maximum: MAX_REPLICAS, default: 1 },
          redisSpec: REDIS_SPEC,
          postgresSpec: POSTGRES_SPEC,
          kbsImage: { type: 'string', maxLength: 512 },
          kbsLocalCertCacheSpec: LOCAL_CERT_CACHE_SPEC,
          kbsGpuAttestationPolicyConfigMapName: {
            ...OBJECT_NAME,
            description: 'ConfigMap with default_gpu.rego, mounted beside the CPU policy (trustee-operator)',
          },
          kbsDeploymentType: {
            type: 'string',
            enum: ['AllInOneDeployment'],
            description:
              'trustee-operator: only AllInOneDeployment (the AS and RVPS inside the kbs container)',
          },
          collateralSpec: {
            type: 'object',
            description: "Collateral services; unset: Intel's PCS and AMD's KDS, as trustee",
            properties: {
              intelCollateralService: {
                type: 'string',
                maxLength: 2048,
                description: 'PCS or PCCS base URL (https://), or file:// for the PCS Client Tool JSON',
              },
              tcbUpdateType: { type: 'string', enum: ['early', 'standard'] },
              amdKdsUrl: { type: 'string', maxLength: 2048, description: 'AMD KDS base URL (or a mirror)' },
            },
          },
        },
        'x-kubernetes-validations': [
          {
            rule: "(has(self.profileType) && self.profileType == 'Permissive') || (has(self.httpsSpec) && has(self.httpsSpec.tlsSecretName) && has(self.attestationTokenVerificationSpec) && has(self.attestationTokenVerificationSpec.tlsSecretName))",
            message:
              'profileType Restricted needs httpsSpec.tlsSecretName and attestationTokenVerificationSpec.tlsSecretName',
          },
          {
            rule: '!has(self.replicas) || self.replicas <= 1 || has(self.redisSpec) || has(self.postgresSpec)',
            message: 'more than one replica needs redisSpec or postgresSpec (shared handshake sessions)',
          },
        ],
      },
      status: {
        type: 'object',
        properties: { isReady: { type: 'boolean' }, statusDescription: { type: 'string' } },
      },
    },
  };
}

export function kbsConfigSchema(): IJSONSchemaProps {
  const name = (description: string): IJSONSchemaProps => ({ ...OBJECT_NAME, description });
  return {
    type: 'object',
    description: 'Wiring of the KBS deployment: which Secrets and ConfigMaps it mounts',
    required: ['spec'],
    properties: {
      apiVersion: { type: 'string' },
      kind: { type: 'string' },
      metadata: { type: 'object' },
      spec: {
        type: 'object',
        required: ['kbsConfigMapName'],
        properties: {
          kbsSecretResources: SECRET_RESOURCES,
          kbsHttpsKeySecretName: name('HTTPS private key Secret'),
          kbsHttpsCertSecretName: name('HTTPS certificate Secret'),
          kbsAuthSecretName: name('token verification Secret (admin API)'),
          kbsAttestationKeySecretName: name('attestation token key Secret'),
          kbsAttestationCertSecretName: name('attestation token certificate Secret'),
          kbsConfigMapName: name('server ConfigMap'),
          kbsRvpsRefValuesConfigMapName: name('reference values ConfigMap'),
          kbsAttestationPolicyConfigMapName: name('attestation policy ConfigMap'),
          kbsResourcePolicyConfigMapName: name('resource access policy ConfigMap'),
          kbsGpuAttestationPolicyConfigMapName: name('GPU attestation policy ConfigMap (default_gpu.rego)'),
          kbsLocalCertCacheSpec: LOCAL_CERT_CACHE_SPEC,
          kbsServiceType: SERVICE_TYPE,
          kbsDeploymentType: {
            type: 'string',
            enum: [...DEPLOYMENT_TYPES],
            default: 'AllInOneDeployment',
            description:
              'trustee-operator: AllInOneDeployment (one KBS container with the AS and RVPS built in)',
          },
          KbsEnvVars: {
            type: 'object',
            description: 'Plain environment variables of the KBS container (trustee-operator casing)',
            additionalProperties: { type: 'string' },
          },
          KbsDeploymentSpec: {
            type: 'object',
            description: 'trustee-operator casing',
            properties: { replicas: { type: 'integer', minimum: 1, maximum: MAX_REPLICAS } },
          },
          // trustee-operator fields with no meaning here: declared so that the rules below refuse them by name.
          ...Object.fromEntries(
            REFUSED_KBS_CONFIG_FIELDS.map(([field, , schema]) => [
              field,
              { ...schema, description: 'not supported here' },
            ]),
          ),
          kbsRedisSpec: REDIS_SPEC,
          kbsPostgresSpec: POSTGRES_SPEC,
        },
        'x-kubernetes-validations': [
          {
            rule: "!has(self.kbsDeploymentType) || self.kbsDeploymentType == 'AllInOneDeployment'",
            message:
              'kbsDeploymentType MicroservicesDeployment is not supported here: the attestation service and RVPS are built into the KBS',
          },
          ...REFUSED_KBS_CONFIG_FIELDS.map(([field, why]) => ({
            rule: `!has(self.${field})`,
            message: `${field} is not supported here: ${why}`,
          })),
        ],
      },
      status: {
        type: 'object',
        properties: { isReady: { type: 'boolean' } },
      },
    },
  };
}

function crd(
  group: string,
  kind: string,
  plural: string,
  schema: IJSONSchemaProps,
  shortNames: string[],
): ICustomResourceDefinition {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope: 'Namespaced',
      names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase(), shortNames },
      versions: [
        {
          name: CRD_VERSION,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: schema },
          subresources: { status: {} },
        },
      ],
    },
  };
}

/** The two CRDs, BrokerConfig first. */
export function renderCrds(
  group = DEFAULT_CRD_GROUP,
): [ICustomResourceDefinition, ICustomResourceDefinition] {
  return [
    crd(group, 'BrokerConfig', 'brokerconfigs', brokerConfigSchema(), ['bc']),
    crd(group, 'KbsConfig', 'kbsconfigs', kbsConfigSchema(), ['kbsc']),
  ];
}
