// Public face of @broker/deploy: the operator tools brokerctl and initdata, and the functions behind them.
export { type AddSecretPlan, addSecretPlan, type JsonPatch } from './add-secret.js';
export {
  type BrokerConfig,
  DEFAULT_POSTGRES_URL_KEY,
  DEFAULT_REDIS_URL_KEY,
  MAX_REPLICAS,
  MAX_SECRET_RESOURCES,
  type PostgresSpec,
  PROFILE_TYPES,
  type ProfileType,
  parseBrokerConfig,
  type RedisSpec,
  SERVICE_TYPES,
  type ServiceType,
} from './broker-config.js';
export { BROKERCTL_USAGE, brokerctlMain } from './brokerctl.js';
export {
  CERT_DURATION_HOURS,
  CERT_RENEW_BEFORE_HOURS,
  type CertificateNames,
  certManagerObjects,
  DEFAULT_HTTPS_SECRET,
  DEFAULT_ORGANIZATION,
  DEFAULT_TOKEN_SECRET,
  type GeneratedCertificates,
  generateCertificates,
  HTTPS_CERTIFICATE_NAME,
  ISSUER_NAME,
  type KeyAndCertificate,
  TOKEN_CERTIFICATE_NAME,
  tlsSecrets,
} from './certs.js';
export { type CliIO, nodeIO } from './cli-io.js';
export { brokerConfigSchema, kbsConfigSchema, renderCrds } from './crds.js';
export {
  BrokerConfigError,
  CertificateError,
  DeployError,
  type DeployErrorCode,
  InitDataInputError,
  InputError,
  UsageError,
} from './errors.js';
export { type BuiltInitData, buildInitData, type InitDataFiles } from './initdata/build.js';
export { INITDATA_USAGE, initdataMain } from './initdata/cli.js';
export {
  type AnnotateResult,
  annotateWorkloads,
  DEFAULT_INITDATA_ANNOTATION,
  DEFAULT_PEER_PODS_PROVIDER,
  INITDATA_ANNOTATIONS,
  initDataAnnotationName,
  initDataAnnotationOf,
  isPeerPodsProvider,
  KATA_INITDATA_ANNOTATION,
  MAX_ROOT_VOLUME_GIB,
  PEER_PODS_CONFIGMAP,
  PEER_PODS_PROVIDER_KEYS,
  PEER_PODS_PROVIDERS,
  type PeerPodsConfigMap,
  type PeerPodsOptions,
  type PeerPodsProvider,
  peerPodsConfigMap,
  SPEC_INITDATA_ANNOTATION,
  SPEC_INSTANCE_SIZE_KEY,
} from './initdata/deliver.js';
export {
  CONFIDENTIAL_VCPUS,
  type InstanceSize,
  type InstanceTee,
  parseInstanceSize,
} from './initdata/instance-size.js';
export {
  checkServiceUrl,
  type ValidationReport,
  validateAaToml,
  validateAgentPolicy,
  validateCdhToml,
} from './initdata/validate.js';
export {
  ADMIN_ENDPOINTS,
  ADMIN_ROLE,
  KBS_CONFIG_FILE,
  KBS_PATHS,
  POSTGRES_URL_ENV,
  REDIS_URL_ENV,
  renderKbsConfigToml,
} from './kbs-config.js';
export {
  CRD_VERSION,
  DEFAULT_CRD_GROUP,
  DEPLOYMENT_NAME,
  generatedNames,
  ROUTE_NAME,
  routeHost,
  SERVICE_NAME,
} from './names.js';
export {
  ATTESTATION_POLICY,
  POLICY_PCRS,
  referenceValueNames,
  referenceValuesJson,
  resourcePolicy,
  VTPM_PLATFORMS,
} from './policies.js';
export {
  DEFAULT_KBS_IMAGE,
  type KubeObject,
  type RenderedBrokerConfig,
  type RenderOptions,
  type RouteObject,
  renderBrokerConfig,
} from './render.js';
export { collectSecrets, parseSourceSecret, type SourceSecret } from './source-secrets.js';
