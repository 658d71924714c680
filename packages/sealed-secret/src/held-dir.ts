/**
 * A folder held open by descriptor, so that files are read and written
 * relative to it rather than by a path that may change meaning.
 *
 * Node has no `openat`/`renameat`. On Linux the magic link
 * `/proc/self/fd/<fd>` stands for the open folder itself: a path below it
 * resolves inside that folder even after the folder's name was renamed away
 * or replaced by a symlink. Everything below goes through that link, and
 * `readlink` of it tells where the kernel sees the folder now. Without
 * `/proc` nothing is opened (fail closed).
 */

import { constants, type Stats } from 'node:fs';
import { type FileHandle, lstat, open, readlink } from 'node:fs/promises';
import { SealedSecretError } from './errors.js';

export class FolderMovedError extends SealedSecretError {
  override readonly name: string = 'FolderMovedError';
  override readonly code = 'FOLDER_MOVED';
}

export class HeldDir {
  private constructor(
    private readonly handle: FileHandle,
    /** The real path the folder had when it was opened. */
    readonly path: string,
    private readonly identity: Stats,
  ) {}

  /**
   * Opens `path`, which must be a real path (no symlink in it), and checks
   * that the folder opened is the one at that path.
   */
  static async open(path: string): Promise<HeldDir> {
    const handle = await open(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    try {
      const held = new HeldDir(handle, path, await handle.stat());
      await held.ensureInPlace();
      return held;
    } catch (e) {
      await handle.close();
      throw e;
    }
  }

  /** The path of `name` inside the held folder, resolved through the descriptor. */
  entry(name: string): string {
    if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) {
      throw new SealedSecretError(`not a plain file name: ${JSON.stringify(name)}`, {
        code: 'FILE_NAME_INVALID',
      });
    }
    return `${this.fdPath()}/${name}`;
  }

  /** The held folder itself, usable as a path (for readdir). */
  fdPath(): string {
    return `/proc/self/fd/${this.handle.fd}`;
  }

  /**
   * Throws `FolderMovedError` unless the held folder is still at its path:
   * the kernel's name for it is unchanged and the path still leads to it
   * (not to a symlink or to another folder mounted or moved there).
   */
  async ensureInPlace(): Promise<void> {
    let where: string;
    try {
      where = await readlink(this.fdPath());
    } catch (e) {
      throw new SealedSecretError(
        `the folder cannot be held: /proc/self/fd is not available (${(e as Error).message})`,
        { code: 'FOLDER_UNHOLDABLE' },
      );
    }
    if (where !== this.path) throw new FolderMovedError('the folder was moved or replaced');
    const now = await lstat(this.path).catch(() => undefined);
    if (now === undefined || now.dev !== this.identity.dev || now.ino !== this.identity.ino) {
      throw new FolderMovedError('the folder was moved or replaced');
    }
  }

  /** Flushes the folder (makes a rename inside it durable); best effort. */
  async sync(): Promise<void> {
    await this.handle.sync().catch(() => {});
  }

  async close(): Promise<void> {
    await this.handle.close();
  }
}
