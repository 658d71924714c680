// The cloud-config user data CAA writes for a pod VM: `#cloud-config` with one key, `write_files`, whose
// entries have exactly `path` and `content` (CAA decodes it with yaml.UnmarshalStrict into that shape).
// Only allow-listed paths are taken; the others are reported and dropped.
import { parseDocument } from 'yaml';
import { ProvisionError } from './errors.js';

/** Largest user data read from any source. */
export const MAX_USER_DATA_BYTES = 8 * 1024 * 1024;
const MAX_WRITE_FILES = 64;
const MAX_ALIASES = 16;

/** Where CAA puts the pod's initdata (base64 of gzip(TOML)). */
export const INITDATA_USER_DATA_PATH = '/run/peerpod/initdata';

/**
 * The other files CAA's user data carries and CAA writes as they are (cloud-api-adaptor
 * pkg/paths): the agent-protocol-forwarder's configuration, the image registries' credentials, and
 * the marker of a scratch disk.
 */
export const USER_DATA_FILES: readonly string[] = Object.freeze([
  '/run/peerpod/apf.json',
  '/run/peerpod/auth.json',
  '/run/peerpod/scratch-space.marker',
]);

/**
 * CAA takes these from user data too, but here the attestation and data-hub settings come only from
 * the initdata, which PCR8 measures, never from unmeasured user data (an aa.toml from the host could
 * point the guest at a KBS of its choosing).
 */
export const INITDATA_ONLY_FILES: readonly string[] = Object.freeze([
  '/run/peerpod/aa.toml',
  '/run/peerpod/cdh.toml',
]);

/** Every `write_files` path taken. */
export const ALLOWED_WRITE_FILES: readonly string[] = Object.freeze([
  INITDATA_USER_DATA_PATH,
  ...USER_DATA_FILES,
]);

export interface WriteFile {
  readonly path: string;
  readonly content: string;
}

export interface CloudConfig {
  readonly writeFiles: readonly WriteFile[];
}

function fail(why: string): never {
  throw new ProvisionError('USER_DATA_INVALID', `user data: ${why}`);
}

export function parseCloudConfig(input: Uint8Array | string): CloudConfig {
  const size = typeof input === 'string' ? Buffer.byteLength(input) : input.byteLength;
  if (size > MAX_USER_DATA_BYTES) fail(`larger than ${MAX_USER_DATA_BYTES} bytes`);
  let text: string;
  try {
    text = typeof input === 'string' ? input : new TextDecoder('utf-8', { fatal: true }).decode(input);
  } catch {
    fail('not UTF-8 text');
  }
  const doc = parseDocument(text, { uniqueKeys: true, strict: true, prettyErrors: false });
  if (doc.errors.length > 0) fail(`not valid YAML: ${doc.errors[0]?.message.split('\n')[0] ?? ''}`);
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: MAX_ALIASES });
  } catch (e) {
    fail(`not usable YAML: ${(e as Error).message}`);
  }
  if (value === null || value === undefined) return { writeFiles: [] };
  if (typeof value !== 'object' || Array.isArray(value)) fail('not a mapping');
  const top = value as Record<string, unknown>;
  for (const key of Object.keys(top)) {
    if (key !== 'write_files')
      fail(`key ${JSON.stringify(key.slice(0, 64))} is not accepted (only write_files)`);
  }
  const list = top.write_files ?? [];
  if (!Array.isArray(list)) fail('write_files is not a list');
  if (list.length > MAX_WRITE_FILES) fail(`write_files has more than ${MAX_WRITE_FILES} entries`);
  const writeFiles = list.map((entry, i): WriteFile => {
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry))
      fail(`write_files[${i}] is not a mapping`);
    const e = entry as Record<string, unknown>;
    for (const key of Object.keys(e)) {
      if (key !== 'path' && key !== 'content') {
        fail(
          `write_files[${i}] has key ${JSON.stringify(key.slice(0, 64))}; only path and content are accepted`,
        );
      }
    }
    const path = e.path ?? '';
    const content = e.content ?? '';
    if (typeof path !== 'string') fail(`write_files[${i}].path is not a string`);
    if (typeof content !== 'string') fail(`write_files[${i}].content is not a string`);
    return { path, content };
  });
  return { writeFiles };
}

export interface AcceptedFiles {
  /** The initdata annotation text, when user data carries one. */
  readonly initdata?: string;
  /** `USER_DATA_FILES` entries, path → content, in the order first seen. */
  readonly files: ReadonlyMap<string, string>;
  /** `INITDATA_ONLY_FILES` entries, which were dropped. */
  readonly initdataOnly: readonly string[];
  /** Paths that were dropped. */
  readonly refused: readonly string[];
}

/** Takes the allow-listed entries; a later entry for the same path wins, as sequential writes would. */
export function acceptWriteFiles(cc: CloudConfig): AcceptedFiles {
  let initdata: string | undefined;
  const files = new Map<string, string>();
  const initdataOnly: string[] = [];
  const refused: string[] = [];
  for (const wf of cc.writeFiles) {
    if (wf.path === INITDATA_USER_DATA_PATH) initdata = wf.content;
    else if (USER_DATA_FILES.includes(wf.path)) files.set(wf.path, wf.content);
    else if (INITDATA_ONLY_FILES.includes(wf.path)) initdataOnly.push(wf.path);
    else refused.push(wf.path);
  }
  return { ...(initdata !== undefined && { initdata }), files, initdataOnly, refused };
}
