/**
 * GetOOMEvent: the ids of containers whose cgroup hit its memory limit, in order. One `runc events`
 * per running container reports them (runc watches the cgroup: memory.oom_control's eventfd on cgroup
 * v1, memory.events on v2); its periodic statistics are asked for once an hour and ignored.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

export class OomEvents {
  readonly #queue: string[] = [];
  #waiters: (() => void)[] = [];
  readonly #watchers = new Map<string, ChildProcess>();

  constructor(
    private readonly runc: string,
    private readonly stateRoot: string,
  ) {}

  /** Starts watching a running container; the result stops this watcher (and no later one). */
  watch(id: string): () => void {
    const existing = this.#watchers.get(id);
    if (existing) return () => this.#stop(id, existing);
    const child = spawn(this.runc, ['--root', this.stateRoot, 'events', '--interval', '3600s', id], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    child.on('error', () => this.#watchers.delete(id));
    child.on('exit', () => {
      if (this.#watchers.get(id) === child) this.#watchers.delete(id);
    });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      try {
        const event = JSON.parse(line) as { type?: string; id?: string };
        if (event.type === 'oom') this.#push(event.id ?? id);
      } catch {
        // not an event line
      }
    });
    this.#watchers.set(id, child);
    return () => this.#stop(id, child);
  }

  #stop(id: string, child: ChildProcess): void {
    if (this.#watchers.get(id) === child) this.#watchers.delete(id);
    child.kill('SIGKILL');
  }

  /** Stops watching a container (it is being removed). */
  unwatch(id: string): void {
    const child = this.#watchers.get(id);
    if (child) this.#stop(id, child);
  }

  #push(id: string): void {
    this.#queue.push(id);
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
  }

  /** The next container that ran out of memory, waiting for one; rejects when `signal` aborts. */
  async next(signal?: AbortSignal): Promise<string> {
    while (this.#queue.length === 0) {
      signal?.throwIfAborted();
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => reject(signal?.reason);
        this.#waiters.push(() => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        });
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    }
    return this.#queue.shift()!;
  }

  close(): void {
    for (const id of [...this.#watchers.keys()]) this.unwatch(id);
  }
}
