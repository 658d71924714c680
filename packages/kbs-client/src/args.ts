/**
 * The levels of kbs-client's command line (clap's habits: options belong to the command level they
 * are declared on, `kbs-client --url U config --admin-token-file F set-resource ...`), read by the
 * one command-line layer (`@broker/cli`, on node:util parseArgs): `--name value` and `--name=value`
 * both work, a repeated or unknown option is an error, and `--` ends options.
 */
import { type OptionSpec as CliOptionSpec, parseCommand, UsageError } from '@broker/cli';

export { UsageError };

export interface OptionSpec {
  readonly name: string;
  /** True for `--name VALUE`, false for a flag. */
  readonly value: boolean;
  readonly short?: string;
}

export interface ParsedLevel {
  readonly values: ReadonlyMap<string, string>;
  readonly flags: ReadonlySet<string>;
  readonly positionals: readonly string[];
  /** The subcommand name, when the level has subcommands and one was given. */
  readonly command: string | undefined;
  /** Arguments after the subcommand name. */
  readonly rest: readonly string[];
  readonly help: boolean;
}

/** One level; `-h/--help` sets `help`, `-V/--version` the flag `version`. Throws UsageError. */
export function parseLevel(
  args: readonly string[],
  specs: readonly OptionSpec[],
  subcommands: readonly string[] = [],
): ParsedLevel {
  const options: Record<string, CliOptionSpec> = {};
  for (const s of specs) {
    if (s.name === 'version') continue;
    options[s.name] = {
      type: s.value ? 'string' : 'boolean',
      ...(s.short !== undefined && { short: s.short }),
    };
  }
  const outcome = parseCommand(
    {
      name: '',
      version: '',
      help: '',
      options,
      ...(subcommands.length > 0 ? { subcommands } : { positionals: ['[ARGS...]'] }),
    },
    args,
  );
  const values = new Map<string, string>();
  const flags = new Set<string>();
  const empty = { values, flags, positionals: [], command: undefined, rest: [] };
  if (outcome.kind === 'help') return { ...empty, help: true };
  if (outcome.kind === 'version') return { ...empty, flags: new Set(['version']), help: false };
  const { parsed } = outcome;
  for (const [name, v] of Object.entries(parsed.values)) {
    if (typeof v === 'string') values.set(name, v);
    else if (v === true) flags.add(name);
  }
  return {
    values,
    flags,
    positionals: parsed.positionals,
    command: parsed.command === '' ? undefined : parsed.command,
    rest: parsed.rest,
    help: false,
  };
}

/** Exactly one (or at most one) of a group of flags, as clap's `group`. */
export function oneOf(level: ParsedLevel, names: readonly string[]): string | undefined {
  const given = names.filter((n) => level.flags.has(n) || level.values.has(n));
  if (given.length > 1) {
    throw new UsageError(`option '--${given[0]}' cannot be used with '--${given[1]}'`);
  }
  return given[0];
}

export function requireValue(level: ParsedLevel, name: string): string {
  const v = level.values.get(name);
  if (v === undefined)
    throw new UsageError(`missing option '--${name} <${name.toUpperCase().replaceAll('-', '_')}>'`);
  return v;
}
