// `[mounted_files]`: attestation policies, the resource policy, reference values and resources that come
// from files (mounted ConfigMaps and Secrets) are written into the store at start and again whenever the
// files change, through the same code paths as the admin API (compile checks, RVPS message checks,
// resource path rules). The files are authoritative when they change; an admin API change made since
// stays until the file it overrides changes again.
//
// A file is written only when its content differs from what this process last applied from it, so a
// periodic rescan costs reads, not writes, and several replicas applying the same files agree.
// Resources whose file disappears are deleted; policies and reference values are not (the attestation
// service and the RVPS have no delete, and a policy removed by mistake would stop every attestation).
// A file is read only once it has settled (settle.ts): one being rewritten in place is left alone, the
// previous value served, and looked at again after the settle window.
import { createHash } from 'node:crypto';
import type { Dirent } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { AttestationService } from '@broker/attestation';
import { isValidSegment } from '@broker/kv-storage';
import { referenceValueMessages } from '@broker/rvps-core';
import type { Logger } from 'pino';
import type { MountedFilesConfig } from '../config.js';
import type { ResourcePolicy } from '../policy/resource-policy.js';
import type { ResourceRepository } from '../repository.js';
import { MountedFileError } from './errors.js';
import { DEFAULT_SETTLE_MS, SettledFiles } from './settle.js';
import { DirectoryWatcher, type DirectoryWatcherOptions } from './watcher.js';

export interface MountedFilesOptions extends DirectoryWatcherOptions {
  /** How long a file must stay unchanged before it is applied; default DEFAULT_SETTLE_MS. */
  readonly settleMs?: number;
}

/** Largest mounted file read (resources, policies, reference values). */
export const MAX_MOUNTED_FILE_BYTES = 8 * 1024 * 1024;
/** Most files one configured path may hold. */
export const MAX_MOUNTED_FILES = 10_000;
const RESOURCE_POLICY_FILE = 'resource-policy.rego';

export { MountedFileError } from './errors.js';

export interface MountedFilesDeps {
  readonly config: MountedFilesConfig;
  readonly attestation: AttestationService;
  readonly policy: ResourcePolicy;
  /** Required when `resources` is configured. */
  readonly repository: ResourceRepository | undefined;
  readonly logger: Logger;
}

interface FileEntry {
  readonly path: string;
  readonly name: string;
}

function errno(e: unknown): string | undefined {
  return typeof e === 'object' && e !== null && 'code' in e
    ? String((e as { code: unknown }).code)
    : undefined;
}

const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

function utf8(b: Buffer, path: string): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(b);
  } catch {
    throw new MountedFileError(`${path} is not UTF-8 text`);
  }
}

/** Visible entries of a directory, symlinks resolved (Kubernetes exposes each key as one). */
async function visibleEntries(dir: string): Promise<{ files: FileEntry[]; dirs: FileEntry[] }> {
  const entries: Dirent[] = await readdir(dir, { withFileTypes: true });
  const files: FileEntry[] = [];
  const dirs: FileEntry[] = [];
  for (const ent of entries) {
    // `..data`, `..<timestamp>` and temp files are the volume's internals.
    if (ent.name.startsWith('.')) continue;
    const path = join(dir, ent.name);
    let isFile = ent.isFile();
    let isDir = ent.isDirectory();
    if (ent.isSymbolicLink()) {
      try {
        const st = await stat(path);
        isFile = st.isFile();
        isDir = st.isDirectory();
      } catch {
        continue; // dangling for a moment during a swap
      }
    }
    if (isFile) files.push({ path, name: ent.name });
    else if (isDir) dirs.push({ path, name: ent.name });
  }
  files.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  dirs.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  if (files.length > MAX_MOUNTED_FILES)
    throw new MountedFileError(`${dir} holds more than ${MAX_MOUNTED_FILES} files`);
  return { files, dirs };
}

/** A configured path: the file itself, or the matching files of the directory; plus what to watch. */
async function filesOf(path: string, suffix: string): Promise<{ files: FileEntry[]; watch: string }> {
  const st = await stat(path);
  if (st.isFile()) return { files: [{ path, name: basename(path) }], watch: dirname(path) };
  if (!st.isDirectory()) throw new MountedFileError(`${path} is neither a file nor a directory`);
  const { files } = await visibleEntries(path);
  return { files: files.filter((f) => f.name.endsWith(suffix)), watch: path };
}

interface Problem {
  readonly what: string;
  readonly error: Error;
}

export class MountedFiles {
  /** Content hash last applied per source (`policy:<id>`, `rv:<file>`, `resource-policy`). */
  private readonly applied = new Map<string, string>();
  /** Resources applied per root: key → content hash. */
  private readonly resources = new Map<string, Map<string, string>>();
  /** The failure last reported per source, so a broken file is logged once, not at every rescan. */
  private readonly reported = new Map<string, string>();
  private readonly watcher: DirectoryWatcher;
  private readonly settled: SettledFiles;
  /** During a scan: the shortest wait until a file that had not settled may have. */
  private pendingMs: number | undefined;
  /** During a scan: whether it is the one at start (which waits for files to settle). */
  private initial = false;

  private constructor(
    private readonly deps: MountedFilesDeps,
    options: MountedFilesOptions,
  ) {
    this.settled = new SettledFiles(options.settleMs ?? DEFAULT_SETTLE_MS, MAX_MOUNTED_FILE_BYTES);
    this.watcher = new DirectoryWatcher(() => this.scan(false).then(() => undefined), {
      ...options,
      onWatchError: (dir, e) =>
        deps.logger.debug({ dir, reason: e.message }, 'cannot watch mounted directory'),
    });
  }

  /** Applies every configured file; a file that cannot be applied fails the start, naming it. */
  static async start(deps: MountedFilesDeps, options: MountedFilesOptions = {}): Promise<MountedFiles> {
    if (deps.config.resources.length > 0 && deps.repository === undefined) {
      throw new MountedFileError(
        '[mounted_files] resources needs the resource plugin ([[plugins]] name = "resource")',
      );
    }
    const m = new MountedFiles(deps, options);
    const problems = await m.scan(true);
    const first = problems[0];
    if (first !== undefined) {
      await m.close();
      throw new MountedFileError(`[mounted_files] ${first.what}: ${first.error.message}`, {
        cause: first.error,
      });
    }
    return m;
  }

  /** Rescans now (also what SIGHUP does); resolves once the changes are in the store. */
  reload(): Promise<void> {
    return this.watcher.run();
  }

  close(): Promise<void> {
    return this.watcher.close();
  }

  private report(source: string, problem: Problem, fingerprint: string): void {
    if (this.reported.get(source) === fingerprint) return;
    this.reported.set(source, fingerprint);
    this.deps.logger.warn(
      { source: problem.what, reason: problem.error.message },
      'mounted file not applied; the store keeps the previous value',
    );
  }

  /** Applies `bytes` for `source` unless it was applied already; failures are collected, not thrown. */
  private async applyOnce(
    source: string,
    what: string,
    bytes: Buffer,
    apply: () => Promise<void>,
    problems: Problem[],
  ): Promise<void> {
    const h = sha256(bytes);
    if (this.applied.get(source) === h) return;
    try {
      await apply();
      this.applied.set(source, h);
      this.reported.delete(source);
      this.deps.logger.info({ source: what }, 'mounted file applied');
    } catch (e) {
      const problem = { what, error: e as Error };
      problems.push(problem);
      this.report(source, problem, h);
    }
  }

  /**
   * The file's content once it has settled. Undefined while it is still changing: the caller keeps the
   * previous value and the scan runs again after the settle window. At start, waits for it instead.
   */
  private async readSettled(path: string): Promise<Buffer | undefined> {
    if (this.initial) return this.settled.readWaiting(path);
    const r = await this.settled.read(path);
    if (r.bytes !== undefined) return r.bytes;
    this.pendingMs = Math.min(this.pendingMs ?? r.waitMs, r.waitMs);
    return undefined;
  }

  private async scan(initial: boolean): Promise<Problem[]> {
    this.initial = initial;
    this.pendingMs = undefined;
    this.settled.beginScan();
    try {
      return await this.scanFiles(initial);
    } finally {
      this.settled.endScan();
      this.initial = false;
      // A file still being written: look again once it may have settled.
      if (this.pendingMs !== undefined) this.watcher.trigger(this.pendingMs + 1);
    }
  }

  private async scanFiles(initial: boolean): Promise<Problem[]> {
    const problems: Problem[] = [];
    const watch = new Set<string>();
    const { config, attestation, policy, logger } = this.deps;
    const listing = async (path: string, suffix: string): Promise<FileEntry[]> => {
      try {
        const { files, watch: w } = await filesOf(path, suffix);
        watch.add(w);
        return files;
      } catch (e) {
        // Watch the parent, so that the path is picked up when it appears.
        watch.add(dirname(path));
        const problem = { what: path, error: e as Error };
        if (initial || errno(e) !== 'ENOENT') problems.push(problem);
        this.report(`path:${path}`, problem, (e as Error).message);
        return [];
      }
    };

    for (const path of config.attestationPolicies) {
      for (const f of await listing(path, '.rego')) {
        const id = f.name.slice(0, -'.rego'.length);
        try {
          const bytes = await this.readSettled(f.path);
          if (bytes === undefined) continue;
          await this.applyOnce(
            `policy:${id}`,
            f.path,
            bytes,
            () => attestation.setPolicy(id, utf8(bytes, f.path)),
            problems,
          );
        } catch (e) {
          problems.push({ what: f.path, error: e as Error });
          this.report(`policy:${id}`, { what: f.path, error: e as Error }, (e as Error).message);
        }
      }
    }

    for (const path of config.referenceValues) {
      for (const f of await listing(path, '.json')) {
        try {
          const bytes = await this.readSettled(f.path);
          if (bytes === undefined) continue;
          await this.applyOnce(
            `rv:${f.path}`,
            f.path,
            bytes,
            async () => {
              let doc: unknown;
              try {
                doc = JSON.parse(utf8(bytes, f.path));
              } catch (e) {
                throw new MountedFileError(`not JSON: ${(e as Error).message}`);
              }
              // RVPS messages, or the operator's hand-written forms (rvps/document.ts).
              const messages = referenceValueMessages(doc);
              for (const m of messages) await attestation.registerReferenceValue(m);
            },
            problems,
          );
        } catch (e) {
          problems.push({ what: f.path, error: e as Error });
          this.report(`rv:${f.path}`, { what: f.path, error: e as Error }, (e as Error).message);
        }
      }
    }

    if (config.resourcePolicy !== undefined) {
      const files = await listing(config.resourcePolicy, '.rego');
      const chosen =
        files.find((f) => f.name === RESOURCE_POLICY_FILE) ?? (files.length === 1 ? files[0] : undefined);
      if (chosen === undefined && files.length > 1) {
        const problem = {
          what: config.resourcePolicy,
          error: new MountedFileError(`holds several .rego files and no ${RESOURCE_POLICY_FILE}`),
        };
        problems.push(problem);
        this.report('resource-policy', problem, files.map((f) => f.name).join());
      } else if (chosen !== undefined) {
        try {
          const bytes = await this.readSettled(chosen.path);
          if (bytes !== undefined) {
            await this.applyOnce(
              'resource-policy',
              chosen.path,
              bytes,
              () => policy.set(utf8(bytes, chosen.path)),
              problems,
            );
          }
        } catch (e) {
          problems.push({ what: chosen.path, error: e as Error });
          this.report('resource-policy', { what: chosen.path, error: e as Error }, (e as Error).message);
        }
      }
    }

    for (const root of config.resources) await this.scanResources(root, watch, problems, initial);

    this.watcher.setDirectories(watch);
    if (!initial && problems.length === 0) logger.debug('mounted files rescanned');
    return problems;
  }

  /** `<root>/<repo>/<type>/<tag>` files into the repository; keys whose file went away are deleted. */
  private async scanResources(
    root: string,
    watch: Set<string>,
    problems: Problem[],
    initial: boolean,
  ): Promise<void> {
    const repository = this.deps.repository;
    if (repository === undefined) return;
    const found = new Map<string, { path: string; bytes: Buffer }>();
    /** Keys whose file is still being written: neither written nor deleted this time. */
    const unsettled = new Set<string>();
    let complete = true;
    const walk = async (dir: string, segments: string[]): Promise<void> => {
      let listing: { files: FileEntry[]; dirs: FileEntry[] };
      try {
        listing = await visibleEntries(dir);
      } catch (e) {
        complete = false;
        if (segments.length === 0) watch.add(dirname(dir));
        const problem = { what: dir, error: e as Error };
        if (initial || errno(e) !== 'ENOENT') problems.push(problem);
        this.report(`path:${dir}`, problem, (e as Error).message);
        return;
      }
      watch.add(dir);
      if (segments.length === 2) {
        for (const f of listing.files) {
          if (!isValidSegment(f.name)) continue;
          const key = [...segments, f.name].join('/');
          try {
            const bytes = await this.readSettled(f.path);
            if (bytes === undefined) unsettled.add(key);
            else found.set(key, { path: f.path, bytes });
          } catch (e) {
            complete = false;
            problems.push({ what: f.path, error: e as Error });
            this.report(`res:${f.path}`, { what: f.path, error: e as Error }, (e as Error).message);
          }
        }
        return;
      }
      for (const d of listing.dirs) {
        if (isValidSegment(d.name)) await walk(d.path, [...segments, d.name]);
      }
    };
    await walk(root, []);

    const before = this.resources.get(root) ?? new Map<string, string>();
    const after = new Map<string, string>();
    for (const key of unsettled) {
      const h = before.get(key);
      if (h !== undefined) after.set(key, h);
    }
    for (const [key, { path, bytes }] of found) {
      const h = sha256(bytes);
      after.set(key, h);
      if (before.get(key) === h) continue;
      const [repo, type, tag] = key.split('/') as [string, string, string];
      try {
        await repository.write({ repository: repo, type, tag }, bytes);
        this.deps.logger.info({ resource: key, source: path }, 'mounted resource applied');
      } catch (e) {
        after.delete(key);
        problems.push({ what: path, error: e as Error });
        this.report(`res:${path}`, { what: path, error: e as Error }, h);
      }
    }
    // Deleting needs a complete picture: a directory that could not be read says nothing about its files.
    if (complete) {
      for (const key of before.keys()) {
        if (after.has(key) || unsettled.has(key)) continue;
        const [repo, type, tag] = key.split('/') as [string, string, string];
        try {
          await repository.delete({ repository: repo, type, tag });
        } catch {
          // Already gone (deleted through the admin API): nothing to do.
        }
        this.deps.logger.info({ resource: key }, 'mounted resource removed');
      }
    } else {
      for (const [key, h] of before) if (!after.has(key)) after.set(key, h);
    }
    this.resources.set(root, after);
  }
}
