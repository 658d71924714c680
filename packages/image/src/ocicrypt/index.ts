export { encryptLayerBytes, LayerHmacError, layerDecipher, verifyCiphertextHmac } from './block-cipher.js';
export { DecryptionKeyArgumentError, unwrappersFromArguments } from './decryption-keys.js';
export {
  buildAnnotatedImage,
  type EncryptedLayer,
  encryptionAnnotations,
  encryptLayer,
  jweWrapper,
  type KeyWrapper,
  privateOptionsBytes,
} from './encrypt.js';
export { encryptRegistryImage, wrappersFromArguments } from './encrypt-image.js';
export { type EncryptedBlobFile, encryptLayerStream } from './encrypt-stream.js';
export { jweUnwrapper, parseJwePrivateKey } from './jwe.js';
export {
  answerKeyProviderRequest,
  KeyProviderRequestError,
  MAX_KEY_PROVIDER_REQUEST_BYTES,
} from './keyprovider-cmd.js';
export {
  type AnnotationPacket,
  AnnotationPacketError,
  ATTESTATION_AGENT_PROTOCOL,
  attestationAgentUnwrapper,
  attestationAgentWrapper,
  parseAnnotationPacket,
  unwrapAnnotationPacket,
} from './keyprovider-packet.js';
export {
  ANNOTATION_PREFIX,
  ENCRYPTED_SUFFIX,
  EncryptedLayerError,
  KEYS_ANNOTATION_PREFIX,
  type LayerEncryption,
  layerEncryption,
  PUBOPTS_ANNOTATION,
  type WrappedKey,
} from './layer-info.js';
export {
  LAYER_CIPHER,
  LayerOptionsError,
  type PrivateOptions,
  type PublicOptions,
  parsePrivateOptions,
  parsePublicOptions,
} from './options.js';
export { PGP_PROTOCOL, pgpUnwrapper, pgpWrapper, readPgpPrivateKeys, readPgpPublicKeys } from './pgp.js';
export {
  PKCS7_PROTOCOL,
  parseEnvelopedData,
  parsePkcs7Certificate,
  pkcs7Unwrapper,
  pkcs7Wrapper,
} from './pkcs7.js';
export {
  type KeyUnwrapper,
  LayerKeyError,
  UNWRAP_FAILED,
  type UnwrapResult,
  unwrapLayerKey,
} from './unwrap.js';
