// What the CLIs touch outside themselves, injectable so tests run them in memory.
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { InputError, UsageError } from './errors.js';

export interface CliIO {
  readonly out: (s: string) => void;
  readonly err: (s: string) => void;
  /** Reads a text file; refuses files larger than `maxBytes`. */
  readonly readFile: (path: string, maxBytes: number) => string;
  /** Reads a file's exact bytes (digests are over bytes, not text). */
  readonly readBytes: (path: string, maxBytes: number) => Buffer;
  readonly writeFile: (path: string, data: string, mode?: number) => void;
  readonly mkdir: (path: string) => void;
}

export const MAX_INPUT_BYTES = 4 * 1024 * 1024;

function readBytes(path: string, maxBytes: number): Buffer {
  let size: number;
  try {
    size = statSync(path).size;
  } catch (e) {
    throw new InputError(`cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  if (size > maxBytes) throw new InputError(`${path} is larger than ${maxBytes} bytes`);
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    throw new InputError(`cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  if (bytes.length > maxBytes) throw new InputError(`${path} is larger than ${maxBytes} bytes`);
  return bytes;
}

/** UTF-8 text of bytes; a byte-order mark is kept so that text and bytes stay the same. */
export function decodeUtf8(bytes: Uint8Array, what: string): string {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new InputError(`${what} is not UTF-8 text`);
  }
}

export const nodeIO: CliIO = {
  out: (s) => process.stdout.write(s),
  err: (s) => process.stderr.write(s),
  readFile: (path, maxBytes) => decodeUtf8(readBytes(path, maxBytes), path),
  readBytes,
  writeFile: (path, data, mode) => writeFileSync(path, data, mode === undefined ? undefined : { mode }),
  mkdir: (path) => mkdirSync(path, { recursive: true }),
};

export interface ParsedArgs {
  readonly positional: string[];
  /** Last value of each flag. */
  readonly flags: Map<string, string>;
  /** Every value of repeatable flags. */
  readonly lists: Map<string, string[]>;
  readonly switches: Set<string>;
}

/**
 * `--name value` / `--name=value` options; `valued` lists the flags that take a value, `switches` the
 * boolean ones. Anything else starting with `--` is a usage error, so a typo never passes unnoticed.
 */
export function parseArgs(
  argv: readonly string[],
  valued: readonly string[],
  switches: readonly string[] = [],
): ParsedArgs {
  const positional: string[] = [];
  const flags = new Map<string, string>();
  const lists = new Map<string, string[]>();
  const on = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--') {
      positional.push(...argv.slice(i + 1));
      break;
    }
    if (!a.startsWith('--') || a === '-') {
      positional.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const name = eq < 0 ? a.slice(2) : a.slice(2, eq);
    if (switches.includes(name)) {
      if (eq >= 0) throw new UsageError(`--${name} takes no value`);
      on.add(name);
      continue;
    }
    if (!valued.includes(name)) throw new UsageError(`unknown option --${name}`);
    let value: string | undefined;
    if (eq >= 0) value = a.slice(eq + 1);
    else {
      value = argv[i + 1];
      i++;
    }
    if (value === undefined) throw new UsageError(`--${name} needs a value`);
    flags.set(name, value);
    lists.set(name, [...(lists.get(name) ?? []), value]);
  }
  return { positional, flags, lists, switches: on };
}
