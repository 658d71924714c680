// Multi-call dispatch: a symlink named after a command runs that command; the executable's own
// name takes the command as its first argument instead.
import { basename } from 'node:path';
import { describeError, helpText, reportUsageError, versionLine } from '@broker/cli';

export type CommandMain = (argv: string[]) => Promise<number>;

/** The executables' own version (this package's). */
export const EXECUTABLES_VERSION = '0.1.0';

function usage(selfName: string, commands: readonly string[]): string {
  return helpText({
    name: selfName,
    version: EXECUTABLES_VERSION,
    help: `Usage: ${selfName} <COMMAND> [ARGS...]
       <COMMAND> [ARGS...]   (through a link named after the command)

Commands:
${commands.map((c) => `  ${c}`).join('\n')}

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
      process.stdout.write(usage(selfName, names));
      return 0;
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

export function run(selfName: string, commands: Record<string, () => Promise<CommandMain>>): void {
  dispatch(selfName, commands).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      // Commands report their own failures; this is one that escaped them: show where it came from.
      process.stderr.write(`${selfName}: ${describeError(err)}\n`);
      if (err instanceof Error && err.stack) process.stderr.write(`${err.stack}\n`);
      process.exitCode = 1;
    },
  );
}
