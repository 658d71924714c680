/**
 * Directory creation that always ends. Node's `mkdir(path, { recursive: true })` loops forever
 * (at full CPU, in the thread pool or on the main thread) when a parent exists but refuses
 * children with ENOENT, as `/proc` and `/sys` do; a service asked to put its socket there then
 * hangs and ignores SIGTERM. This walks the path once instead and fails naming the path.
 */
import { mkdirSync, statSync } from 'node:fs';
import { mkdir, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { CliError, type CliErrorCode } from './errors.js';

/** The error of a directory that could not be created; `path` is the one asked for. */
export class DirectoryError extends CliError {
  override readonly name: string = 'DirectoryError';
  constructor(
    readonly path: string,
    code: string,
    reason: string,
  ) {
    super(code as CliErrorCode, `cannot create directory ${path}: ${reason}`);
  }
}

function missingAncestors(path: string, exists: (p: string) => boolean): string[] {
  const chain: string[] = [];
  for (let p = resolve(path); !exists(p); p = dirname(p)) {
    chain.unshift(p);
    if (dirname(p) === p) break;
  }
  return chain;
}

function wrap(path: string, level: string, e: unknown): DirectoryError {
  const err = e as NodeJS.ErrnoException;
  const code = err.code ?? 'EIO';
  const reason =
    code === 'ENOENT'
      ? 'its parent refuses new entries'
      : String(err.message ?? e)
          .replace(/^[A-Z]+: /, '')
          .replace(/, \w+ '.*'$/, '');
  return new DirectoryError(path, code, level === resolve(path) ? reason : `${level}: ${reason}`);
}

/** `mkdir -p` that fails (never spins) where a level cannot be created, or exists and is not a folder. */
export async function makeDirectory(path: string, mode?: number): Promise<void> {
  const exists = (p: string) => {
    try {
      statSync(p);
      return true;
    } catch {
      return false;
    }
  };
  for (const level of missingAncestors(path, exists)) {
    try {
      await mkdir(level, mode === undefined ? {} : { mode });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw wrap(path, level, e);
    }
  }
  const s = await stat(path).catch((e: unknown) => {
    throw wrap(path, resolve(path), e);
  });
  if (!s.isDirectory()) throw new DirectoryError(path, 'ENOTDIR', 'exists and is not a directory');
}

/** The synchronous form of makeDirectory. */
export function makeDirectorySync(path: string, mode?: number): void {
  const exists = (p: string) => {
    try {
      statSync(p);
      return true;
    } catch {
      return false;
    }
  };
  for (const level of missingAncestors(path, exists)) {
    try {
      mkdirSync(level, mode === undefined ? {} : { mode });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw wrap(path, level, e);
    }
  }
  let s: ReturnType<typeof statSync>;
  try {
    s = statSync(path);
  } catch (e) {
    throw wrap(path, resolve(path), e);
  }
  if (!s.isDirectory()) throw new DirectoryError(path, 'ENOTDIR', 'exists and is not a directory');
}
