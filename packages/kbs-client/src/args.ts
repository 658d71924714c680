/**
 * A small command-line parser with clap's habits: options belong to the
 * command level they are declared on (`kbs-client --url U config
 * --admin-token-file F set-resource ...`), `--name value` and `--name=value`
 * both work, a repeated or unknown option is an error, and `--` ends options.
 */

export class UsageError extends Error {
  override readonly name: string = 'UsageError';
}

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

export function parseLevel(
  args: readonly string[],
  specs: readonly OptionSpec[],
  subcommands: readonly string[] = [],
): ParsedLevel {
  const byName = new Map(specs.map((s) => [s.name, s]));
  const byShort = new Map(specs.filter((s) => s.short !== undefined).map((s) => [s.short as string, s]));
  const values = new Map<string, string>();
  const flags = new Set<string>();
  const positionals: string[] = [];
  let help = false;
  let optionsEnded = false;

  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (!optionsEnded && arg === '--') {
      optionsEnded = true;
      continue;
    }
    if (!optionsEnded && (arg === '--help' || arg === '-h')) {
      help = true;
      continue;
    }
    if (!optionsEnded && arg.startsWith('-') && arg !== '-') {
      let spec: OptionSpec | undefined;
      let inline: string | undefined;
      if (arg.startsWith('--')) {
        const eq = arg.indexOf('=');
        const name = eq < 0 ? arg.slice(2) : arg.slice(2, eq);
        if (eq >= 0) inline = arg.slice(eq + 1);
        spec = byName.get(name);
      } else if (arg.length === 2) {
        spec = byShort.get(arg.slice(1));
      }
      if (spec === undefined) throw new UsageError(`unexpected argument '${arg}' found`);
      if (values.has(spec.name) || flags.has(spec.name)) {
        throw new UsageError(`the argument '--${spec.name}' cannot be used multiple times`);
      }
      if (spec.value) {
        const v = inline ?? args[++i];
        if (v === undefined)
          throw new UsageError(`a value is required for '--${spec.name}' but none was supplied`);
        values.set(spec.name, v);
      } else {
        if (inline !== undefined) throw new UsageError(`unexpected value '${inline}' for '--${spec.name}'`);
        flags.add(spec.name);
      }
      continue;
    }
    if (subcommands.length > 0) {
      if (!subcommands.includes(arg)) throw new UsageError(`unrecognized subcommand '${arg}'`);
      return { values, flags, positionals, command: arg, rest: args.slice(i + 1), help };
    }
    positionals.push(arg);
  }
  return { values, flags, positionals, command: undefined, rest: [], help };
}

/** Exactly one (or at most one) of a group of flags, as clap's `group`. */
export function oneOf(level: ParsedLevel, names: readonly string[]): string | undefined {
  const given = names.filter((n) => level.flags.has(n) || level.values.has(n));
  if (given.length > 1) {
    throw new UsageError(`the argument '--${given[0]}' cannot be used with '--${given[1]}'`);
  }
  return given[0];
}

export function requireValue(level: ParsedLevel, name: string): string {
  const v = level.values.get(name);
  if (v === undefined)
    throw new UsageError(
      `the following required arguments were not provided: --${name} <${name.toUpperCase().replaceAll('-', '_')}>`,
    );
  return v;
}
