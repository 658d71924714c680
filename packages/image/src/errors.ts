// Errors of the image library: one base class whose `code` says what failed.

/** What the image library failed at; callers branch on it (or on the class), never on `name`. `RegistryError`'s `code` is the registry's own (`MANIFEST_UNKNOWN`, …) instead. */
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
  /** A blob larger than the limit for what it holds. */
  | 'BLOB_TOO_LARGE'
  /** The rootfs to unpack into exists and is not empty. */
  | 'ROOTFS_NOT_EMPTY'
  /** A key, key file or keyring that cannot be read or used (encryption recipients, decryption keys, signature keys). */
  | 'KEY_UNUSABLE'
  /** A wrapped layer key (JWE, pkcs7 or OpenPGP packet) that cannot be parsed. */
  | 'KEY_PACKET_INVALID'
  /** An encryption request that cannot be carried out: no key, a destination by digest, not an image manifest, or a layer already encrypted or of a media type that cannot be encrypted. */
  | 'ENCRYPT_REQUEST_INVALID'
  /** A signature that does not vouch for this image or identity. */
  | 'SIGNATURE_REJECTED'
  /** Signatures that cannot be fetched or read, or too many of them. */
  | 'SIGNATURE_UNREADABLE'
  /** A policy requirement this library does not implement (a key path URL, a key type). */
  | 'POLICY_UNSUPPORTED'
  /** A platform that is not `os/arch[/variant]`. */
  | 'PLATFORM_INVALID'
  /** A file of a directory image that cannot be read, or is too large. */
  | 'DIR_IMAGE_UNREADABLE'
  /** The local docker-registry is not installed or did not start. */
  | 'LOCAL_REGISTRY_FAILED'
  /** Any other failure. */
  | 'IMAGE_FAILED';

/**
 * The base of every error of this package: `code` says what failed; branch on it or on the class, never on `name`.
 * `C` is only widened by `RegistryError`, whose `code` is whatever the registry sent; every other error carries an
 * `ImageErrorCode`.
 */
export class ImageError<C extends string | undefined = ImageErrorCode> extends Error {
  override readonly name: string = 'ImageError';
  readonly code: C;
  constructor(message: string, options?: { cause?: unknown; code?: C }) {
    super(message, options);
    // Without a code given, C is the default ImageErrorCode (RegistryError sets its own).
    this.code = (options?.code ?? 'IMAGE_FAILED') as C;
  }
}
