/**
 * Where GPG simple signatures of a docker image live (containers/image
 * `docker/registries_d.go`, containers-registries.d(5)):
 *
 * - a lookaside store configured per namespace in `registries.d/*.yaml`
 *   (`default-docker:` or `docker: {<scope>: …}`; read from `lookaside:`, or
 *   the older `sigstore:`; the `-staging` keys are where skopeo writes), as
 *   `<base>/<repository path>@<algo>=<hex>/signature-<n>` for n = 1, 2, …
 *   until one is missing (`file://` or `http(s)://`);
 * - or, when the registry's `/v2/` says `X-Registry-Supports-Signatures: 1`,
 *   its signature API (`/extensions/v2/<repo>/signatures/<digest>`), which
 *   then replaces the lookaside store, as in containers/image.
 */

import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { digestAlgorithm, digestHex, parseDigest } from './digest.js';
import { ImageError, type ImageErrorCode } from './errors.js';
import { goFileError } from './evaluate.js';
import { decodeStdBase64, goArray, goNumber, goQuote, goString, paranoidObject, parseJson } from './json.js';
import { type DockerReference, policyIdentity, policyNamespaces } from './reference.js';
import type { RegistryClient } from './registry/client.js';
import { HttpClient, readBody } from './registry/http.js';
import type { ProxySettings } from './registry/proxy.js';
import { MAX_SIGNATURE_BYTES, signatureFromBlob, type UntrustedSignature } from './sigstore.js';

/** containers/image `maxLookasideSignatures`. */
export const MAX_LOOKASIDE_SIGNATURES = 128;
/** Largest registries.d file read. */
export const MAX_REGISTRIES_D_FILE_BYTES = 1024 * 1024;
/** containers/image `iolimits.MaxSignatureListBodySize`. */
export const MAX_SIGNATURE_LIST_BYTES = 4 * 1024 * 1024;

/** One namespace's settings (`registryNamespace`). */
export interface LookasideNamespace {
  readonly lookaside?: string;
  readonly lookasideStaging?: string;
  readonly sigstore?: string;
  readonly sigstoreStaging?: string;
  readonly useSigstoreAttachments?: boolean;
}

/** The merged contents of a registries.d folder. */
export interface RegistriesD {
  readonly defaultDocker?: LookasideNamespace;
  /** Scope (`host/ns/repo[:tag]`, `host/ns`, `host`, `*.domain`) → settings. */
  readonly docker: ReadonlyMap<string, LookasideNamespace>;
}

export class RegistriesDError extends ImageError {
  override readonly code: ImageErrorCode = 'REGISTRIES_D_INVALID';
  override readonly name: string = 'RegistriesDError';
}

function readNamespace(v: unknown, where: string): LookasideNamespace {
  if (v === null || v === undefined) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw new RegistriesDError(`${where}: expected a mapping`);
  const o = v as Record<string, unknown>;
  const str = (k: string): string | undefined => {
    const x = o[k];
    if (x === undefined || x === null) return undefined;
    if (typeof x !== 'string') throw new RegistriesDError(`${where}: ${k} must be a string`);
    return x;
  };
  const attach = o['use-sigstore-attachments'];
  if (attach !== undefined && attach !== null && typeof attach !== 'boolean')
    throw new RegistriesDError(`${where}: use-sigstore-attachments must be a boolean`);
  const entries: [keyof LookasideNamespace, unknown][] = [
    ['lookaside', str('lookaside')],
    ['lookasideStaging', str('lookaside-staging')],
    ['sigstore', str('sigstore')],
    ['sigstoreStaging', str('sigstore-staging')],
    ['useSigstoreAttachments', typeof attach === 'boolean' ? attach : undefined],
  ];
  return Object.fromEntries(entries.filter(([, x]) => x !== undefined && x !== '')) as LookasideNamespace;
}

/** Parses one registries.d YAML file (unknown keys are ignored, as Go's yaml decoder does). */
export function parseRegistriesDFile(
  text: string,
  file: string,
): { defaultDocker?: LookasideNamespace; docker: Map<string, LookasideNamespace> } {
  let doc: unknown;
  try {
    doc = parseYaml(text, { maxAliasCount: 100 });
  } catch (e) {
    throw new RegistriesDError(
      `Error loading registries configuration ${goQuote(file)}: ${(e as Error).message}`,
    );
  }
  const docker = new Map<string, LookasideNamespace>();
  if (doc === null || doc === undefined) return { docker };
  if (typeof doc !== 'object' || Array.isArray(doc))
    throw new RegistriesDError(`Error loading registries configuration ${goQuote(file)}: not a mapping`);
  const o = doc as Record<string, unknown>;
  const out: { defaultDocker?: LookasideNamespace; docker: Map<string, LookasideNamespace> } = { docker };
  if (o['default-docker'] !== undefined && o['default-docker'] !== null)
    out.defaultDocker = readNamespace(o['default-docker'], `${file}: default-docker`);
  const d = o.docker;
  if (d !== undefined && d !== null) {
    if (typeof d !== 'object' || Array.isArray(d))
      throw new RegistriesDError(
        `Error loading registries configuration ${goQuote(file)}: docker must be a mapping`,
      );
    for (const [scope, ns] of Object.entries(d as Record<string, unknown>))
      docker.set(scope, readNamespace(ns, `${file}: docker ${goQuote(scope)}`));
  }
  return out;
}

/**
 * Reads every `*.yaml` file of `dir` (in name order) and merges them; a
 * namespace or `default-docker` defined in two files is an error. A missing
 * folder is an empty configuration, as in containers/image.
 */
export async function loadRegistriesD(dir: string): Promise<RegistriesD> {
  let names: string[];
  try {
    names = (await readdir(dir)).sort();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { docker: new Map() };
    throw new RegistriesDError(goFileError('open', dir, e));
  }
  let defaultDocker: { ns: LookasideNamespace; file: string } | undefined;
  const docker = new Map<string, LookasideNamespace>();
  const origin = new Map<string, string>();
  for (const name of names) {
    if (!name.endsWith('.yaml')) continue;
    const file = join(dir, name);
    let text: string;
    try {
      if ((await stat(file)).size > MAX_REGISTRIES_D_FILE_BYTES)
        throw new RegistriesDError(`${file} is larger than ${MAX_REGISTRIES_D_FILE_BYTES} bytes`);
      text = await readFile(file, 'utf8');
    } catch (e) {
      if (e instanceof RegistriesDError) throw e;
      throw new RegistriesDError(goFileError('open', file, e));
    }
    const parsed = parseRegistriesDFile(text, file);
    if (parsed.defaultDocker !== undefined) {
      if (defaultDocker !== undefined) {
        throw new RegistriesDError(
          `Error parsing signature storage configuration: "default-docker" defined both in ${goQuote(defaultDocker.file)} and ${goQuote(file)}`,
        );
      }
      defaultDocker = { ns: parsed.defaultDocker, file };
    }
    for (const [scope, ns] of parsed.docker) {
      const before = origin.get(scope);
      if (before !== undefined) {
        throw new RegistriesDError(
          `Error parsing signature storage configuration: "docker" namespace ${goQuote(scope)} defined both in ${goQuote(before)} and ${goQuote(file)}`,
        );
      }
      origin.set(scope, file);
      docker.set(scope, ns);
    }
  }
  return { ...(defaultDocker !== undefined ? { defaultDocker: defaultDocker.ns } : {}), docker };
}

function namespaceTopLevel(ns: LookasideNamespace, write: boolean): string | undefined {
  if (write) {
    if (ns.lookasideStaging !== undefined) return ns.lookasideStaging;
    if (ns.sigstoreStaging !== undefined) return ns.sigstoreStaging;
  }
  return ns.lookaside ?? ns.sigstore;
}

/**
 * The lookaside base URL configured for `ref` (containers/image
 * `signatureTopLevel`): its identity, then each namespace, then
 * `default-docker`; an entry without a URL falls through to the next.
 * Undefined when nothing is configured.
 */
export function lookasideTopLevel(
  config: RegistriesD,
  ref: DockerReference,
  write = false,
): string | undefined {
  for (const scope of [policyIdentity(ref), ...policyNamespaces(ref)]) {
    const ns = config.docker.get(scope);
    const url = ns !== undefined ? namespaceTopLevel(ns, write) : undefined;
    if (url !== undefined) return url;
  }
  return config.defaultDocker !== undefined ? namespaceTopLevel(config.defaultDocker, write) : undefined;
}

/** `<base>/<repository path>@<algo>=<hex>/signature-<index>` (index from 1). */
export function lookasideSignatureUrl(
  base: string,
  ref: DockerReference,
  digest: string,
  index: number,
): URL {
  let url: URL;
  try {
    url = new URL(base);
  } catch {
    throw new RegistriesDError(`Invalid signature storage URL ${base}`);
  }
  const d = parseDigest(digest);
  url.pathname = `${url.pathname.replace(/\/$/, '')}/${ref.path}@${digestAlgorithm(d)}=${digestHex(d)}/signature-${index}`;
  return url;
}

/** Fetches one signature blob; undefined when it does not exist (the end of the list). */
export type LookasideFetcher = (url: URL) => Promise<Uint8Array | undefined>;

/** The default fetcher: `file:` from disk, `http(s):` with redirects (never https → http), 404 = missing. */
export function defaultLookasideFetcher(
  options: { ca?: readonly string[]; proxy?: ProxySettings } = {},
): LookasideFetcher & {
  close(): void;
} {
  let http: HttpClient | undefined;
  const fetcher = async (url: URL): Promise<Uint8Array | undefined> => {
    if (url.protocol === 'file:') {
      const path = fileURLToPath(url);
      try {
        const size = (await stat(path)).size;
        if (size > MAX_SIGNATURE_BYTES)
          throw new ImageError(`${path} is larger than ${MAX_SIGNATURE_BYTES} bytes`, {
            code: 'SIGNATURE_UNREADABLE',
          });
        return await readFile(path);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw new ImageError(goFileError('open', path, e), { code: 'SIGNATURE_UNREADABLE' });
      }
    }
    if (url.protocol === 'http:' || url.protocol === 'https:') {
      http ??= new HttpClient({
        ...(options.ca !== undefined ? { ca: options.ca } : {}),
        ...(options.proxy !== undefined ? { proxy: options.proxy } : {}),
      });
      const res = await http.request({ method: 'GET', url });
      if (res.status === 404) {
        res.body.resume();
        return undefined;
      }
      if (res.status !== 200) {
        res.body.resume();
        throw new ImageError(`reading signature from ${url.href}: status ${res.status}`, {
          code: 'SIGNATURE_UNREADABLE',
        });
      }
      return readBody(res.body, MAX_SIGNATURE_BYTES, `signature ${url.href}`);
    }
    throw new ImageError(`Unsupported scheme when reading signature from ${url.href}`, {
      code: 'SIGNATURE_UNREADABLE',
    });
  };
  return Object.assign(fetcher, { close: () => http?.close() });
}

/** Reads `signature-1`, `signature-2`, … from a lookaside store until one is missing. */
export async function readLookasideSignatures(
  base: string,
  ref: DockerReference,
  manifestDigest: string,
  fetch: LookasideFetcher,
): Promise<UntrustedSignature[]> {
  const out: UntrustedSignature[] = [];
  for (let i = 1; ; i++) {
    if (i > MAX_LOOKASIDE_SIGNATURES) {
      throw new ImageError(
        `server provided ${MAX_LOOKASIDE_SIGNATURES} signatures, assuming that's unreasonable and a server error`,
        { code: 'SIGNATURE_UNREADABLE' },
      );
    }
    const url = lookasideSignatureUrl(base, ref, manifestDigest, i);
    const blob = await fetch(url);
    if (blob === undefined) return out;
    try {
      out.push(signatureFromBlob(blob));
    } catch (e) {
      throw new ImageError(`parsing signature ${goQuote(url.href)}: ${(e as Error).message}`, {
        code: 'SIGNATURE_UNREADABLE',
      });
    }
  }
}

/**
 * The registry's signature API answer: `{"signatures":[{"schemaVersion":2,
 * "type":"atomic","name":…,"content":"<base64>"}]}`; entries of another
 * version or type are skipped, as containers/image does.
 */
export function parseSignatureList(body: Uint8Array): UntrustedSignature[] {
  const out: UntrustedSignature[] = [];
  paranoidObject(parseJson(body), (key) => {
    if (key !== 'signatures') return () => undefined;
    return (list) => {
      if (list.kind === 'null') return;
      for (const entry of goArray(list)) {
        let version = 0;
        let type = '';
        let content: Uint8Array | undefined;
        paranoidObject(entry, (k) => {
          if (k === 'schemaVersion') return (x) => (version = goNumber(x));
          if (k === 'type') return (x) => (type = goString(x));
          if (k === 'content')
            return (x) => (content = x.kind === 'null' ? undefined : decodeStdBase64(goString(x)));
          return () => undefined;
        });
        if (version === 2 && type === 'atomic' && content !== undefined) {
          out.push({ format: 'simple-signing', blob: content });
        }
      }
    };
  });
  if (out.length > MAX_LOOKASIDE_SIGNATURES)
    throw new ImageError(`the registry listed more than ${MAX_LOOKASIDE_SIGNATURES} signatures`, {
      code: 'SIGNATURE_UNREADABLE',
    });
  return out;
}

/** Where the simple signatures of a registry image are read from. */
export interface SimpleSignatureSourceOptions {
  readonly registriesD?: RegistriesD;
  readonly fetch?: LookasideFetcher;
}

/**
 * The GPG simple signatures of `manifestDigest` (containers/image
 * `GetSignaturesWithFormat`, minus sigstore attachments): from the
 * registry's signature API when it offers one, else from the configured
 * lookaside store, else none.
 */
export async function fetchSimpleSignatures(
  client: RegistryClient,
  ref: DockerReference,
  manifestDigest: string,
  options: SimpleSignatureSourceOptions,
): Promise<UntrustedSignature[]> {
  const repo = { domain: ref.domain, path: ref.path };
  if (await client.supportsSignatureExtension(repo)) {
    return parseSignatureList(
      await client.getSignatureExtension(repo, manifestDigest, MAX_SIGNATURE_LIST_BYTES),
    );
  }
  const base = options.registriesD !== undefined ? lookasideTopLevel(options.registriesD, ref) : undefined;
  if (base === undefined) return [];
  // Lookaside stores are reached with the registry client's CAs and proxies.
  const own = options.fetch === undefined ? defaultLookasideFetcher(client.connectionOptions) : undefined;
  try {
    return await readLookasideSignatures(
      base,
      ref,
      manifestDigest,
      options.fetch ?? (own as LookasideFetcher),
    );
  } finally {
    own?.close();
  }
}
