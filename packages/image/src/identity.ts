/**
 * `signedIdentity` matching (containers/image `policy_reference_match.go`):
 * does the identity a signature claims (`critical.identity.docker-reference`)
 * fit the image being evaluated? Both sides are normalised first, so
 * `index.docker.io/x` equals `docker.io/x`. A claim that does not parse never
 * matches.
 */
import type { IdentityMatcher } from './policy.js';
import {
  type DockerReference,
  isNameOnly,
  parseNamed,
  parseNormalizedNamed,
  referenceName,
  referenceString,
} from './reference.js';

function tryParse(s: string): DockerReference | undefined {
  try {
    return parseNormalizedNamed(s);
  } catch {
    return undefined;
  }
}

/** `matchRepoDigestOrExactReferenceValues`. */
function repoDigestOrExact(intended: DockerReference, signature: DockerReference): boolean {
  if (isNameOnly(signature)) return false;
  if (intended.tag !== undefined) return referenceString(signature) === referenceString(intended);
  if (intended.digest !== undefined) return referenceName(signature) === referenceName(intended);
  return false;
}

function exact(intended: DockerReference, signature: DockerReference): boolean {
  if (isNameOnly(intended) || isNameOnly(signature)) return false;
  return referenceString(signature) === referenceString(intended);
}

/** `remapIdentity`: replaces the first occurrence of `prefix` when the name starts with it at a `/` boundary. */
function remap(
  m: { prefix: string; signedPrefix: string },
  ref: DockerReference,
): DockerReference | undefined {
  const name = referenceName(ref);
  const matches =
    name.length === m.prefix.length
      ? name === m.prefix
      : name.length > m.prefix.length && name.startsWith(m.prefix) && name[m.prefix.length] === '/';
  if (!matches) return ref;
  const s = referenceString(ref);
  const i = s.indexOf(m.prefix);
  const replaced = i < 0 ? s : `${s.slice(0, i)}${m.signedPrefix}${s.slice(i + m.prefix.length)}`;
  try {
    return parseNamed(replaced);
  } catch {
    return undefined;
  }
}

/**
 * True when `signatureReference` is acceptable for an image whose own docker
 * reference is `image` (null when the image has none, e.g. a `dir:` image
 * without `--reference`: then only `exactReference` and `exactRepository`
 * can match, as in containers/image).
 */
export function matchesDockerReference(
  matcher: IdentityMatcher,
  image: DockerReference | null,
  signatureReference: string,
): boolean {
  switch (matcher.type) {
    case 'unchecked':
      // image-rs semantics of a rule without `signedIdentity`: any identity (the digest is still checked).
      return true;
    case 'exactReference': {
      const intended = tryParse(matcher.dockerReference);
      const signature = tryParse(signatureReference);
      return intended !== undefined && signature !== undefined && exact(intended, signature);
    }
    case 'exactRepository': {
      const intended = tryParse(matcher.dockerRepository);
      const signature = tryParse(signatureReference);
      return (
        intended !== undefined &&
        signature !== undefined &&
        referenceName(signature) === referenceName(intended)
      );
    }
    default:
      break;
  }
  if (image === null) return false;
  const signature = tryParse(signatureReference);
  if (signature === undefined) return false;
  switch (matcher.type) {
    case 'matchExact':
      return exact(image, signature);
    case 'matchRepoDigestOrExact':
      return repoDigestOrExact(image, signature);
    case 'matchRepository':
      return referenceName(signature) === referenceName(image);
    case 'remapIdentity': {
      const intended = remap(matcher, image);
      return intended !== undefined && repoDigestOrExact(intended, signature);
    }
  }
}
