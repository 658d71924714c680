/**
 * The one command-line dialect, on `node:util` parseArgs: `-h/--help` prints the help on stdout
 * (exit 0), `-V/--version` prints `<command> <version> (broker <git describe>)`, an unknown option
 * or a missing argument prints one line naming it and `Run '<command> --help' for usage.` on
 * stderr (exit 2), and a runtime failure prints `<command>: <reason>` (exit 1). Every help text
 * ends with the exit statuses.
 *
 * parseArgs runs non-strict with tokens so that the messages name exactly what was wrong and so a
 * command level can stop at its subcommand (options belong to the level they are declared on,
 * as clap's do: `kbs-client --url U config --auth-private-key K set-resource ...`).
 */
import { parseArgs } from 'node:util';
import { backtraceOf, CliError, describeFailure, wantsBacktrace } from './errors.js';
import { versionLine } from './version.js';

export interface OptionSpec {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
  readonly multiple?: boolean;
}

export type OptionSpecs = Readonly<Record<string, OptionSpec>>;

type ValueOf<S extends OptionSpec> = S['type'] extends 'boolean'
  ? S['multiple'] extends true
    ? boolean[]
    : boolean
  : S['multiple'] extends true
    ? string[]
    : string;

/** Given options only; repeatable options collect into arrays. */
export type OptionValues<O extends OptionSpecs> = { -readonly [K in keyof O]?: ValueOf<O[K]> };

export interface CommandSpec<O extends OptionSpecs = OptionSpecs> {
  /** As the user types it: `kbs`, `kbs-client config set-resource`. The first word names the version. */
  readonly name: string;
  readonly version: string;
  /** Usage line, description and options; the exit statuses are appended. */
  readonly help: string;
  readonly options?: O;
  /** `QUERY` required, `[NAME]` optional, `FILE...` one or more, `[FILE...]` any number (last only). */
  readonly positionals?: readonly string[];
  /** The level's subcommands: the first positional must be one; it and what follows go to `rest`. */
  readonly subcommands?: readonly string[];
  /** Exit statuses that differ from or add to 0 success, 1 runtime failure, 2 usage error. */
  readonly exitStatus?: readonly (readonly [number, string])[];
}

export interface ParsedCommand<O extends OptionSpecs> {
  readonly values: OptionValues<O>;
  readonly positionals: string[];
  /** The subcommand, when the spec lists some. */
  readonly command: string;
  /** Arguments after the subcommand. */
  readonly rest: string[];
}

export interface CommandIo {
  readonly out: (text: string) => void;
  readonly err: (text: string) => void;
  /** `RUST_BACKTRACE=1` or `RUST_LOG=debug` (upstream's switches) add the stack to a runtime failure. */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

export const processIo: CommandIo = {
  out: (t) => void process.stdout.write(t),
  err: (t) => void process.stderr.write(t),
};

/** A command line the command cannot run: exit 2 with `Run '<command> --help' for usage.` */
export class UsageError extends CliError {
  override readonly name: string = 'UsageError';
  constructor(message?: string, options?: { cause?: unknown }) {
    super('USAGE_INVALID', message, options);
  }
}

/** A failure already reported to the user: exit with `status`, print nothing more. */
export class CommandExit extends CliError {
  override readonly name: string = 'CommandExit';
  constructor(readonly status: number) {
    super('COMMAND_EXIT', `exit ${status}`);
  }
}

const DEFAULT_EXIT_STATUS: readonly (readonly [number, string])[] = [
  [0, 'success'],
  [1, 'runtime failure (unreadable file, bad input, unreachable or refusing peer)'],
  [2, 'usage error (unknown option, missing or invalid argument)'],
];

/** The help text with its `Exit status:` section. */
export function helpText(spec: CommandSpec<OptionSpecs>): string {
  const status = new Map<number, string>(DEFAULT_EXIT_STATUS);
  for (const [code, meaning] of spec.exitStatus ?? []) status.set(code, meaning);
  const lines = [...status.entries()].sort(([a], [b]) => a - b).map(([c, m]) => `  ${c}  ${m}`);
  return `${spec.help.trimEnd()}\n\nExit status:\n${lines.join('\n')}\n`;
}

type Outcome<O extends OptionSpecs> =
  | { readonly kind: 'run'; readonly parsed: ParsedCommand<O> }
  | { readonly kind: 'help' }
  | { readonly kind: 'version' };

const quote = (s: string) => `'${s.length > 100 ? `${s.slice(0, 100)}…` : s}'`;

/** Parses one command level; throws UsageError. `--help` and `--version` win where they appear first. */
export function parseCommand<O extends OptionSpecs>(
  spec: CommandSpec<O>,
  argv: readonly string[],
): Outcome<O> {
  const declared: Record<string, OptionSpec> = { ...spec.options };
  const shorts = new Set(Object.values(declared).map((o) => o.short));
  declared.help = { type: 'boolean', ...(!shorts.has('h') && { short: 'h' }) };
  declared.version = { type: 'boolean', ...(!shorts.has('V') && { short: 'V' }) };
  const { tokens } = parseArgs({
    args: [...argv],
    options: declared,
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  const values: Record<string, unknown> = {};
  const positionals: string[] = [];
  let command = '';
  let rest: string[] = [];
  let afterTerminator = false;
  for (const token of tokens) {
    if (token.kind === 'option-terminator') {
      afterTerminator = true;
      continue;
    }
    if (token.kind === 'positional') {
      if (spec.subcommands !== undefined) {
        if (!spec.subcommands.includes(token.value)) {
          throw new UsageError(
            `unknown command ${quote(token.value)} (one of: ${spec.subcommands.join(', ')})`,
          );
        }
        command = token.value;
        rest = argv.slice(token.index + 1);
        break;
      }
      positionals.push(token.value);
      continue;
    }
    const option = Object.hasOwn(declared, token.name) ? declared[token.name] : undefined;
    if (option === undefined || afterTerminator)
      throw new UsageError(`unknown option ${quote(token.rawName)}`);
    if (token.name === 'help') return { kind: 'help' };
    if (token.name === 'version') return { kind: 'version' };
    let value: string | boolean = true;
    if (option.type === 'string') {
      // A separate value that looks like an option is a forgotten value, as in strict mode.
      const missing =
        token.value === undefined ||
        (!token.inlineValue && token.value.startsWith('-') && token.value !== '-');
      if (missing) throw new UsageError(`option ${quote(token.rawName)} needs a value`);
      value = token.value as string;
      // `-c=FILE` means FILE, as clap reads it.
      if (token.inlineValue && !token.rawName.startsWith('--') && value.startsWith('='))
        value = value.slice(1);
    } else if (token.value !== undefined) {
      throw new UsageError(`option ${quote(token.rawName)} takes no value`);
    }
    if (option.multiple) {
      const list = (values[token.name] as unknown[] | undefined) ?? [];
      list.push(value);
      values[token.name] = list;
    } else if (Object.hasOwn(values, token.name)) {
      throw new UsageError(`option ${quote(token.rawName)} given more than once`);
    } else {
      values[token.name] = value;
    }
  }
  if (spec.subcommands !== undefined && command === '') {
    throw new UsageError(`missing command (one of: ${spec.subcommands.join(', ')})`);
  }
  checkPositionals(spec.positionals ?? [], positionals);
  return { kind: 'run', parsed: { values: values as OptionValues<O>, positionals, command, rest } };
}

function checkPositionals(names: readonly string[], given: readonly string[]): void {
  let i = 0;
  for (const raw of names) {
    const optional = raw.startsWith('[');
    const name = raw.replace(/^\[|\]$/g, '');
    if (name.endsWith('...')) {
      if (!optional && given.length <= i) throw new UsageError(`missing argument <${name.slice(0, -3)}>`);
      return;
    }
    if (given.length <= i) {
      if (optional) return;
      throw new UsageError(`missing argument <${name}>`);
    }
    i++;
  }
  if (given.length > i) throw new UsageError(`unexpected argument ${quote(given[i] as string)}`);
}

/** The value of a string option restricted to `allowed`; throws UsageError naming both. */
export function choice<T extends string>(
  option: string,
  value: string | undefined,
  allowed: readonly T[],
): T | undefined {
  if (value === undefined) return undefined;
  if ((allowed as readonly string[]).includes(value)) return value as T;
  throw new UsageError(`invalid value ${quote(value)} for '--${option}' (allowed: ${allowed.join(', ')})`);
}

/** A required option; throws UsageError naming it. */
export function required<T>(option: string, value: T | undefined): T {
  if (value === undefined) throw new UsageError(`missing option '--${option}'`);
  return value;
}

/** Prints a usage error the dialect's way; returns 2. */
export function reportUsageError(name: string, message: string, io: CommandIo = processIo): number {
  io.err(`${name}: ${message}\nRun '${name} --help' for usage.\n`);
  return 2;
}

/**
 * Parses `argv` against `spec` and runs `body`. Help and version print and return 0; a UsageError
 * (from parsing or from `body`) returns 2; any other error prints one line, `<name>: <reason>` and
 * what to do when that is known (`describeFailure`), and returns 1.
 */
export async function runCommand<O extends OptionSpecs>(
  spec: CommandSpec<O>,
  argv: readonly string[],
  body: (args: ParsedCommand<O>) => Promise<number> | number,
  io: CommandIo = processIo,
): Promise<number> {
  try {
    const outcome = parseCommand(spec, argv);
    if (outcome.kind === 'help') {
      io.out(helpText(spec));
      return 0;
    }
    if (outcome.kind === 'version') {
      io.out(`${versionLine(spec.name.split(' ')[0] as string, spec.version)}\n`);
      return 0;
    }
    return await body(outcome.parsed);
  } catch (e) {
    if (e instanceof CommandExit) return e.status;
    if (e instanceof UsageError) return reportUsageError(spec.name, e.message, io);
    io.err(`${spec.name.split(' ')[0]}: ${describeFailure(e)}\n`);
    if (wantsBacktrace(io.env ?? process.env)) io.err(backtraceOf(e));
    return 1;
  }
}
