/**
 * The option lists of `secret` and `sealed-secret-init`, read by the one command-line layer
 * (`@broker/cli`, on node:util parseArgs). Options of all levels of a command are read in one
 * pass, so they may appear before or after the subcommand words (clap's `global`), as upstream's.
 */
import { type OptionSpecs, parseCommand, UsageError } from '@broker/cli';

export { UsageError };

export interface OptionSpec {
  readonly name: string;
  readonly short?: string;
  /** false: a flag. */
  readonly value: boolean;
}

export interface ParsedArgs {
  readonly values: Map<string, string>;
  readonly flags: Set<string>;
  readonly positionals: string[];
  readonly help: boolean;
  readonly version: boolean;
}

function display(spec: OptionSpec): string {
  return spec.value ? `--${spec.name} <${spec.name.toUpperCase().replaceAll('-', '_')}>` : `--${spec.name}`;
}

/** Reads `argv` against `specs`; throws UsageError naming an unknown option or a missing value. */
export function parseArgs(argv: readonly string[], specs: readonly OptionSpec[]): ParsedArgs {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = {};
  for (const s of specs) {
    options[s.name] = {
      type: s.value ? 'string' : 'boolean',
      ...(s.short !== undefined && { short: s.short }),
    };
  }
  const outcome = parseCommand(
    { name: '', version: '', help: '', options: options as OptionSpecs, positionals: ['[ARGS...]'] },
    argv,
  );
  const parsed: ParsedArgs = {
    values: new Map(),
    flags: new Set(),
    positionals: [],
    help: outcome.kind === 'help',
    version: outcome.kind === 'version',
  };
  if (outcome.kind !== 'run') return parsed;
  for (const [name, value] of Object.entries(outcome.parsed.values)) {
    if (typeof value === 'string') parsed.values.set(name, value);
    else if (value === true) parsed.flags.add(name);
  }
  parsed.positionals.push(...outcome.parsed.positionals);
  return parsed;
}

/** The value of a required option. */
export function required(args: ParsedArgs, spec: OptionSpec): string {
  const v = args.values.get(spec.name);
  if (v === undefined) throw new UsageError(`missing option '${display(spec)}'`);
  return v;
}

/** Refuses options that do not belong to the chosen subcommand. */
export function refuseOptions(args: ParsedArgs, names: readonly string[], where: string): void {
  for (const name of names) {
    if (args.values.has(name) || args.flags.has(name)) {
      throw new UsageError(`option '--${name}' cannot be used with ${where}`);
    }
  }
}
