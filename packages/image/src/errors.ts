// Errors of the image library: one base class whose `code` says what failed.

/** What the image library failed at; callers branch on it (or on the class), never on `name`. `RegistryError` stands apart: its `code` is the registry's own (`MANIFEST_UNKNOWN`, …). */
export type ImageErrorCode =
  /** Not an `algorithm:hex` digest this library accepts (`InvalidDigestError`). */
  | 'DIGEST_INVALID'
  /** A JSON document of the wrong shape or size (`JsonFormatError`). */
  | 'JSON_INVALID'
  /** A layer that cannot be read (`LayerError`). */
  | 'LAYER_INVALID'
  /** An image exceeds an expansion limit (`ExpansionLimitError`). */
  | 'EXPANSION_LIMIT'
  /** A registries.d file is not valid (`RegistriesDError`). */
  | 'REGISTRIES_D_INVALID'
  /** A manifest or index that is not valid (`InvalidManifestError`). */
  | 'MANIFEST_INVALID'
  /** An encrypted layer's HMAC does not verify (`LayerHmacError`). */
  | 'LAYER_HMAC_MISMATCH'
  /** A `--decryption-key` argument that cannot be used (`DecryptionKeyArgumentError`). */
  | 'DECRYPTION_KEY_ARGUMENT_INVALID'
  /** DER that cannot be parsed (`DerError`). */
  | 'DER_INVALID'
  /** A key provider request that is not valid (`KeyProviderRequestError`). */
  | 'KEY_PROVIDER_REQUEST_INVALID'
  /** A key provider annotation packet that is not valid (`AnnotationPacketError`). */
  | 'ANNOTATION_PACKET_INVALID'
  /** An encrypted layer's annotations that are not valid (`EncryptedLayerError`). */
  | 'ENCRYPTED_LAYER_INVALID'
  /** Layer encryption options that are not valid (`LayerOptionsError`). */
  | 'LAYER_OPTIONS_INVALID'
  /** No layer key could be unwrapped (`LayerKeyError`). */
  | 'LAYER_KEY_UNAVAILABLE'
  /** A containers-policy.json that is not valid (`InvalidPolicyError`). */
  | 'POLICY_INVALID'
  /** A pull failed (`ImagePullError`). */
  | 'PULL_FAILED'
  /** An image reference that is not valid (`InvalidReferenceError`). */
  | 'REFERENCE_INVALID'
  /** Registry authentication failed or its file is not valid (`RegistryAuthError`). */
  | 'REGISTRY_AUTH_FAILED'
  /** Content whose digest or size is not the one asked for (`DigestMismatchError`). */
  | 'DIGEST_MISMATCH'
  /** The HTTP exchange with a registry failed (`HttpError`). */
  | 'HTTP_FAILED'
  /** A proxy setting that is not valid (`ProxyConfigError`). */
  | 'PROXY_CONFIG_INVALID'
  /** A signature that is not valid (`InvalidSignatureError`). */
  | 'SIGNATURE_INVALID'
  /** A public key that is not usable (`InvalidPublicKeyError`). */
  | 'PUBLIC_KEY_INVALID'
  /** A layer could not be unpacked safely (`UnpackError`). */
  | 'UNPACK_FAILED'
  /** Any other failure. */
  | 'IMAGE_FAILED';

/** The base of every error of this package: `code` says what failed; branch on it or on the class, never on `name`. */
export class ImageError extends Error {
  override readonly name: string = 'ImageError';
  readonly code: ImageErrorCode;
  constructor(message: string, options?: { cause?: unknown; code?: ImageErrorCode }) {
    super(message, options);
    this.code = options?.code ?? 'IMAGE_FAILED';
  }
}
