// Multi-call dispatch: a symlink named after a command runs that command; the executable's own
// name takes the command as its first argument instead.
import { basename } from 'node:path';
import {
  backtraceOf,
  describeFailure,
  helpText,
  reportUsageError,
  versionLine,
  wantsBacktrace,
} from '@broker/cli';

export type CommandMain = (argv: string[]) => Promise<number>;

/**
 * A daemon that can share its process with others (`--together`): it stops when `signal` aborts and
 * calls `ready` once it serves.
 */
export type SharedMain = (
  argv: string[],
  options: { readonly signal: AbortSignal; readonly ready: () => void },
) => Promise<number>;

/**
 * A one-shot command that may run inside `--together` between daemons, as a oneshot unit ordered
 * between two services: the commands after it start once it has ended, whatever its status (a
 * failure is reported on stderr and the daemons go on, as a unit ordered `After=` it without
 * `Requires=` would).
 */
export type StepMain = CommandMain;

/** Separates the commands of `--together`. */
export const TOGETHER_SEPARATOR = '--and';

/** The executables' own version (this package's). */
export const EXECUTABLES_VERSION = '0.1.0';

function usage(
  selfName: string,
  commands: readonly string[],
  shared: readonly string[],
  steps: readonly string[],
): string {
  const together =
    shared.length === 0
      ? ''
      : `       ${selfName} --together <COMMAND> [ARGS...] ${TOGETHER_SEPARATOR} <COMMAND> [ARGS...]...
`;
  const togetherHelp =
    shared.length === 0
      ? ''
      : `
--together runs several daemons in one process (one Node runtime's memory instead of one each), each
with its own arguments, in the order given: each starts once the one before serves. When one ends,
the others stop; the exit status is the first failure's. Commands that can share: ${shared.join(', ')}.
${
  steps.length === 0
    ? ''
    : `One-shot commands that can run between them (the next starts once one has ended, whatever its status): ${steps.join(', ')}.
`
}`;
  return helpText({
    name: selfName,
    version: EXECUTABLES_VERSION,
    help: `Usage: ${selfName} <COMMAND> [ARGS...]
${together}       <COMMAND> [ARGS...]   (through a link named after the command)

Commands:
${commands.map((c) => `  ${c}`).join('\n')}
${togetherHelp}
Options:
  -h, --help     Print help (each command has its own: ${selfName} <COMMAND> --help)
  -V, --version  Print version
`,
    exitStatus: [[1, "the command's runtime failure (each command documents its own statuses)"]],
  });
}

export async function dispatch(
  selfName: string,
  commands: Record<string, () => Promise<CommandMain>>,
  shared: Record<string, () => Promise<SharedMain>> = {},
  steps: Record<string, () => Promise<StepMain>> = {},
): Promise<number> {
  const invokedAs = basename(process.argv0 || process.argv[1] || selfName);
  let args = process.argv.slice(2);
  const names = Object.keys(commands);
  let name = invokedAs;
  if (!Object.hasOwn(commands, name)) {
    const first = args[0];
    // The build asks the executable itself which names to link, so the table is the only list.
    if (first === '--list-commands') {
      process.stdout.write(`${names.join('\n')}\n`);
      return 0;
    }
    if (first === '-h' || first === '--help') {
      process.stdout.write(usage(selfName, names, Object.keys(shared), Object.keys(steps)));
      return 0;
    }
    if (first === '--together' && Object.keys(shared).length > 0) {
      return runTogether(selfName, shared, args.slice(1), steps);
    }
    if (first === '-V' || first === '--version') {
      process.stdout.write(`${versionLine(selfName, EXECUTABLES_VERSION)}\n`);
      return 0;
    }
    if (first === undefined) return reportUsageError(selfName, 'missing command');
    if (!Object.hasOwn(commands, first)) {
      return reportUsageError(selfName, `unknown command '${first.slice(0, 100)}'`);
    }
    name = first;
    args = args.slice(1);
  }
  const main = await (commands[name] as () => Promise<CommandMain>)();
  return main(args);
}

/** The command lines of `--together`: `[name, ...argv]` each, or a usage error's text. */
export function splitTogether(
  args: readonly string[],
  shareable: readonly string[],
): { lines: [string, ...string[]][] } | { error: string } {
  const groups: string[][] = [[]];
  for (const a of args) {
    if (a === TOGETHER_SEPARATOR) groups.push([]);
    else (groups.at(-1) as string[]).push(a);
  }
  const lines: [string, ...string[]][] = [];
  const seen = new Set<string>();
  for (const [name, ...argv] of groups) {
    if (name === undefined)
      return { error: `--together: a command is missing (around '${TOGETHER_SEPARATOR}')` };
    if (!shareable.includes(name)) {
      return {
        error: `--together: '${name.slice(0, 100)}' cannot share a process (one of: ${shareable.join(', ')})`,
      };
    }
    if (seen.has(name)) return { error: `--together: '${name}' given twice` };
    seen.add(name);
    lines.push([name, ...argv]);
  }
  return { lines };
}

export async function runTogether(
  selfName: string,
  shared: Record<string, () => Promise<SharedMain>>,
  args: readonly string[],
  steps: Record<string, () => Promise<StepMain>> = {},
): Promise<number> {
  const split = splitTogether(args, [...Object.keys(shared), ...Object.keys(steps)]);
  if ('error' in split) return reportUsageError(selfName, split.error);
  const stop = new AbortController();
  const ends: Promise<number>[] = [];
  for (const [name, ...argv] of split.lines) {
    if (stop.signal.aborted) break;
    if (Object.hasOwn(steps, name)) {
      const step = await (steps[name] as () => Promise<StepMain>)();
      const code = await step(argv).catch((err: unknown) => {
        process.stderr.write(`${selfName}: ${name}: ${describeFailure(err)}\n`);
        return 1;
      });
      if (code !== 0) process.stderr.write(`${selfName}: ${name} ended with status ${code}; going on\n`);
      continue;
    }
    const main = await (shared[name] as () => Promise<SharedMain>)();
    let ready: () => void = () => {};
    const serving = new Promise<'ready'>((resolve) => {
      ready = () => resolve('ready');
    });
    // Whichever command ends first (a failed start, a crash, a stop signal) stops the others.
    const end = main(argv, { signal: stop.signal, ready }).finally(() => stop.abort());
    ends.push(end);
    // The next starts once this one serves: the data hub asks the agent for tokens from its start.
    await Promise.race([serving, end.catch(() => 0)]);
  }
  const results = await Promise.allSettled(ends);
  const failed = results.find((r) => r.status === 'rejected');
  if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
  const codes = results.map((r) => (r as PromiseFulfilledResult<number>).value);
  return codes.find((c) => c !== 0) ?? 0;
}

export function run(
  selfName: string,
  commands: Record<string, () => Promise<CommandMain>>,
  shared: Record<string, () => Promise<SharedMain>> = {},
  steps: Record<string, () => Promise<StepMain>> = {},
): void {
  dispatch(selfName, commands, shared, steps).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      // Commands report their own failures; this is one that escaped them: one line, and where it
      // came from with RUST_BACKTRACE=1 or RUST_LOG=debug.
      process.stderr.write(`${selfName}: ${describeFailure(err)}\n`);
      if (wantsBacktrace(process.env)) process.stderr.write(backtraceOf(err));
      process.exitCode = 1;
    },
  );
}
