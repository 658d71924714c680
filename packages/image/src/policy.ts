/**
 * containers-policy.json(5): strict parsing and scope selection, with
 * containers/image's rules and messages. Unknown keys, duplicate keys,
 * trailing data and empty requirement lists are errors; `default` is
 * required and `transports` optional.
 *
 * All requirement types of containers/image parse. `signedBy` is
 * evaluated for `keyType: GPGKeys` (other key types and `signedBaseLayer`
 * evaluate to a rejection, as in containers/image); `sigstoreSigned` takes public
 * keys only (Fulcio, PKI and Rekor options are refused when parsed).
 */

import { readFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { ImageError, type ImageErrorCode } from './errors.js';
import {
  goArray,
  goBytes,
  goBytesArray,
  goKind,
  goQuote,
  goString,
  goStringArray,
  type JsonValue,
  paranoidExactFields,
  paranoidObject,
  parseJson,
} from './json.js';
import { isDomain, isName, isNameOnly, parseNormalizedNamed } from './reference.js';

/** A policy that does not parse (containers/image `InvalidPolicyFormatError` and JSON format errors). */
export class InvalidPolicyError extends ImageError {
  override readonly code: ImageErrorCode = 'POLICY_INVALID';
  override readonly name: string = 'InvalidPolicyError';
}

/**
 * How a signature's claimed identity must relate to the image (`signedIdentity`).
 * `unchecked` is no policy spelling: it is what a `sigstoreSigned` rule
 * without `signedIdentity` means under image-rs semantics (no identity check).
 */
export type IdentityMatcher =
  | { readonly type: 'unchecked' }
  | { readonly type: 'matchExact' }
  | { readonly type: 'matchRepoDigestOrExact' }
  | { readonly type: 'matchRepository' }
  | { readonly type: 'exactReference'; readonly dockerReference: string }
  | { readonly type: 'exactRepository'; readonly dockerRepository: string }
  | { readonly type: 'remapIdentity'; readonly prefix: string; readonly signedPrefix: string };

/** Where the public keys of a requirement come from; exactly one per requirement. */
export type KeySource =
  | { readonly kind: 'keyPath'; readonly path: string }
  | { readonly kind: 'keyPaths'; readonly paths: readonly string[] }
  | { readonly kind: 'keyData'; readonly data: Uint8Array }
  | { readonly kind: 'keyDatas'; readonly datas: readonly Uint8Array[] };

export type PolicyRequirement =
  | { readonly type: 'insecureAcceptAnything' }
  | { readonly type: 'reject' }
  | {
      readonly type: 'signedBy';
      readonly keyType: string;
      readonly keySource: KeySource;
      readonly signedIdentity: IdentityMatcher;
    }
  | { readonly type: 'signedBaseLayer'; readonly baseLayerIdentity: IdentityMatcher }
  | {
      readonly type: 'sigstoreSigned';
      readonly keySource: KeySource;
      readonly signedIdentity: IdentityMatcher;
    };

export type RequirementType = PolicyRequirement['type'];

export interface Policy {
  readonly default: readonly PolicyRequirement[];
  /** transport → scope → requirements. */
  readonly transports: ReadonlyMap<string, ReadonlyMap<string, readonly PolicyRequirement[]>>;
}

/**
 * What the points where image-rs and containers/image read the same policy
 * differently mean (`sigstoreSigned` rules only):
 *
 * - `image-rs` (the default): `keyData`/`keyDatas` may be the PEM text itself
 *   (image-rs) or base64 of it (containers/image); a missing
 *   `signedIdentity` checks no identity (only the manifest digest).
 * - `containers-image`: `keyData` is base64 only; a missing
 *   `signedIdentity` means `matchRepoDigestOrExact`.
 */
export type PolicySemantics = 'image-rs' | 'containers-image';
export const DEFAULT_POLICY_SEMANTICS: PolicySemantics = 'image-rs';
export const POLICY_SEMANTICS: readonly PolicySemantics[] = ['image-rs', 'containers-image'];

export interface PolicyParseOptions {
  /** Default `DEFAULT_POLICY_SEMANTICS` (image-rs). */
  readonly semantics?: PolicySemantics;
}

/** Largest policy file read (real ones are a few KiB). */
export const MAX_POLICY_BYTES = 4 * 1024 * 1024;

const SIGNED_BY_KEY_TYPES = new Set(['GPGKeys', 'signedByGPGKeys', 'X509Certificates', 'signedByX509CAs']);

/** Options of `sigstoreSigned` that containers/image knows and that we refuse (no Fulcio/Rekor/PKI here). */
const UNSUPPORTED_SIGSTORE_KEYS = new Set([
  'fulcio',
  'pki',
  'rekorPublicKeyPath',
  'rekorPublicKeyPaths',
  'rekorPublicKeyData',
  'rekorPublicKeyDatas',
]);

function invalid(message: string): never {
  throw new InvalidPolicyError(message);
}

/** Parses policy JSON. Throws `InvalidPolicyError`. */
export function parsePolicy(input: string | Uint8Array, options: PolicyParseOptions = {}): Policy {
  try {
    return readPolicy(parseJson(input), options.semantics ?? DEFAULT_POLICY_SEMANTICS);
  } catch (e) {
    if (e instanceof InvalidPolicyError) throw e;
    if (e instanceof Error) throw new InvalidPolicyError(e.message, { cause: e });
    throw e;
  }
}

/** Reads and parses a policy file; errors say `invalid policy in "<file>": …` as containers/image. */
export async function loadPolicyFile(file: string, options: PolicyParseOptions = {}): Promise<Policy> {
  const bytes = await readFile(file);
  if (bytes.byteLength > MAX_POLICY_BYTES) {
    throw new InvalidPolicyError(
      `invalid policy in ${goQuote(file)}: policy larger than ${MAX_POLICY_BYTES} bytes`,
    );
  }
  try {
    return parsePolicy(bytes, options);
  } catch (e) {
    if (e instanceof InvalidPolicyError) {
      throw new InvalidPolicyError(`invalid policy in ${goQuote(file)}: ${e.message}`, { cause: e });
    }
    throw e;
  }
}

function readPolicy(v: JsonValue, semantics: PolicySemantics): Policy {
  let def: PolicyRequirement[] | undefined;
  const transports = new Map<string, Map<string, PolicyRequirement[]>>();
  paranoidObject(v, (key) => {
    if (key === 'default') return (value) => (def = readRequirements(value, semantics));
    if (key === 'transports') return (value) => readTransports(value, transports, semantics);
    return undefined;
  });
  if (def === undefined) invalid('Default policy is missing');
  return { default: def, transports };
}

function readTransports(
  v: JsonValue,
  out: Map<string, Map<string, PolicyRequirement[]>>,
  semantics: PolicySemantics,
): void {
  paranoidObject(v, (transport) => (value) => {
    const scopes = new Map<string, PolicyRequirement[]>();
    paranoidObject(value, (scope) => {
      // containers/image makes an invalid scope of a known transport an unknown key.
      if (scope !== '' && validateScope(transport, scope) !== undefined) return undefined;
      return (reqs) => scopes.set(scope, readRequirements(reqs, semantics));
    });
    out.set(transport, scopes);
  });
}

/**
 * A transport's scope check (`ValidatePolicyConfigurationScope`); undefined
 * when valid. The docker transport accepts any string (a malformed scope
 * never matches); dir and oci scopes are absolute, clean paths other than
 * `/`. Other transports are not ours to judge and accept anything.
 */
export function validateScope(transport: string, scope: string): string | undefined {
  if (transport !== 'dir' && transport !== 'oci') return undefined;
  if (!scope.startsWith('/')) return `Invalid scope ${scope}: Must be an absolute path`;
  if (scope === '/') return 'Invalid scope "/": Use the generic default scope ""';
  const cleaned = cleanPath(scope);
  if (cleaned !== scope) return `Invalid scope ${scope}: Uses non-canonical format, perhaps try ${cleaned}`;
  return undefined;
}

/** Go's `filepath.Clean` for absolute POSIX paths. */
export function cleanPath(p: string): string {
  const n = posix.normalize(p);
  return n.length > 1 && n.endsWith('/') ? n.slice(0, -1) : n;
}

function readRequirements(v: JsonValue, semantics: PolicySemantics): PolicyRequirement[] {
  const items = goArray(v);
  if (items.length === 0) invalid('List of verification policy requirements must not be empty');
  return items.map((item) => readRequirement(item, semantics));
}

/**
 * The `type` member as Go's plain decoder finds it before the strict pass:
 * keys match case-insensitively and the last one wins.
 */
function probeType(v: JsonValue, goStruct: string): string {
  if (v.kind === 'null') return '';
  if (v.kind !== 'object')
    invalid(`json: cannot unmarshal ${goKind(v)} into Go value of type signature.${goStruct}`);
  let t = '';
  for (const [key, value] of v.entries) {
    if (key.toLowerCase() !== 'type') continue;
    if (value.kind === 'null') continue;
    if (value.kind !== 'string') {
      invalid(`json: cannot unmarshal ${goKind(value)} into Go struct field ${goStruct}.type of type string`);
    }
    t = value.value;
  }
  return t;
}

function expectType(actual: string, expected: string): void {
  if (actual !== expected) invalid(`Unexpected policy requirement type ${goQuote(actual)}`);
}

function readRequirement(v: JsonValue, semantics: PolicySemantics): PolicyRequirement {
  const t = probeType(v, 'prCommon');
  switch (t) {
    case 'insecureAcceptAnything':
    case 'reject': {
      let typ = '';
      paranoidExactFields(v, { type: (x) => (typ = goString(x)) });
      expectType(typ, t);
      return { type: t };
    }
    case 'signedBy':
      return readSignedBy(v);
    case 'signedBaseLayer': {
      let typ = '';
      let identity: JsonValue | undefined;
      paranoidExactFields(v, { type: (x) => (typ = goString(x)), baseLayerIdentity: (x) => (identity = x) });
      expectType(typ, t);
      return { type: 'signedBaseLayer', baseLayerIdentity: readIdentity(identity ?? { kind: 'null' }) };
    }
    case 'sigstoreSigned':
      return readSigstoreSigned(v, semantics);
    default:
      return invalid(`Unknown policy requirement type ${goQuote(t)}`);
  }
}

function readSignedBy(v: JsonValue): PolicyRequirement {
  let typ = '';
  let keyType = '';
  let keyPath = '';
  let keyPaths: string[] | undefined;
  let keyData: Uint8Array | undefined;
  let got = { keyPath: false, keyPaths: false, keyData: false };
  let identity: JsonValue | undefined;
  paranoidObject(v, (key) => {
    switch (key) {
      case 'type':
        return (x) => (typ = goString(x));
      case 'keyType':
        return (x) => {
          const s = goString(x);
          if (!SIGNED_BY_KEY_TYPES.has(s)) invalid(`Unrecognized keyType value ${goQuote(s)}`);
          keyType = s;
        };
      case 'keyPath':
        return (x) => {
          got = { ...got, keyPath: true };
          keyPath = goString(x);
        };
      case 'keyPaths':
        return (x) => {
          got = { ...got, keyPaths: true };
          keyPaths = goStringArray(x);
        };
      case 'keyData':
        return (x) => {
          got = { ...got, keyData: true };
          keyData = goBytes(x);
        };
      case 'signedIdentity':
        return (x) => (identity = x);
      default:
        return undefined;
    }
  });
  expectType(typ, 'signedBy');
  const signedIdentity: IdentityMatcher =
    identity === undefined ? { type: 'matchRepoDigestOrExact' } : readIdentity(identity);
  const count = Number(got.keyPath) + Number(got.keyPaths) + Number(got.keyData);
  if (count === 0)
    invalid('Exactly one of keyPath, keyPaths and keyData must be specified, none of them present');
  if (count > 1)
    invalid('Exactly one of keyPath, keyPaths and keyData must be specified, more than one present');
  if (!SIGNED_BY_KEY_TYPES.has(keyType)) invalid(`invalid keyType ${goQuote(keyType)}`);
  let keySource: KeySource | undefined;
  if (keyPath !== '') keySource = { kind: 'keyPath', path: keyPath };
  else if (keyPaths !== undefined) keySource = { kind: 'keyPaths', paths: keyPaths };
  else if (keyData !== undefined) keySource = { kind: 'keyData', data: keyData };
  if (keySource === undefined) invalid('exactly one of keyPath, keyPaths and keyData must be specified');
  return { type: 'signedBy', keyType, keySource, signedIdentity };
}

/**
 * A `keyData` value: base64 of the key (containers/image), or under image-rs
 * semantics also the PEM text itself (which is never valid base64: `-` and
 * blanks are not in its alphabet, so the two readings cannot collide).
 */
function keyDataOf(x: JsonValue, semantics: PolicySemantics): Uint8Array | undefined {
  if (semantics === 'image-rs' && x.kind === 'string' && x.value.trimStart().startsWith('-----BEGIN ')) {
    return new TextEncoder().encode(x.value);
  }
  return goBytes(x);
}

function readSigstoreSigned(v: JsonValue, semantics: PolicySemantics): PolicyRequirement {
  let typ = '';
  let keyPath: string | undefined;
  let keyPaths: { value: string[] | undefined } | undefined;
  let keyData: Uint8Array | undefined;
  let keyDatas: { value: Uint8Array[] | undefined } | undefined;
  const unsupported: string[] = [];
  let identity: JsonValue | undefined;
  paranoidObject(v, (key) => {
    switch (key) {
      case 'type':
        return (x) => (typ = goString(x));
      case 'keyPath':
        return (x) => (keyPath = goString(x));
      case 'keyPaths':
        return (x) => (keyPaths = { value: goStringArray(x) });
      case 'keyData':
        return (x) => (keyData = keyDataOf(x, semantics));
      case 'keyDatas':
        return (x) => {
          keyDatas = {
            value:
              x.kind === 'array'
                ? x.items.map((item) => keyDataOf(item, semantics) ?? new Uint8Array(0))
                : goBytesArray(x),
          };
        };
      case 'signedIdentity':
        return (x) => (identity = x);
      default:
        if (UNSUPPORTED_SIGSTORE_KEYS.has(key)) return () => unsupported.push(key);
        return undefined;
    }
  });
  expectType(typ, 'sigstoreSigned');
  // image-rs checks no identity when the rule names none; containers/image defaults to matchRepoDigestOrExact.
  const signedIdentity: IdentityMatcher =
    identity !== undefined
      ? readIdentity(identity)
      : semantics === 'image-rs'
        ? { type: 'unchecked' }
        : { type: 'matchRepoDigestOrExact' };
  // containers/image's option order: each option checks its own value, then the sources are counted.
  const sources: KeySource[] = [];
  if (keyPath !== undefined && keyPath !== '') sources.push({ kind: 'keyPath', path: keyPath });
  if (keyPaths !== undefined) {
    if (keyPaths.value === undefined || keyPaths.value.length === 0)
      invalid('"keyPaths" contains no entries');
    sources.push({ kind: 'keyPaths', paths: keyPaths.value });
  }
  if (keyData !== undefined) sources.push({ kind: 'keyData', data: keyData });
  if (keyDatas !== undefined) {
    if (keyDatas.value === undefined || keyDatas.value.length === 0)
      invalid('"keyDatas" contains no entries');
    sources.push({ kind: 'keyDatas', datas: keyDatas.value });
  }
  if (unsupported.length > 0) {
    invalid(
      `sigstoreSigned: ${unsupported.map(goQuote).join(', ')} not supported: only public keys (keyPath, keyPaths, keyData, keyDatas) are implemented`,
    );
  }
  const [keySource, ...more] = sources;
  if (keySource === undefined || more.length > 0) {
    invalid('exactly one of keyPath, keyPaths, keyData, keyDatas, fulcio, and pki must be specified');
  }
  return { type: 'sigstoreSigned', keySource, signedIdentity };
}

function readIdentity(v: JsonValue): IdentityMatcher {
  const t = probeType(v, 'prmCommon');
  let typ = '';
  const setType = (x: JsonValue) => {
    typ = goString(x);
  };
  const check = () => {
    if (typ !== t) invalid(`Unexpected policy requirement type ${goQuote(typ)}`);
  };
  switch (t) {
    case 'matchExact':
    case 'matchRepoDigestOrExact':
    case 'matchRepository':
      paranoidExactFields(v, { type: setType });
      check();
      return { type: t };
    case 'exactReference': {
      let ref = '';
      paranoidExactFields(v, { type: setType, dockerReference: (x) => (ref = goString(x)) });
      check();
      let parsed: ReturnType<typeof parseNormalizedNamed>;
      try {
        parsed = parseNormalizedNamed(ref);
      } catch (e) {
        return invalid(`Invalid format of dockerReference ${goQuote(ref)}: ${(e as Error).message}`);
      }
      if (isNameOnly(parsed)) invalid(`dockerReference ${goQuote(ref)} contains neither a tag nor digest`);
      return { type: 'exactReference', dockerReference: ref };
    }
    case 'exactRepository': {
      let repo = '';
      paranoidExactFields(v, { type: setType, dockerRepository: (x) => (repo = goString(x)) });
      check();
      try {
        parseNormalizedNamed(repo);
      } catch (e) {
        invalid(`Invalid format of dockerRepository ${goQuote(repo)}: ${(e as Error).message}`);
      }
      return { type: 'exactRepository', dockerRepository: repo };
    }
    case 'remapIdentity': {
      let prefix = '';
      let signedPrefix = '';
      paranoidExactFields(v, {
        type: setType,
        prefix: (x) => (prefix = goString(x)),
        signedPrefix: (x) => (signedPrefix = goString(x)),
      });
      check();
      validateRemapPrefix(prefix);
      validateRemapPrefix(signedPrefix);
      return { type: 'remapIdentity', prefix, signedPrefix };
    }
    default:
      return invalid(`Unknown policy reference match type ${goQuote(t)}`);
  }
}

/** A `remapIdentity` prefix is `host[:port]` or a name that starts with `host/`. */
function validateRemapPrefix(s: string): void {
  const slash = s.indexOf('/');
  if (isDomain(s) || (isName(s) && slash > 0 && isDomain(s.slice(0, slash)))) return;
  invalid(`prefix ${goQuote(s)} is not valid`);
}

/** Which part of a policy applies to an image. */
export interface ScopeChoice {
  readonly transport: string;
  /** The matching scope of `transports[transport]`, or null when `default` applies. */
  readonly scope: string | null;
  readonly requirements: readonly PolicyRequirement[];
}

/**
 * The single most specific requirement list for an image: its identity, each
 * of its namespaces in order, the transport's `""` scope, then `default`.
 * Nothing is merged.
 */
export function requirementsForImage(
  policy: Policy,
  transport: string,
  identity: string,
  namespaces: readonly string[],
): ScopeChoice {
  const scopes = policy.transports.get(transport);
  if (scopes !== undefined) {
    for (const candidate of [identity, ...namespaces, '']) {
      const reqs = scopes.get(candidate);
      if (reqs !== undefined) return { transport, scope: candidate, requirements: reqs };
    }
  }
  return { transport, scope: null, requirements: policy.default };
}
