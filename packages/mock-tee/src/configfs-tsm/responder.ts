/**
 * A configfs-tsm report root served as a plain folder tree, so the guest's
 * configfs-tsm client runs unchanged against the mock TEE. A watcher fills
 * every folder made under the root with `provider` and `generation`, and
 * when `inblob` is written asks a provider callback for the report and
 * publishes it as `outblob` (and `auxblob`). Files appear by rename, so a
 * reader never sees half of one.
 *
 * What it cannot copy from configfs: attributes exist a moment after the
 * folder (the client waits for them), and a write is seen when the watcher
 * runs, not inside the write call.
 */
import { type FSWatcher, watch } from 'node:fs';
import { readdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { makeDirectory } from '@broker/cli';
import { MockTeeError } from '../errors.js';

/** What the provider callback is asked for. */
export interface TsmRequest {
  /** The report folder. */
  readonly dir: string;
  /** Report data as written to `inblob` (1..64 bytes). */
  readonly inblob: Uint8Array;
  /** The last value written to `privlevel`, if any (SEV-SNP's VMPL). */
  readonly privlevel?: number;
  /** The folder's write count, this write included. */
  readonly generation: number;
}

/** What the provider callback answers; `auxblob` is published (empty when absent) before `outblob`. */
export interface TsmResponse {
  readonly outblob: Uint8Array;
  readonly auxblob?: Uint8Array;
}

export type TsmProviderCallback = (request: TsmRequest) => Promise<TsmResponse> | TsmResponse;

/** A failure the callback reports; written nowhere, only logged through `onError`. */
export type TsmResponderErrorHandler = (err: unknown, dir: string) => void;

export interface ConfigfsTsmResponderOptions {
  /** The report root to serve; made when missing. */
  readonly root: string;
  /** Provider name written to `provider` (the kernel's form: `tdx_guest`, `sev_guest`, ...). */
  readonly provider: string;
  readonly respond: TsmProviderCallback;
  /** Further read-only attributes to create in each folder, name → content. */
  readonly attributes?: Readonly<Record<string, string | Uint8Array>>;
  readonly onError?: TsmResponderErrorHandler;
}

/** The kernel's inblob limit. */
const INBLOB_MAX = 64;

interface Folder {
  readonly path: string;
  readonly watcher: FSWatcher;
  generation: number;
  privlevel?: number;
  /** Identity of the last inblob write handled: size, mtime and content. */
  lastInblob?: string;
  /** Serializes the handling of one folder's events. */
  queue: Promise<void>;
}

async function publish(dir: string, name: string, data: Uint8Array | string): Promise<void> {
  const tmp = join(dir, `.${name}.tmp`);
  await writeFile(tmp, data);
  await rename(tmp, join(dir, name));
}

/**
 * The file's content with a stamp that tells writes apart: stat, read, stat
 * again, until both stats agree and match the bytes read. Two writes of the
 * same bytes within one timestamp tick count as one, which no client of the
 * mock does.
 */
async function readConsistent(path: string): Promise<{ data: Buffer; identity: string } | undefined> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const before = await stat(path, { bigint: true });
    const data = await readFile(path);
    const after = await stat(path, { bigint: true });
    if (
      before.mtimeNs === after.mtimeNs &&
      after.size === BigInt(data.length) &&
      before.size === after.size
    ) {
      return { data, identity: `${after.mtimeNs}:${data.toString('hex')}` };
    }
  }
  return undefined;
}

export class ConfigfsTsmResponder {
  readonly root: string;
  readonly provider: string;
  readonly #respond: TsmProviderCallback;
  readonly #attributes: Readonly<Record<string, string | Uint8Array>>;
  readonly #onError: TsmResponderErrorHandler;
  readonly #folders = new Map<string, Folder>();
  readonly #pending = new Set<string>();
  #rootWatcher: FSWatcher | undefined;
  #closed = false;
  /** Requests answered so far (tests assert that a request reached the device). */
  requests = 0;

  private constructor(options: ConfigfsTsmResponderOptions) {
    this.root = options.root;
    this.provider = options.provider;
    this.#respond = options.respond;
    this.#attributes = options.attributes ?? {};
    this.#onError = options.onError ?? (() => undefined);
  }

  /** Starts serving `options.root`; folders already there are filled too. */
  static async start(options: ConfigfsTsmResponderOptions): Promise<ConfigfsTsmResponder> {
    if (!/^[a-z0-9_]{1,64}$/.test(options.provider)) {
      throw new MockTeeError('USAGE', `invalid TSM provider name ${JSON.stringify(options.provider)}`);
    }
    const responder = new ConfigfsTsmResponder(options);
    await makeDirectory(options.root);
    responder.#rootWatcher = watch(options.root, { persistent: false }, (_event, name) => {
      if (typeof name === 'string') void responder.#noticeFolder(name);
    });
    responder.#rootWatcher.on('error', (err) => responder.#onError(err, options.root));
    for (const name of await readdir(options.root)) await responder.#noticeFolder(name);
    return responder;
  }

  /** Stops watching; folders stay as they are. */
  close(): void {
    this.#closed = true;
    this.#rootWatcher?.close();
    for (const f of this.#folders.values()) f.watcher.close();
    this.#folders.clear();
  }

  async #noticeFolder(name: string): Promise<void> {
    if (this.#closed) return;
    const path = join(this.root, name);
    // Several events arrive for one mkdir; only the first may set the folder up.
    if (this.#pending.has(path)) return;
    this.#pending.add(path);
    try {
      await this.#setUpOrForget(path);
    } finally {
      this.#pending.delete(path);
    }
  }

  async #setUpOrForget(path: string): Promise<void> {
    const known = this.#folders.get(path);
    let isDir = false;
    try {
      isDir = (await stat(path)).isDirectory();
    } catch {
      isDir = false;
    }
    if (!isDir) {
      if (known !== undefined) {
        known.watcher.close();
        this.#folders.delete(path);
      }
      return;
    }
    if (known !== undefined || this.#closed) return;
    let watcher: FSWatcher;
    try {
      watcher = watch(path, { persistent: false }, (_event, file) => {
        if (file === 'inblob' || file === 'privlevel') this.#enqueue(path, file);
      });
    } catch (err) {
      this.#onError(err, path);
      return;
    }
    const folder: Folder = { path, watcher, generation: 0, queue: Promise.resolve() };
    watcher.on('error', () => {
      watcher.close();
      this.#folders.delete(path);
    });
    this.#folders.set(path, folder);
    try {
      await publish(path, 'generation', '0\n');
      for (const [attr, content] of Object.entries(this.#attributes)) await publish(path, attr, content);
      // Last: the client waits for `provider` before it writes anything.
      await publish(path, 'provider', `${this.provider}\n`);
    } catch (err) {
      this.#onError(err, path);
    }
  }

  #enqueue(path: string, file: 'inblob' | 'privlevel'): void {
    const folder = this.#folders.get(path);
    if (folder === undefined) return;
    folder.queue = folder.queue
      .then(() => (file === 'inblob' ? this.#onInblob(folder) : this.#onPrivlevel(folder)))
      .catch((err: unknown) => {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return; // folder removed meanwhile
        this.#onError(err, path);
      });
  }

  async #onPrivlevel(folder: Folder): Promise<void> {
    const text = (await readFile(join(folder.path, 'privlevel'), 'utf8')).trim();
    if (!/^[0-3]$/.test(text)) return;
    const level = Number(text);
    if (level === folder.privlevel) return;
    folder.privlevel = level;
    folder.generation += 1;
    await publish(folder.path, 'generation', `${folder.generation}\n`);
  }

  async #onInblob(folder: Folder): Promise<void> {
    const snapshot = await readConsistent(join(folder.path, 'inblob'));
    // An event for the truncation that precedes the write: wait for the data.
    if (snapshot === undefined || snapshot.data.length === 0) return;
    const inblob = snapshot.data;
    const identity = snapshot.identity;
    if (identity === folder.lastInblob) return;
    folder.lastInblob = identity;
    folder.generation += 1;
    await publish(folder.path, 'generation', `${folder.generation}\n`);
    if (inblob.length > INBLOB_MAX) {
      this.#onError(
        new MockTeeError('USAGE', `inblob of ${inblob.length} bytes exceeds ${INBLOB_MAX}`),
        folder.path,
      );
      return;
    }
    const request: TsmRequest =
      folder.privlevel === undefined
        ? { dir: folder.path, inblob: new Uint8Array(inblob), generation: folder.generation }
        : {
            dir: folder.path,
            inblob: new Uint8Array(inblob),
            privlevel: folder.privlevel,
            generation: folder.generation,
          };
    const response = await this.#respond(request);
    await publish(folder.path, 'auxblob', response.auxblob ?? new Uint8Array());
    await publish(folder.path, 'outblob', response.outblob);
    this.requests += 1;
  }
}
