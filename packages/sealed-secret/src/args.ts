/**
 * A small command-line reader with clap's conventions and messages:
 * `--name value`, `--name=value`, `-n value`, `-nvalue`, flags, `--` ends
 * options. Options of all levels of a command are read in one pass, so they
 * may appear before or after the subcommand words (clap's `global`).
 */

export class UsageError extends Error {
  override readonly name = 'UsageError';
}

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

export function parseArgs(argv: readonly string[], specs: readonly OptionSpec[]): ParsedArgs {
  const byName = new Map(specs.map((s) => [s.name, s]));
  const byShort = new Map(specs.filter((s) => s.short !== undefined).map((s) => [s.short as string, s]));
  const values = new Map<string, string>();
  const flags = new Set<string>();
  const positionals: string[] = [];
  let help = false;
  let version = false;
  let onlyPositionals = false;

  const take = (spec: OptionSpec, value: string | undefined, next: () => string | undefined): void => {
    if (!spec.value) {
      if (value !== undefined) throw new UsageError(`unexpected value '${value}' for '--${spec.name}' found`);
      if (flags.has(spec.name)) {
        throw new UsageError(`the argument '${display(spec)}' cannot be used multiple times`);
      }
      flags.add(spec.name);
      return;
    }
    const v = value ?? next();
    if (v === undefined)
      throw new UsageError(`a value is required for '${display(spec)}' but none was supplied`);
    if (values.has(spec.name))
      throw new UsageError(`the argument '${display(spec)}' cannot be used multiple times`);
    values.set(spec.name, v);
  };

  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    const next = () => {
      const v = argv[i + 1];
      if (v !== undefined) i++;
      return v;
    };
    if (onlyPositionals || a === '-' || !a.startsWith('-')) {
      positionals.push(a);
    } else if (a === '--') {
      onlyPositionals = true;
    } else if (a === '--help' || a === '-h') {
      help = true;
    } else if (a === '--version' || a === '-V') {
      version = true;
    } else if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      const name = eq < 0 ? a.slice(2) : a.slice(2, eq);
      const spec = byName.get(name);
      if (spec === undefined)
        throw new UsageError(`unexpected argument '${eq < 0 ? a : a.slice(0, eq)}' found`);
      take(spec, eq < 0 ? undefined : a.slice(eq + 1), next);
    } else {
      const spec = byShort.get(a.charAt(1));
      if (spec === undefined) throw new UsageError(`unexpected argument '${a.slice(0, 2)}' found`);
      const rest = a.slice(2);
      if (!spec.value && rest !== '') throw new UsageError(`unexpected argument '${a}' found`);
      take(spec, rest === '' ? undefined : rest.startsWith('=') ? rest.slice(1) : rest, next);
    }
  }
  return { values, flags, positionals, help, version };
}

/** The value of a required option. */
export function required(args: ParsedArgs, spec: OptionSpec): string {
  const v = args.values.get(spec.name);
  if (v === undefined) {
    throw new UsageError(`the following required arguments were not provided:\n  ${display(spec)}`);
  }
  return v;
}

/** Refuses options that do not belong to the chosen subcommand. */
export function refuseOptions(args: ParsedArgs, names: readonly string[], where: string): void {
  for (const name of names) {
    if (args.values.has(name) || args.flags.has(name)) {
      throw new UsageError(`the argument '--${name}' cannot be used with ${where}`);
    }
  }
}
