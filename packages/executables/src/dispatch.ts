// Multi-call dispatch: a symlink named after a command runs that command; the executable's own
// name takes the command as its first argument instead.
import { basename } from 'node:path';

export type CommandMain = (argv: string[]) => Promise<number>;

export async function dispatch(
  selfName: string,
  commands: Record<string, () => Promise<CommandMain>>,
): Promise<number> {
  const invokedAs = basename(process.argv0 || process.argv[1] || selfName);
  let args = process.argv.slice(2);
  // The build asks the executable itself which names to link, so the table below is the only list.
  if (invokedAs === selfName && args[0] === '--list-commands') {
    process.stdout.write(`${Object.keys(commands).join('\n')}\n`);
    return 0;
  }
  let name = invokedAs;
  if (!(name in commands)) {
    name = args[0] ?? '';
    args = args.slice(1);
  }
  const load = commands[name];
  if (load === undefined) {
    process.stderr.write(
      `usage: ${selfName} <command> [args...]\ncommands: ${Object.keys(commands).join(', ')}\n`,
    );
    return 2;
  }
  const main = await load();
  return main(args);
}

export function run(selfName: string, commands: Record<string, () => Promise<CommandMain>>): void {
  dispatch(selfName, commands).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`${selfName}: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
