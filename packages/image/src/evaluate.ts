/**
 * Policy evaluation (containers/image `IsRunningImageAllowed`): pick the one
 * scope that applies, then every requirement of it must allow the image (in
 * order; the first denial decides). Inside `sigstoreSigned`, any one
 * signature that verifies and matches suffices.
 *
 * Keys are read only when a signature has to be checked, as containers/image
 * does: an unsigned image never causes a key fetch, which is what lets a
 * rejected pod request no secrets.
 */

import type { KeyObject } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { digestAlgorithm, digestOf, parseDigest } from './digest.js';
import { ImageError } from './errors.js';
import { type GpgKeyring, loadGpgKeyring, verifySimpleSigning } from './gpg.js';
import { matchesDockerReference } from './identity.js';
import { goQuote } from './json.js';
import { type KeySource, type Policy, type PolicyRequirement, requirementsForImage } from './policy.js';
import type { DockerReference } from './reference.js';
import {
  parsePublicKeyPem,
  SIGSTORE_SIGNATURE_ANNOTATION,
  SIGSTORE_SIGNATURE_MIME_TYPE,
  type SigstorePayload,
  type UntrustedSignature,
  verifySigstorePayload,
} from './sigstore.js';

/** Reads the bytes behind a `keyPath` (a file, or e.g. a `kbs:///` resource through a resolver). */
export type KeyReader = (path: string) => Promise<Uint8Array>;

/** Largest public key file read. */
export const MAX_KEY_BYTES = 1024 * 1024;

/** An image as the policy sees it. */
export interface PolicyImage {
  /** `docker` or `dir`. */
  readonly transport: string;
  /** The transport's `PolicyConfigurationIdentity`. */
  readonly policyIdentity: string;
  /** The transport's `PolicyConfigurationNamespaces`, most specific first. */
  readonly policyNamespaces: readonly string[];
  /** How messages name the image: `docker://busybox:latest`, `dir:/path`. */
  readonly imageName: string;
  /** The image's docker identity; null when it has none (signature identities relative to it then never match). */
  readonly dockerReference: DockerReference | null;
  /** The raw manifest whose digest signatures must vouch for. */
  manifest(): Promise<Uint8Array>;
  /**
   * Further manifest digests a signature may vouch for. Empty as in
   * containers/image; image-rs also accepts the digest of the index the
   * platform manifest was chosen from.
   */
  readonly extraManifestDigests?: readonly string[];
  /** The signatures stored with the image, unverified. */
  signatures(): Promise<readonly UntrustedSignature[]>;
  /**
   * The GPG simple signatures, when they come from elsewhere than
   * `signatures()` (a registry image: its lookaside store or the registry's
   * signature API); read only when a `signedBy` requirement asks.
   */
  simpleSignatures?(): Promise<readonly UntrustedSignature[]>;
}

export interface EvaluationOptions {
  /** Reads `keyPath`/`keyPaths` (default: local files; anything with `://` is refused). */
  readonly readKey?: KeyReader;
}

export type RequirementOutcome = 'accepted' | 'rejected' | 'skipped';

export interface RequirementVerdict {
  readonly index: number;
  readonly requirement: PolicyRequirement;
  /** `skipped`: not evaluated because an earlier requirement denied the image. */
  readonly outcome: RequirementOutcome;
  readonly reason?: string;
  /** The payload of the signature that satisfied a `sigstoreSigned` or `signedBy` requirement. */
  readonly signature?: SigstorePayload;
}

export interface PolicyDecision {
  readonly allowed: boolean;
  readonly transport: string;
  /** The scope used, or null when `default` applied. */
  readonly scope: string | null;
  readonly verdicts: readonly RequirementVerdict[];
  /** Why the image was denied, in containers/image's words. */
  readonly reason?: string;
  /** The requirement that denied it. */
  readonly deniedBy?: PolicyRequirement;
}

/** Go's rendering of a file error (`open /x: no such file or directory`). */
export function goFileError(op: string, path: string, e: unknown): string {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  const text: Record<string, string> = {
    ENOENT: 'no such file or directory',
    EACCES: 'permission denied',
    EISDIR: 'is a directory',
    ENOTDIR: 'not a directory',
    ELOOP: 'too many levels of symbolic links',
  };
  return `${op} ${path}: ${(code !== undefined ? text[code] : undefined) ?? (e as Error).message}`;
}

/** The default key reader: a local file of at most `MAX_KEY_BYTES`. */
export async function readKeyFile(path: string): Promise<Uint8Array> {
  if (path.includes('://'))
    throw new ImageError(`no resolver for key path ${goQuote(path)}`, { code: 'POLICY_UNSUPPORTED' });
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (e) {
    throw new ImageError(goFileError('open', path, e), { code: 'KEY_UNUSABLE' });
  }
  if (bytes.byteLength > MAX_KEY_BYTES)
    throw new ImageError(`key file ${path} is larger than ${MAX_KEY_BYTES} bytes`, { code: 'KEY_UNUSABLE' });
  return bytes;
}

async function keyBytes(source: KeySource, readKey: KeyReader): Promise<Uint8Array[]> {
  switch (source.kind) {
    case 'keyPath':
      return [await readKey(source.path)];
    case 'keyPaths': {
      const out: Uint8Array[] = [];
      for (const p of source.paths) out.push(await readKey(p));
      return out;
    }
    case 'keyData':
      return [source.data];
    case 'keyDatas':
      return [...source.datas];
  }
}

/** The public keys of a requirement (containers/image `prepareTrustRoot`). */
export async function loadPublicKeys(
  source: KeySource,
  readKey: KeyReader = readKeyFile,
): Promise<KeyObject[]> {
  const pems = await keyBytes(source, readKey);
  return pems.map((pem, i) => {
    try {
      return parsePublicKeyPem(pem);
    } catch (e) {
      throw new ImageError(`parsing public key ${i + 1}: ${(e as Error).message}`, { code: 'KEY_UNUSABLE' });
    }
  });
}

type Outcome = { allowed: true; signature?: SigstorePayload } | { allowed: false; reason: string };

/** Evaluates `policy` for `image`. Never throws for a denial: the decision says why. */
export async function evaluatePolicy(
  policy: Policy,
  image: PolicyImage,
  options: EvaluationOptions = {},
): Promise<PolicyDecision> {
  const choice = requirementsForImage(policy, image.transport, image.policyIdentity, image.policyNamespaces);
  const verdicts: RequirementVerdict[] = [];
  let denial: { reason: string; requirement: PolicyRequirement } | undefined;
  for (const [index, requirement] of choice.requirements.entries()) {
    if (denial !== undefined) {
      verdicts.push({ index, requirement, outcome: 'skipped' });
      continue;
    }
    const outcome = await evaluateRequirement(requirement, image, options);
    if (outcome.allowed) {
      verdicts.push({
        index,
        requirement,
        outcome: 'accepted',
        ...(outcome.signature !== undefined ? { signature: outcome.signature } : {}),
      });
    } else {
      verdicts.push({ index, requirement, outcome: 'rejected', reason: outcome.reason });
      denial = { reason: outcome.reason, requirement };
    }
  }
  if (choice.requirements.length === 0) {
    denial = {
      reason: 'List of verification policy requirements must not be empty',
      requirement: { type: 'reject' },
    };
  }
  return {
    allowed: denial === undefined,
    transport: choice.transport,
    scope: choice.scope,
    verdicts,
    ...(denial !== undefined ? { reason: denial.reason, deniedBy: denial.requirement } : {}),
  };
}

async function evaluateRequirement(
  req: PolicyRequirement,
  image: PolicyImage,
  options: EvaluationOptions,
): Promise<Outcome> {
  switch (req.type) {
    case 'insecureAcceptAnything':
      return { allowed: true };
    case 'reject':
      return { allowed: false, reason: `Running image ${image.imageName} is rejected by policy.` };
    case 'signedBaseLayer':
      return { allowed: false, reason: 'signedBaseLayer not implemented yet!' };
    case 'signedBy':
      return signedByAllows(req, image, options);
    case 'sigstoreSigned':
      return sigstoreAllows(req, image, options);
  }
}

/** `prSigstoreSigned.isRunningImageAllowed`. */
async function sigstoreAllows(
  req: Extract<PolicyRequirement, { type: 'sigstoreSigned' }>,
  image: PolicyImage,
  options: EvaluationOptions,
): Promise<Outcome> {
  let sigs: readonly UntrustedSignature[];
  try {
    sigs = await image.signatures();
  } catch (e) {
    return { allowed: false, reason: (e as Error).message };
  }
  const readKey = options.readKey ?? readKeyFile;
  // Loaded on the first signature that needs them, once per evaluation.
  let keys: Promise<KeyObject[]> | undefined;
  const rejections: string[] = [];
  let nonSigstore = 0;
  let nonSignatureAttachments = 0;
  for (const sig of sigs) {
    if (sig.format !== 'sigstore') {
      nonSigstore++;
      continue;
    }
    if (sig.mimeType !== SIGSTORE_SIGNATURE_MIME_TYPE) {
      nonSignatureAttachments++;
      continue;
    }
    try {
      keys ??= loadPublicKeys(req.keySource, readKey);
      const trusted = await keys;
      const b64 = sig.annotations[SIGSTORE_SIGNATURE_ANNOTATION];
      if (b64 === undefined)
        throw new ImageError(`missing ${SIGSTORE_SIGNATURE_ANNOTATION} annotation`, {
          code: 'SIGNATURE_REJECTED',
        });
      const payload = await verifySigstorePayload(trusted, sig.payload, b64, {
        validateManifestDigest: manifestDigestRule(image),
        validateDockerReference: (ref) => {
          if (!matchesDockerReference(req.signedIdentity, image.dockerReference, ref)) {
            throw new ImageError(`Signature for identity ${goQuote(ref)} is not accepted`, {
              code: 'SIGNATURE_REJECTED',
            });
          }
        },
      });
      return { allowed: true, signature: payload };
    } catch (e) {
      rejections.push((e as Error).message);
    }
  }
  if (rejections.length === 0) {
    if (nonSigstore === 0 && nonSignatureAttachments === 0) {
      return { allowed: false, reason: 'A signature was required, but no signature exists' };
    }
    return {
      allowed: false,
      reason: `A signature was required, but no signature exists (${nonSigstore} non-sigstore signatures, ${nonSignatureAttachments} sigstore non-signature attachments)`,
    };
  }
  if (rejections.length === 1) return { allowed: false, reason: rejections[0] ?? '' };
  return {
    allowed: false,
    reason: `None of the signatures were accepted, reasons: ${rejections.join('; ')}`,
  };
}

/** The manifest-digest rule shared by both signature kinds. */
function manifestDigestRule(image: PolicyImage): (digest: string) => Promise<void> {
  return async (digest) => {
    const manifest = await image.manifest();
    const algorithm = digestAlgorithm(parseDigest(digest));
    const ok =
      digestOf(manifest, algorithm) === digest || (image.extraManifestDigests ?? []).includes(digest);
    if (!ok)
      throw new ImageError(`Signature for digest ${digest} does not match`, { code: 'SIGNATURE_REJECTED' });
  };
}

/**
 * `prSignedBy.isRunningImageAllowed` with `keyType: GPGKeys`: any one GPG
 * simple signature made by a trusted key (valid now), whose payload names
 * this manifest and an accepted identity, allows the image.
 */
async function signedByAllows(
  req: Extract<PolicyRequirement, { type: 'signedBy' }>,
  image: PolicyImage,
  options: EvaluationOptions,
): Promise<Outcome> {
  let sigs: readonly UntrustedSignature[];
  try {
    const all =
      image.simpleSignatures !== undefined ? await image.simpleSignatures() : await image.signatures();
    sigs = all.filter((s) => s.format === 'simple-signing');
  } catch (e) {
    return { allowed: false, reason: (e as Error).message };
  }
  const readKey = options.readKey ?? readKeyFile;
  let keyring: Promise<GpgKeyring> | undefined;
  const rejections: string[] = [];
  for (const sig of sigs) {
    if (sig.format !== 'simple-signing') continue;
    try {
      if (req.keyType !== 'GPGKeys')
        throw new ImageError(`Unimplemented "keyType" value ${goQuote(req.keyType)}`, {
          code: 'POLICY_UNSUPPORTED',
        });
      keyring ??= keyBytes(req.keySource, readKey).then(loadGpgKeyring);
      const payload = await verifySimpleSigning(await keyring, sig.blob, {
        validateManifestDigest: manifestDigestRule(image),
        validateDockerReference: (ref) => {
          if (!matchesDockerReference(req.signedIdentity, image.dockerReference, ref)) {
            throw new ImageError(`Signature for identity ${goQuote(ref)} is not accepted`, {
              code: 'SIGNATURE_REJECTED',
            });
          }
        },
      });
      const { signerFingerprint: _signer, ...signature } = payload;
      return { allowed: true, signature };
    } catch (e) {
      rejections.push((e as Error).message);
    }
  }
  if (rejections.length === 0)
    return { allowed: false, reason: 'A signature was required, but no signature exists' };
  if (rejections.length === 1) return { allowed: false, reason: rejections[0] ?? '' };
  return {
    allowed: false,
    reason: `None of the signatures were accepted, reasons: ${rejections.join('; ')}`,
  };
}
