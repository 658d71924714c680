/**
 * cosign's key-based signatures of an image, in its registry format: per signed digest, a manifest
 * tagged `sha256-<hex>.sig` whose one layer is the simple-signing payload, with the signature in the
 * layer's `dev.cosignproject.cosign/signature` annotation. As `cosign sign --recursive` does, the
 * index and each platform's manifest are signed, so that a verifier that checks either finds one.
 */
import type { KeyObject } from 'node:crypto';
import {
  createSigstorePayload,
  digestHex,
  SIGSTORE_SIGNATURE_ANNOTATION,
  SIGSTORE_SIGNATURE_MIME_TYPE,
  signPayload,
} from '@broker/image';
import { type Blob, blob, type Descriptor, jsonBlob, manifestBlob, REF_NAME } from './oci.js';

/** The tag cosign reads a digest's signatures from. */
export function signatureTag(digest: string): string {
  return `sha256-${digestHex(digest)}.sig`;
}

export interface SignatureManifest {
  readonly tag: string;
  readonly manifest: Blob;
  readonly blobs: readonly Blob[];
}

/**
 * The signature manifest of `digest` for the image at `dockerReference` (its repository, as
 * `cosign sign` writes `critical.identity.docker-reference`).
 */
export function signatureManifest(
  key: KeyObject,
  dockerReference: string,
  digest: string,
): SignatureManifest {
  const payload = Buffer.from(createSigstorePayload({ dockerReference, manifestDigest: digest }));
  const layer = blob(SIGSTORE_SIGNATURE_MIME_TYPE, payload, {
    annotations: { [SIGSTORE_SIGNATURE_ANNOTATION]: signPayload(key, payload) },
  });
  // cosign's config: an empty image whose only diff_id is the payload's digest.
  const config = jsonBlob('application/vnd.oci.image.config.v1+json', {
    architecture: '',
    config: {},
    created: '0001-01-01T00:00:00Z',
    history: [{ created: '0001-01-01T00:00:00Z' }],
    os: '',
    rootfs: { type: 'layers', diff_ids: [layer.descriptor.digest] },
  });
  const tag = signatureTag(digest);
  const manifest = manifestBlob(config, [layer]);
  return { tag, manifest, blobs: [config, layer] };
}

/** The index.json entry of a signature manifest in an OCI layout. */
export function signatureEntry(sig: SignatureManifest): Descriptor {
  return { ...sig.manifest.descriptor, annotations: { [REF_NAME]: sig.tag } };
}
