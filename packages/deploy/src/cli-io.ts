// What the CLIs touch outside themselves, injectable so tests run them in memory.
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import {
  UsageError as CliUsageError,
  helpText,
  makeDirectorySync,
  type OptionSpec,
  parseCommand,
  runCommand,
  versionLine,
} from '@broker/cli';
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
  // Not Node's recursive mkdir, which never returns under /proc or /sys.
  mkdir: (path) => makeDirectorySync(path),
};

export interface ParsedArgs {
  readonly positional: string[];
  /** Last value of each flag. */
  readonly flags: Map<string, string>;
  /** Every value of repeatable flags. */
  readonly lists: Map<string, string[]>;
  readonly switches: Set<string>;
  /** `-h/--help` or `-V/--version` was given (the rest is then empty). */
  readonly help?: boolean;
  readonly version?: boolean;
}

/**
 * `--name value` / `--name=value` options on the shared parseArgs layer; `valued` lists the flags that
 * take a value (repeatable), `switches` the boolean ones. Anything else starting with `-` is a usage
 * error, so a typo never passes unnoticed.
 */
export function parseArgs(
  argv: readonly string[],
  valued: readonly string[],
  switches: readonly string[] = [],
): ParsedArgs {
  const options: Record<string, OptionSpec> = {};
  for (const name of valued) options[name] = { type: 'string', multiple: true };
  for (const name of switches) options[name] = { type: 'boolean' };
  let outcome: ReturnType<typeof parseCommand>;
  try {
    outcome = parseCommand({ name: '', version: '', help: '', options, positionals: ['[ARGS...]'] }, argv);
  } catch (e) {
    if (e instanceof CliUsageError) throw new UsageError(e.message);
    throw e;
  }
  const parsed = { positional: [], flags: new Map(), lists: new Map(), switches: new Set<string>() };
  if (outcome.kind !== 'run')
    return { ...parsed, help: outcome.kind === 'help', version: outcome.kind === 'version' };
  const { values, positionals } = outcome.parsed;
  for (const [name, v] of Object.entries(values)) {
    if (Array.isArray(v)) {
      parsed.lists.set(name, v as string[]);
      parsed.flags.set(name, (v as string[]).at(-1) as string);
    } else if ((v as unknown) === true) parsed.switches.add(name);
  }
  return { ...parsed, positional: positionals };
}

/** The version of brokerctl and initdata. */
export const DEPLOY_TOOLS_VERSION = '0.1.0';

/**
 * Runs a deploy tool in the dialect: `<name> <command> [options]`, help with the exit statuses,
 * the version line, one-line usage errors (2), `<name>: <reason>` for failures (1).
 */
export function runDeployTool(
  name: string,
  usage: string,
  commands: readonly string[],
  argv: readonly string[],
  io: CliIO,
  body: (command: string, rest: string[]) => Promise<number> | number,
): Promise<number> {
  const spec = { name, version: DEPLOY_TOOLS_VERSION, help: usage, subcommands: commands };
  const cio = { out: io.out, err: io.err };
  return runCommand(
    spec,
    argv,
    async ({ command, rest }) => {
      try {
        return await body(command, rest);
      } catch (e) {
        // The deploy packages' own UsageError: the dialect's exit 2 and pointer to --help.
        if (e instanceof UsageError) throw new CliUsageError(e.message);
        throw e;
      }
    },
    cio,
  );
}

/** Handles `-h/--help` and `-V/--version` after a subcommand; true when it answered. */
export function answeredHelp(name: string, usage: string, args: ParsedArgs, io: CliIO): boolean {
  if (args.help) io.out(helpText({ name, version: DEPLOY_TOOLS_VERSION, help: usage }));
  else if (args.version) io.out(`${versionLine(name.split(' ')[0] as string, DEPLOY_TOOLS_VERSION)}\n`);
  return args.help === true || args.version === true;
}
