/**
 * Docker image references with containers/image's `docker/reference`
 * semantics: `busybox` is `docker.io/library/busybox`, `index.docker.io` is
 * `docker.io`, upper case in the repository path is an error, and the docker
 * transport adds `:latest` to a bare name and refuses a tag together with a
 * digest.
 *
 * The grammar is matched by hand rather than with the upstream regular
 * expressions: those are linear in Go's RE2 but backtrack exponentially in a
 * JavaScript engine (`[a-z0-9]+(?:[-]*[a-z0-9]+)*`).
 */

import { InvalidDigestError, parseDigest } from './digest.js';
import { ImageError, type ImageErrorCode } from './errors.js';

export const DEFAULT_DOMAIN = 'docker.io';
const LEGACY_DEFAULT_DOMAIN = 'index.docker.io';
const OFFICIAL_REPO_NAME = 'library';
export const DEFAULT_TAG = 'latest';
/** `NameTotalLengthMax`. */
export const NAME_TOTAL_LENGTH_MAX = 255;

/** A reference that does not parse; messages are docker/reference's. */
export class InvalidReferenceError extends ImageError {
  override readonly code: ImageErrorCode = 'REFERENCE_INVALID';
  override readonly name: string = 'InvalidReferenceError';
}

/**
 * A parsed reference. `domain` is empty only for references parsed without
 * normalisation that had none; `tag` and `digest` are each optional.
 */
export interface DockerReference {
  readonly domain: string;
  readonly path: string;
  readonly tag?: string | undefined;
  readonly digest?: string | undefined;
}

function isAlnumLower(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39);
}
function isAlnum(c: number): boolean {
  return isAlnumLower(c) || (c >= 0x41 && c <= 0x5a);
}

/** `[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*` */
export function isNameComponent(s: string): boolean {
  const n = s.length;
  let i = 0;
  if (n === 0) return false;
  for (;;) {
    if (!isAlnumLower(s.charCodeAt(i))) return false;
    while (i < n && isAlnumLower(s.charCodeAt(i))) i++;
    if (i === n) return true;
    const c = s[i];
    if (c === '.') i++;
    else if (c === '_') {
      i++;
      if (s[i] === '_') i++;
    } else if (c === '-') {
      while (s[i] === '-') i++;
    } else return false;
    if (i === n) return false;
  }
}

/** `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])` */
function isDomainComponent(s: string): boolean {
  const n = s.length;
  if (n === 0 || !isAlnum(s.charCodeAt(0)) || !isAlnum(s.charCodeAt(n - 1))) return false;
  for (let i = 1; i < n - 1; i++) {
    const c = s.charCodeAt(i);
    if (!isAlnum(c) && c !== 0x2d) return false;
  }
  return true;
}

/** docker/reference `DomainRegexp`, anchored: `host(.host)*(:port)?`. */
export function isDomain(s: string): boolean {
  const colon = s.indexOf(':');
  const host = colon < 0 ? s : s.slice(0, colon);
  if (colon >= 0 && !/^[0-9]+$/.test(s.slice(colon + 1))) return false;
  return host.split('.').every(isDomainComponent);
}

/** docker/reference `NameRegexp`, anchored: an optional domain, then path components. */
export function isName(s: string): boolean {
  const parts = s.split('/');
  if (parts.every(isNameComponent)) return true;
  return parts.length >= 2 && isDomain(parts[0] ?? '') && parts.slice(1).every(isNameComponent);
}

/** `anchoredNameRegexp` split of a valid name: the first part is the domain when it can be. */
function splitName(name: string): { domain: string; path: string } {
  const slash = name.indexOf('/');
  if (slash > 0) {
    const first = name.slice(0, slash);
    const rest = name.slice(slash + 1);
    if (isDomain(first) && rest.split('/').every(isNameComponent)) return { domain: first, path: rest };
  }
  return { domain: '', path: name };
}

const TAG = /^[\w][\w.-]{0,127}$/;
const DIGEST_PATTERN = /^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$/;
const ANCHORED_IDENTIFIER = /^[a-f0-9]{64}$/;

export function isValidTag(tag: string): boolean {
  return TAG.test(tag);
}

/** `ReferenceRegexp` on `s`: name, tag and digest parts, or null when it does not match. */
function matchReference(s: string): { name: string; tag: string; digest: string } | null {
  let left = s;
  let digest = '';
  const at = s.indexOf('@');
  if (at >= 0) {
    left = s.slice(0, at);
    digest = s.slice(at + 1);
    if (!DIGEST_PATTERN.test(digest)) return null;
  }
  let name = left;
  let tag = '';
  const colon = left.lastIndexOf(':');
  if (colon > left.lastIndexOf('/')) {
    name = left.slice(0, colon);
    tag = left.slice(colon + 1);
    if (!TAG.test(tag)) return null;
  }
  if (!isName(name)) return null;
  return { name, tag, digest };
}

/** docker/reference `Parse`: no normalisation. */
export function parseReference(s: string): DockerReference {
  const m = matchReference(s);
  if (m === null) {
    if (s === '') throw new InvalidReferenceError('repository name must have at least one component');
    if (matchReference(s.toLowerCase()) !== null)
      throw new InvalidReferenceError('repository name must be lowercase');
    throw new InvalidReferenceError('invalid reference format');
  }
  if (m.name.length > NAME_TOTAL_LENGTH_MAX) {
    throw new InvalidReferenceError(
      `repository name must not be more than ${NAME_TOTAL_LENGTH_MAX} characters`,
    );
  }
  let digest: string | undefined;
  if (m.digest !== '') {
    try {
      digest = parseDigest(m.digest);
    } catch (e) {
      if (e instanceof InvalidDigestError) throw new InvalidReferenceError(e.message);
      throw e;
    }
  }
  const { domain, path } = splitName(m.name);
  return { domain, path, tag: m.tag === '' ? undefined : m.tag, digest };
}

/** `splitDockerDomain`. */
function splitDockerDomain(name: string): { domain: string; remainder: string } {
  const i = name.indexOf('/');
  let domain: string;
  let remainder: string;
  if (i === -1 || (!/[.:]/.test(name.slice(0, i)) && name.slice(0, i) !== 'localhost')) {
    domain = DEFAULT_DOMAIN;
    remainder = name;
  } else {
    domain = name.slice(0, i);
    remainder = name.slice(i + 1);
  }
  if (domain === LEGACY_DEFAULT_DOMAIN) domain = DEFAULT_DOMAIN;
  if (domain === DEFAULT_DOMAIN && !remainder.includes('/')) remainder = `${OFFICIAL_REPO_NAME}/${remainder}`;
  return { domain, remainder };
}

/** docker/reference `ParseNormalizedNamed`: `busybox` → `docker.io/library/busybox`. */
export function parseNormalizedNamed(s: string): DockerReference {
  if (ANCHORED_IDENTIFIER.test(s)) {
    throw new InvalidReferenceError(
      `invalid repository name (${s}), cannot specify 64-byte hexadecimal strings`,
    );
  }
  const { domain, remainder } = splitDockerDomain(s);
  const tagSep = remainder.indexOf(':');
  const remoteName = tagSep > -1 ? remainder.slice(0, tagSep) : remainder;
  if (remoteName.toLowerCase() !== remoteName) {
    throw new InvalidReferenceError('invalid reference format: repository name must be lowercase');
  }
  return parseReference(`${domain}/${remainder}`);
}

/** docker/reference `ParseNamed`: like `parseNormalizedNamed`, but `s` must already be in canonical form. */
export function parseNamed(s: string): DockerReference {
  const r = parseNormalizedNamed(s);
  if (referenceString(r) !== s) throw new InvalidReferenceError('repository name must be canonical');
  return r;
}

/** `domain/path`. */
export function referenceName(r: DockerReference): string {
  return r.domain === '' ? r.path : `${r.domain}/${r.path}`;
}

/** The full form: `domain/path[:tag][@digest]`. */
export function referenceString(r: DockerReference): string {
  return `${referenceName(r)}${r.tag !== undefined ? `:${r.tag}` : ''}${r.digest !== undefined ? `@${r.digest}` : ''}`;
}

/** docker/reference `FamiliarString`: `docker.io/library/busybox:latest` → `busybox:latest`. */
export function familiarString(r: DockerReference): string {
  let name = referenceName(r);
  if (r.domain === DEFAULT_DOMAIN) {
    const parts = r.path.split('/');
    name = parts.length === 2 && parts[0] === OFFICIAL_REPO_NAME ? (parts[1] ?? '') : r.path;
  }
  return `${name}${r.tag !== undefined ? `:${r.tag}` : ''}${r.digest !== undefined ? `@${r.digest}` : ''}`;
}

/** Neither a tag nor a digest. */
export function isNameOnly(r: DockerReference): boolean {
  return r.tag === undefined && r.digest === undefined;
}

/** The repository alone (`TrimNamed`). */
export function trimNamed(r: DockerReference): DockerReference {
  return { domain: r.domain, path: r.path };
}

/** `WithTag`: replaces the tag, keeps a digest. */
export function withTag(r: DockerReference, tag: string): DockerReference {
  if (!TAG.test(tag)) throw new InvalidReferenceError('invalid tag format');
  return { domain: r.domain, path: r.path, tag, digest: r.digest };
}

/** `WithDigest`: replaces the digest, keeps a tag. */
export function withDigest(r: DockerReference, digest: string): DockerReference {
  if (!DIGEST_PATTERN.test(digest)) throw new InvalidReferenceError('invalid digest format');
  return { domain: r.domain, path: r.path, tag: r.tag, digest: parseDigest(digest) };
}

/** `TagNameOnly`: adds `:latest` to a bare name. */
export function tagNameOnly(r: DockerReference): DockerReference {
  return isNameOnly(r) ? withTag(r, DEFAULT_TAG) : r;
}

/**
 * The docker transport's reference (`docker://` stripped, or an image URL as
 * the CDH receives it): normalised, `:latest` added to a bare name, and a tag
 * together with a digest refused.
 */
export function parseImageReference(s: string): DockerReference {
  const r = tagNameOnly(parseNormalizedNamed(s));
  if (r.tag !== undefined && r.digest !== undefined) {
    throw new InvalidReferenceError(
      'Docker references with both a tag and digest are currently not supported',
    );
  }
  return r;
}

/** The docker transport's `PolicyConfigurationIdentity`: `name:tag` or `name@digest`. */
export function policyIdentity(r: DockerReference): string {
  if (r.tag !== undefined && r.digest !== undefined) {
    throw new InvalidReferenceError(
      `Unexpected Docker reference ${familiarString(r)} with both a name and a digest`,
    );
  }
  if (r.tag !== undefined) return `${referenceName(r)}:${r.tag}`;
  if (r.digest !== undefined) return `${referenceName(r)}@${r.digest}`;
  throw new InvalidReferenceError(
    `Internal inconsistency: Docker reference ${familiarString(r)} with neither a tag nor a digest`,
  );
}

/**
 * The docker transport's `PolicyConfigurationNamespaces`: the repository and
 * each parent namespace up to `host[:port]`, then `*.<suffix>` for each dot
 * suffix of the host (port removed).
 */
export function policyNamespaces(r: DockerReference): string[] {
  const res: string[] = [];
  let name = referenceName(r);
  for (;;) {
    res.push(name);
    const lastSlash = name.lastIndexOf('/');
    if (lastSlash === -1) break;
    name = name.slice(0, lastSlash);
  }
  const colon = name.indexOf(':');
  if (colon !== -1) name = name.slice(0, colon);
  for (;;) {
    const dot = name.indexOf('.');
    if (dot === -1) break;
    name = name.slice(dot + 1);
    res.push(`*.${name}`);
  }
  return res;
}

/** `docker://` + the familiar form, as containers/image names images in messages. */
export function dockerImageName(r: DockerReference): string {
  return `docker://${familiarString(r)}`;
}

/** The registry host to contact for a reference's domain (`docker.io` is served by `registry-1.docker.io`). */
export function registryHost(domain: string): string {
  return domain === DEFAULT_DOMAIN ? 'registry-1.docker.io' : domain;
}
