// The measurement manifest published as an OCI artifact (cloud-api-adaptor pushed
// `measurements/azure/podvm:<version>` with oras: one JSON layer), pulled by tag and accepted only
// with a cosign signature by a trusted key over that artifact's manifest digest, and, when a Rekor key
// is given, a Rekor SET for that signature.
import type { KeyObject } from 'node:crypto';
import {
  type Descriptor,
  fetchSigstoreSignatures,
  type ImageManifest,
  MEDIA_TYPE,
  type PullProgressEvent,
  parseManifest,
  parseNormalizedNamed,
  type RegistryClient,
  type Repository,
  referenceName,
  SIGSTORE_SIGNATURE_ANNOTATION,
  verifySigstorePayload,
} from '@broker/image';
import { ArtifactError, ImageTagMismatchError, ReferenceValuesError } from './errors.js';
import { MAX_MANIFEST_BYTES, type PodVmMeasurements, parseMeasurementManifest } from './manifest.js';
import { SIGSTORE_BUNDLE_ANNOTATION, verifyRekorSet } from './rekor.js';

const TITLE_ANNOTATION = 'org.opencontainers.image.title';

export interface PullMeasurementsOptions {
  readonly client: RegistryClient;
  /** `registry/repository[:tag]`; without a tag, `imageTag` is used. */
  readonly reference: string;
  /** The tag asked for (--image-tag); it must equal the reference's tag when both are given. */
  readonly imageTag?: string;
  /** Keys one of which must have signed the artifact (cosign, key-based). */
  readonly signatureKeys: readonly KeyObject[];
  /** When set, the accepted signature must carry a Rekor SET signed by this key. */
  readonly rekorKey?: KeyObject;
  /** Accept the artifact without any signature check (local tests and demos only). */
  readonly allowUnsigned?: boolean;
  /** Told of the manifest and of the measurement layer as they arrive, as image-pull's progress is. */
  readonly onProgress?: (event: PullProgressEvent) => void;
}

export interface PulledMeasurements {
  readonly measurements: PodVmMeasurements;
  /** `registry/repository:tag` pulled. */
  readonly reference: string;
  readonly tag: string;
  /** Digest of the artifact's manifest, which the signature covers. */
  readonly manifestDigest: string;
  /** How the artifact was accepted. */
  readonly verification: 'unsigned-allowed' | 'signature' | 'signature+rekor';
  /** When Rekor logged the signature (with a Rekor key). */
  readonly integratedTime?: Date;
}

function fail(why: string, cause?: unknown): never {
  throw new ArtifactError(why, cause === undefined ? undefined : { cause });
}

/** The layer holding the manifest JSON: the only JSON-titled or JSON-typed layer, or the only layer. */
function measurementLayer(manifest: ImageManifest, where: string): Descriptor {
  const json = manifest.layers.filter(
    (l) =>
      l.mediaType === 'application/json' ||
      (l.annotations?.[TITLE_ANNOTATION] ?? '').toLowerCase().endsWith('.json'),
  );
  if (json.length === 1) return json[0] as Descriptor;
  if (json.length === 0 && manifest.layers.length === 1) return manifest.layers[0] as Descriptor;
  return fail(
    `${where} has ${manifest.layers.length} layers and ${json.length} of them are JSON; expected one measurement file`,
  );
}

async function acceptSignature(
  opts: PullMeasurementsOptions,
  repo: Repository,
  wantedReference: readonly string[],
  manifestDigest: string,
): Promise<Pick<PulledMeasurements, 'verification' | 'integratedTime'>> {
  if (opts.signatureKeys.length === 0) fail('no signature key was given to verify the artifact with');
  const signatures = await fetchSigstoreSignatures(opts.client, repo, manifestDigest);
  if (signatures.length === 0) fail(`no cosign signature is stored for ${manifestDigest}`);
  const reasons: string[] = [];
  for (const sig of signatures) {
    if (sig.format !== 'sigstore') continue;
    const b64 = sig.annotations[SIGSTORE_SIGNATURE_ANNOTATION];
    if (b64 === undefined) {
      reasons.push('a signature layer has no signature annotation');
      continue;
    }
    for (const key of opts.signatureKeys) {
      try {
        await verifySigstorePayload([key], sig.payload, b64, {
          validateManifestDigest(d) {
            if (d !== manifestDigest)
              throw new ReferenceValuesError(`signature is for ${d}, not ${manifestDigest}`, {
                code: 'SIGNATURE_MISMATCH',
              });
          },
          validateDockerReference(r) {
            if (!wantedReference.includes(r))
              throw new ReferenceValuesError(`signature is for ${r}, not ${wantedReference[0]}`, {
                code: 'SIGNATURE_MISMATCH',
              });
          },
        });
      } catch (e) {
        reasons.push((e as Error).message);
        continue;
      }
      if (opts.rekorKey === undefined) return { verification: 'signature' };
      const bundle = sig.annotations[SIGSTORE_BUNDLE_ANNOTATION];
      if (bundle === undefined) {
        reasons.push('the signature has no Rekor bundle annotation');
        continue;
      }
      try {
        const integratedTime = verifyRekorSet({
          rekorKey: opts.rekorKey,
          bundle,
          signerKey: key,
          base64Signature: b64,
          payload: sig.payload,
        });
        return { verification: 'signature+rekor', integratedTime };
      } catch (e) {
        reasons.push((e as Error).message);
      }
    }
  }
  return fail(
    `no signature of ${manifestDigest} is acceptable: ${[...new Set(reasons)].slice(0, 8).join('; ') || 'no sigstore signatures'}`,
  );
}

export async function pullMeasurementArtifact(opts: PullMeasurementsOptions): Promise<PulledMeasurements> {
  let ref: ReturnType<typeof parseNormalizedNamed>;
  try {
    ref = parseNormalizedNamed(opts.reference);
  } catch (e) {
    fail(`--image ${JSON.stringify(opts.reference)}: ${(e as Error).message}`, e);
  }
  if (ref.digest !== undefined) {
    fail('--image: give the artifact by tag; the tag is what the reference values are selected by');
  }
  const tag = ref.tag ?? opts.imageTag;
  if (tag === undefined) fail('--image has no tag and no --image-tag was given');
  if (ref.tag !== undefined && opts.imageTag !== undefined && ref.tag !== opts.imageTag) {
    throw new ImageTagMismatchError(`--image has tag ${ref.tag}, but --image-tag is ${opts.imageTag}`);
  }
  const repo: Repository = { domain: ref.domain, path: ref.path };
  const name = referenceName(ref);
  const reference = `${name}:${tag}`;
  let fetched: Awaited<ReturnType<RegistryClient['getManifest']>>;
  try {
    fetched = await opts.client.getManifest(repo, tag, {
      accept: [MEDIA_TYPE.ociManifest, MEDIA_TYPE.dockerManifest],
    });
  } catch (e) {
    fail(`reading ${reference}: ${(e as Error).message}`, e);
  }
  opts.onProgress?.({ kind: 'manifest', reference, digest: fetched.digest });
  let manifest: ReturnType<typeof parseManifest>;
  try {
    manifest = parseManifest(fetched.bytes, fetched.contentType);
  } catch (e) {
    fail(`${reference}: ${(e as Error).message}`, e);
  }
  if (manifest.kind !== 'manifest') fail(`${reference} is an index, not a single artifact manifest`);
  const verification = opts.allowUnsigned
    ? { verification: 'unsigned-allowed' as const }
    : await acceptSignature(opts, repo, [name, reference], fetched.digest);
  const layer = measurementLayer(manifest, reference);
  if (layer.size > MAX_MANIFEST_BYTES) {
    fail(`${reference}: the measurement layer has ${layer.size} bytes, more than ${MAX_MANIFEST_BYTES}`);
  }
  const layerEvent = { kind: 'layer', index: 0, count: 1, digest: layer.digest, size: layer.size } as const;
  opts.onProgress?.({ ...layerEvent, bytes: 0, done: false });
  let bytes: Buffer;
  try {
    bytes = await opts.client.getBlobBytes(repo, layer, MAX_MANIFEST_BYTES);
  } catch (e) {
    fail(`${reference}: reading the measurement layer: ${(e as Error).message}`, e);
  }
  opts.onProgress?.({ ...layerEvent, bytes: bytes.length, done: true });
  return {
    measurements: parseMeasurementManifest(bytes),
    reference,
    tag,
    manifestDigest: fetched.digest,
    ...verification,
  };
}
