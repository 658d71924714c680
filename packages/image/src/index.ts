export {
  type BuildCompression,
  type BuiltImage,
  type BuiltLayer,
  buildImage,
  buildIndex,
  buildLayer,
  buildTar,
  type ImageSpec,
  type LayerEntry,
  layerFromTar,
  pushImage,
  writeDirImage,
} from './build.js';
export {
  type DigestAlgorithm,
  Digester,
  digestAlgorithm,
  digestHex,
  digestOf,
  InvalidDigestError,
  matchesDigest,
  parseDigest,
} from './digest.js';
export { type DirImage, dirNamespaces, type OpenDirImageOptions, openDirImage } from './dir-image.js';
export { ImageError, type ImageErrorCode } from './errors.js';
export {
  type EvaluationOptions,
  evaluatePolicy,
  type KeyReader,
  loadPublicKeys,
  MAX_KEY_BYTES,
  type PolicyDecision,
  type PolicyImage,
  type RequirementOutcome,
  type RequirementVerdict,
  readKeyFile,
} from './evaluate.js';
export {
  type GpgKeyring,
  loadGpgKeyring,
  MAX_GPG_PAYLOAD_BYTES,
  MAX_GPG_SIGNATURE_BYTES,
  type VerifiedGpgSignature,
  verifyGpgSignature,
  verifySimpleSigning,
} from './gpg.js';
export { matchesDockerReference } from './identity.js';
export { JsonFormatError } from './json.js';
export { type ApplyLayerOptions, applyLayerStream, LayerError, type LayerFailureStage } from './layer.js';
export {
  checkExpansionLimits,
  DEFAULT_EXPANSION_LIMITS,
  ExpansionBudget,
  ExpansionLimitError,
  type ExpansionLimits,
  LayerBudget,
  LIMIT_NAMES,
} from './limits.js';
export {
  defaultLookasideFetcher,
  fetchSimpleSignatures,
  type LookasideFetcher,
  type LookasideNamespace,
  loadRegistriesD,
  lookasideSignatureUrl,
  lookasideTopLevel,
  parseRegistriesDFile,
  parseSignatureList,
  type RegistriesD,
  RegistriesDError,
  readLookasideSignatures,
} from './lookaside.js';
export {
  currentPlatform,
  type Descriptor,
  formatPlatform,
  type ImageConfig,
  type ImageIndex,
  type ImageManifest,
  InvalidManifestError,
  type LayerCompression,
  layerCompression,
  MANIFEST_ACCEPT,
  MEDIA_TYPE,
  type ParsedManifest,
  type Platform,
  parseImageConfig,
  parseManifest,
  parsePlatform,
  selectPlatformManifest,
  wantedPlatforms,
} from './manifest.js';
export * from './ocicrypt/index.js';
export {
  cleanPath,
  DEFAULT_POLICY_SEMANTICS,
  type IdentityMatcher,
  InvalidPolicyError,
  type KeySource,
  loadPolicyFile,
  MAX_POLICY_BYTES,
  POLICY_SEMANTICS,
  type Policy,
  type PolicyParseOptions,
  type PolicyRequirement,
  type PolicySemantics,
  parsePolicy,
  type RequirementType,
  requirementsForImage,
  type ScopeChoice,
  validateScope,
} from './policy.js';
export { formatBytes, type ProgressOutput, progressPrinter } from './progress.js';
export {
  BUNDLE_ROOTFS,
  DEFAULT_INDEX_SIGNATURES,
  ImagePullError,
  type ImageSource,
  imageRsDenial,
  MAX_CONFIG_BYTES,
  type OpenRegistryImageOptions,
  openDirSource,
  openRegistryImage,
  type PullImageOptions,
  type PullProgressEvent,
  type PullResult,
  type PullStage,
  pullImage,
} from './pull.js';
export {
  DEFAULT_DOMAIN,
  DEFAULT_TAG,
  type DockerReference,
  dockerImageName,
  familiarString,
  InvalidReferenceError,
  isNameOnly,
  parseImageReference,
  parseNamed,
  parseNormalizedNamed,
  parseReference,
  policyIdentity,
  policyNamespaces,
  referenceName,
  referenceString,
  registryHost,
  tagNameOnly,
  trimNamed,
  withDigest,
  withTag,
} from './reference.js';
export {
  type BearerToken,
  type Challenge,
  type CredentialLookup,
  type Credentials,
  loadAuthFile,
  parseAuthFile,
  parseChallenges,
  RegistryAuthError,
} from './registry/auth.js';
export {
  DigestMismatchError,
  type FetchedManifest,
  isManifestUnknown,
  MAX_MANIFEST_BYTES,
  RegistryClient,
  type RegistryClientOptions,
  RegistryError,
  type Repository,
  VerifyingStream,
} from './registry/client.js';
export { HttpError } from './registry/http.js';
export type { DockerRegistryOptions } from './registry/local-registry.js';
export {
  freePort,
  type RunningRegistry,
  requireTool,
  startDockerRegistry,
} from './registry/local-registry.js';
export {
  type NoProxy,
  ProxyConfigError,
  type ProxySettings,
  parseNoProxy,
  proxySettingsFromEnv,
  resolveProxies,
} from './registry/proxy.js';
export {
  fetchSigstoreSignatures,
  MAX_SIGNATURE_ATTACHMENTS,
  pushSigstoreSignatures,
} from './registry/signatures.js';
export {
  createSigstorePayload,
  createSigstoreSignature,
  InvalidPublicKeyError,
  InvalidSignatureError,
  MAX_SIGNATURE_BYTES,
  type PayloadClaims,
  type PayloadRules,
  parsePublicKeyPem,
  parseSigstorePayload,
  SIGSTORE_PAYLOAD_TYPE,
  SIGSTORE_SIGNATURE_ANNOTATION,
  SIGSTORE_SIGNATURE_MIME_TYPE,
  type SigstorePayload,
  signatureFromBlob,
  signatureToBlob,
  signPayload,
  sigstoreAttachmentTag,
  type UntrustedSignature,
  verifyPayloadSignature,
  verifySigstorePayload,
} from './sigstore.js';
export { type RunningTinyproxy, startTinyproxy } from './testing/tinyproxy.js';
export {
  entryComponents,
  RootfsUnpacker,
  type TarEntryHeader,
  UnpackError,
  type UnpackStats,
} from './unpack.js';
