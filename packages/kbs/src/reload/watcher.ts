// Watching mounted files. Kubernetes updates a ConfigMap or Secret volume atomically: it writes the new
// files into a fresh hidden `..<timestamp>` directory, points a temporary symlink at it and renames that
// over `..data`; the visible names are symlinks through `..data`. A watch on the file itself would follow
// the old inode, so the mount directory is watched instead and any event there (the `..data` rename, or a
// plain file being rewritten outside Kubernetes) triggers a rescan after a short quiet period. A slow poll
// backs the watches up, since inotify events can be missed (a directory replaced, a watch limit reached).
import { type FSWatcher, watch } from 'node:fs';

export interface DirectoryWatcherOptions {
  /** Quiet period after the last event before `onChange` runs; default 200 ms. */
  readonly debounceMs?: number;
  /** Rescan this often even without events; default 60 s, 0 disables. */
  readonly pollMs?: number;
  /** Told when a directory cannot be watched (it may appear later). */
  readonly onWatchError?: (dir: string, error: Error) => void;
}

/**
 * Calls `onChange` (never concurrently with itself) after changes in any of a set of directories. The set
 * can be replaced at any time, e.g. when a rescan finds new subdirectories.
 */
export class DirectoryWatcher {
  private readonly watchers = new Map<string, FSWatcher>();
  private readonly debounceMs: number;
  private readonly onWatchError: ((dir: string, error: Error) => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly poll: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private closed = false;

  constructor(
    private readonly onChange: () => Promise<void>,
    options: DirectoryWatcherOptions = {},
  ) {
    this.debounceMs = options.debounceMs ?? 200;
    this.onWatchError = options.onWatchError;
    const pollMs = options.pollMs ?? 60_000;
    if (pollMs > 0) {
      this.poll = setInterval(() => this.trigger(0), pollMs);
      this.poll.unref();
    }
  }

  /** Watches exactly these directories from now on. */
  setDirectories(dirs: Iterable<string>): void {
    if (this.closed) return;
    const wanted = new Set(dirs);
    for (const [dir, w] of this.watchers) {
      if (!wanted.has(dir)) {
        w.close();
        this.watchers.delete(dir);
      }
    }
    for (const dir of wanted) {
      if (this.watchers.has(dir)) continue;
      try {
        const w = watch(dir, { persistent: false }, () => this.trigger(this.debounceMs));
        w.on('error', (e) => {
          // The directory went away (or was replaced): drop the watch; the next rescan sets it again.
          w.close();
          if (this.watchers.get(dir) === w) this.watchers.delete(dir);
          this.onWatchError?.(dir, e);
          this.trigger(this.debounceMs);
        });
        this.watchers.set(dir, w);
      } catch (e) {
        this.onWatchError?.(dir, e as Error);
      }
    }
  }

  /** The directories currently watched. */
  get directories(): string[] {
    return [...this.watchers.keys()];
  }

  /** Runs `onChange` after `delayMs` of quiet; events meanwhile push it back. */
  trigger(delayMs = this.debounceMs): void {
    if (this.closed) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      // onChange reports its own failures; nothing may escape as an unhandled rejection.
      this.run().catch(() => undefined);
    }, delayMs);
    this.timer.unref();
  }

  /** Runs `onChange` now (after a run in progress, if any); resolves when it has run. */
  async run(): Promise<void> {
    if (this.closed) return;
    if (this.running !== undefined) {
      // Changes seen during a run are picked up by one more run right after it.
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      try {
        do {
          this.again = false;
          await this.onChange();
        } while (this.again && !this.closed);
      } finally {
        this.running = undefined;
      }
    })();
    return this.running;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.poll !== undefined) clearInterval(this.poll);
    for (const w of this.watchers.values()) w.close();
    this.watchers.clear();
    await this.running;
  }
}
