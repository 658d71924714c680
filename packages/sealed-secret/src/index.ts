// The library (pointer format, keys, envelopes, unsealing, the unsealing step) and the two CLIs.
// The ttrpc and KBS clients load only when a CLI or `remote` function needs them.
export { type OptionSpec, UsageError } from './args.js';
export { main, SECRET_CLI_VERSION, type SecretCliIo } from './cli.js';
export {
  DEK_BYTES,
  decryptData,
  EnvelopeCryptoError,
  encryptData,
  type KbsEnvelopeOptions,
  KEK_BYTES,
  kbsEnvelopePayload,
  unwrapKey,
  wrapKey,
} from './envelope.js';
export {
  KeyFetchFailed,
  KeyFileError,
  KeyJsonError,
  KmsError,
  SealedSecretError,
  type SealedSecretErrorCode,
  SealedSecretParseFailed,
  SealFailed,
  SecretVersionError,
  SignatureVerificationFailed,
  SigningKeyError,
  UnsealEnvelopeFailed,
  UnsealVaultFailed,
} from './errors.js';
export { FolderMovedError, HeldDir } from './held-dir.js';
export { type InitCliIo, mainInit, SEALED_SECRET_INIT_VERSION } from './init-cli.js';
export { type JsonMap, type JsonValue, MAX_JSON_DEPTH } from './json.js';
export {
  DEFAULT_SIGNING_KID,
  formatJwkFile,
  generateSigningKey,
  MAX_JWK_BYTES,
  type PrivateSigningJwk,
  type PublicSigningJwk,
  parseJwkBytes,
  type SigningKeyPair,
  signingKeyFromJwk,
  verificationKeyFromJwk,
} from './jwk.js';
export { InvalidK8sName, type K8sSecretOptions, k8sSecretManifest, type SecretField } from './k8s.js';
export {
  type EnvelopeSecret,
  PayloadShapeError,
  parsePayload,
  payloadFromJson,
  SEALED_SECRET_VERSION,
  type SealedSecretPayload,
  serializePayload,
  type VaultSecret,
  vaultPayload,
  WRAP_TYPES,
  type WrapType,
} from './payload.js';
export {
  describeSealedSecret,
  MAX_SEALED_SECRET_BYTES,
  type ParsedSealedSecret,
  type ParseOptions,
  type PointerSummary,
  parseSealedSecret,
  type ResolveKey,
  readSealedSecret,
  SEALED_SECRET_ALG,
  SEALED_SECRET_PREFIX,
  type SealOptions,
  type SignedSealedSecret,
  sealSecret,
  stripSealedPrefix,
  type UnsignedSealedSecret,
  unsignedSealedSecret,
  verifySealedSecret,
} from './pointer.js';
export {
  aaKbsGetter,
  attestingKbsGetter,
  type Closable,
  DEFAULT_CDH_SOCKET,
  DEFAULT_UNSEAL_TIMEOUT_MS,
  dataHubUnsealer,
  type KbsGetterOptions,
} from './remote.js';
export {
  type GetResource,
  isKbsUri,
  resolveSigningKey,
  SIGNING_CREDENTIALS_PATH,
  type UnsealOptions,
  unsealPayload,
  unsealSecret,
} from './unseal.js';
export {
  DEFAULT_MAX_DEPTH,
  DEFAULT_MAX_ENTRIES,
  DEFAULT_SEALED_ROOT,
  type EnvResult,
  type FileOutcome,
  type FileResult,
  pointerOf,
  replaceFileAtomic,
  type StepLogger,
  type Unseal,
  type UnsealVolumesOptions,
  unsealEnv,
  unsealedMode,
  unsealVolumes,
} from './volumes.js';
