/**
 * Sigstore attachments in a registry (cosign's tag convention): the
 * signatures of manifest `sha256:<hex>` live in the same repository under
 * the tag `sha256-<hex>.sig`, an OCI manifest with one layer per signature
 * (the layer blob is the payload; the signature is an annotation).
 */

import { digestOf } from '../digest.js';
import { ImageError } from '../errors.js';
import { type Descriptor, MEDIA_TYPE, parseManifest } from '../manifest.js';
import { MAX_SIGNATURE_BYTES, sigstoreAttachmentTag, type UntrustedSignature } from '../sigstore.js';
import { isManifestUnknown, type RegistryClient, type Repository } from './client.js';

/** Most attachment layers read from one `.sig` manifest. */
export const MAX_SIGNATURE_ATTACHMENTS = 128;

type SigstoreSignature = Extract<UntrustedSignature, { format: 'sigstore' }>;

/** The attachment manifest of `manifestDigest`, or undefined when there is none. */
async function attachmentManifest(client: RegistryClient, repo: Repository, manifestDigest: string) {
  const tag = sigstoreAttachmentTag(manifestDigest);
  let fetched: Awaited<ReturnType<RegistryClient['getManifest']>>;
  try {
    fetched = await client.getManifest(repo, tag, { accept: [MEDIA_TYPE.ociManifest] });
  } catch (e) {
    if (isManifestUnknown(e)) return undefined;
    throw e;
  }
  const mime = fetched.contentType.split(';')[0]?.trim() ?? '';
  if (mime !== MEDIA_TYPE.ociManifest) {
    throw new ImageError(
      `unexpected MIME type for sigstore attachment manifest ${repo.domain}/${repo.path}:${tag}: ${JSON.stringify(mime)}`,
      { code: 'SIGNATURE_UNREADABLE' },
    );
  }
  const parsed = parseManifest(fetched.bytes, fetched.contentType);
  if (parsed.kind !== 'manifest')
    throw new ImageError(`sigstore attachment manifest ${tag} is not an image manifest`, {
      code: 'SIGNATURE_UNREADABLE',
    });
  return parsed;
}

/** The signatures stored for `manifestDigest` (none when the `.sig` tag does not exist). */
export async function fetchSigstoreSignatures(
  client: RegistryClient,
  repo: Repository,
  manifestDigest: string,
): Promise<UntrustedSignature[]> {
  const manifest = await attachmentManifest(client, repo, manifestDigest);
  if (manifest === undefined) return [];
  if (manifest.layers.length > MAX_SIGNATURE_ATTACHMENTS) {
    throw new ImageError(
      `sigstore attachment manifest of ${manifestDigest} has more than ${MAX_SIGNATURE_ATTACHMENTS} layers`,
      { code: 'SIGNATURE_UNREADABLE' },
    );
  }
  const out: UntrustedSignature[] = [];
  for (const layer of manifest.layers) {
    const payload = await client.getBlobBytes(repo, layer, MAX_SIGNATURE_BYTES);
    out.push({
      format: 'sigstore',
      mimeType: layer.mediaType,
      payload,
      annotations: layer.annotations ?? {},
    });
  }
  return out;
}

function sameAnnotations(
  a: Readonly<Record<string, string>> | undefined,
  b: Readonly<Record<string, string>>,
): boolean {
  const ka = Object.keys(a ?? {});
  return ka.length === Object.keys(b).length && ka.every((k) => a?.[k] === b[k]);
}

/**
 * Adds signatures to the `.sig` attachment of `manifestDigest`, keeping those
 * already there (containers/image appends the same way); identical ones are
 * not duplicated. Returns the attachment manifest's digest.
 */
export async function pushSigstoreSignatures(
  client: RegistryClient,
  repo: Repository,
  manifestDigest: string,
  signatures: readonly SigstoreSignature[],
): Promise<string> {
  const existing = await attachmentManifest(client, repo, manifestDigest);
  const layers: Descriptor[] = [...(existing?.layers ?? [])];
  for (const sig of signatures) {
    const digest = digestOf(sig.payload);
    if (
      layers.some(
        (l) =>
          l.digest === digest &&
          l.mediaType === sig.mimeType &&
          sameAnnotations(l.annotations, sig.annotations),
      )
    ) {
      continue;
    }
    await client.pushBlob(repo, sig.payload);
    layers.push({
      mediaType: sig.mimeType,
      digest,
      size: sig.payload.byteLength,
      annotations: { ...sig.annotations },
    });
  }
  const config = Buffer.from(
    JSON.stringify({
      architecture: '',
      os: '',
      config: {},
      rootfs: { type: 'layers', diff_ids: layers.map((l) => l.digest) },
    }),
  );
  await client.pushBlob(repo, config);
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: MEDIA_TYPE.ociManifest,
      config: { mediaType: MEDIA_TYPE.ociConfig, digest: digestOf(config), size: config.byteLength },
      layers: layers.map((l) => ({
        mediaType: l.mediaType,
        digest: l.digest,
        size: l.size,
        ...(l.annotations !== undefined ? { annotations: l.annotations } : {}),
      })),
    }),
  );
  return client.putManifest(repo, sigstoreAttachmentTag(manifestDigest), manifest, MEDIA_TYPE.ociManifest);
}
