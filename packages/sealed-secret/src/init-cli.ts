/**
 * `sealed-secret-init`: the CVM-side unsealing step of flow C, run before
 * the workload starts (a oneshot unit ordered after the data hub).
 *
 *   sealed-secret-init [--root /sealed] [--cdh-socket ADDR]
 *     Replaces every pointer file in the secret volumes under the root with
 *     its secret, through the data hub's `UnsealSecret`.
 *   sealed-secret-init exec [--cdh-socket ADDR] -- COMMAND [ARGS…]
 *     Runs COMMAND with this process's environment, where each value that
 *     starts with `sealed.` is replaced by its secret (kata's env rule).
 *
 * Both keep a pointer that cannot be unsealed and log why, with its
 * resource URI and never a secret: the volume step then exits 0 so the
 * container still starts (spec: "file keeps the `sealed.` pointer text;
 * container still starts"), and `exec` runs the command with the value
 * unchanged. Only a usage error exits 2. Log lines (the shared pino logger) go to stderr, so that
 * the output of an `exec` command stays its own.
 */
import { spawn } from 'node:child_process';
import { constants as osConstants } from 'node:os';
import {
  createLogger,
  LOG_FORMAT_OPTION,
  logFlags,
  type OptionValues,
  runCommand,
  UsageError,
} from '@broker/cli';
import { DEFAULT_SEALED_ROOT, unsealEnv, unsealVolumes } from './volumes.js';

export const SEALED_SECRET_INIT_VERSION = '0.1.0';
const DEFAULT_CDH_SOCKET = 'unix:///run/confidential-containers/cdh.sock';

const USAGE = `Usage: sealed-secret-init [OPTIONS]
       sealed-secret-init exec [OPTIONS] -- <COMMAND> [ARGS]...

Replaces sealed-secret pointers (text starting with \`sealed.\`) with their secrets through the
confidential data hub: in the files of the secret volumes under --root, or, with \`exec\`, in the
environment given to COMMAND. A pointer that cannot be unsealed is kept and logged; the volume step
still exits 0 so that the container starts. Log lines go to stderr (stdout is the command's), JSON
(text on a terminal); the level comes from --log-level, else RUST_LOG, else info.

Options:
      --root <DIR>           Folder the sealed-secret volumes are mounted under [default: ${DEFAULT_SEALED_ROOT}]
      --cdh-socket <ADDR>    The data hub's ttrpc socket [default: ${DEFAULT_CDH_SOCKET}]
      --timeout-ms <MS>      Deadline of each UnsealSecret call [default: 50000]
      --log-level <LEVEL>    off, error, warn, info, debug or trace
      --log-format <FORMAT>  json (default) or text (default when stderr is a terminal)
  -h, --help                 Print help
  -V, --version              Print version
`;

const COMMON = {
  'cdh-socket': { type: 'string' },
  'timeout-ms': { type: 'string' },
  'log-level': { type: 'string' },
  ...LOG_FORMAT_OPTION,
} as const;

const EXIT_STATUS = [
  [0, 'every pointer handled (one that cannot be unsealed is kept and logged)'],
  [1, 'the volume folder could not be read'],
  [127, 'exec: COMMAND could not be started; otherwise exec exits with the status of COMMAND'],
] as const;

const VOLUMES = {
  name: 'sealed-secret-init',
  version: SEALED_SECRET_INIT_VERSION,
  help: USAGE,
  options: { root: { type: 'string' }, ...COMMON },
  exitStatus: EXIT_STATUS,
} as const;

const EXEC = {
  name: 'sealed-secret-init exec',
  version: SEALED_SECRET_INIT_VERSION,
  help: USAGE,
  options: COMMON,
  positionals: ['COMMAND', '[ARGS...]'],
  exitStatus: EXIT_STATUS,
} as const;

export interface InitCliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Runs the command of `exec`; resolves with the exit status to return (tests replace it). */
  readonly run?: (command: string, args: readonly string[], env: Record<string, string>) => Promise<number>;
}

/** Spawns the command with inherited stdio, forwards stop signals, resolves with its status. */
function runChild(command: string, args: readonly string[], env: Record<string, string>): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { env, stdio: 'inherit' });
    const forward = (sig: NodeJS.Signals) => () => child.kill(sig);
    const handlers = (['SIGTERM', 'SIGINT', 'SIGHUP'] as const).map((s) => [s, forward(s)] as const);
    for (const [s, h] of handlers) process.on(s, h);
    const done = (status: number) => {
      for (const [s, h] of handlers) process.off(s, h);
      resolve(status);
    };
    child.on('error', (e) => {
      process.stderr.write(`sealed-secret-init: cannot run ${command}: ${e.message}\n`);
      done(127);
    });
    child.on('exit', (code, signal) => {
      if (signal !== null) {
        done(128 + (osConstants.signals[signal] ?? 0));
      } else done(code ?? 1);
    });
  });
}

/** Runs `sealed-secret-init` with `argv` (without the program name); resolves with the exit status. */
export function mainInit(argv: readonly string[], ioOverrides: Partial<InitCliIo> = {}): Promise<number> {
  const io: InitCliIo = {
    stdout: (t) => process.stdout.write(t),
    stderr: (t) => process.stderr.write(t),
    env: process.env,
    ...ioOverrides,
  };
  const cio = { out: io.stdout, err: io.stderr, env: io.env };
  const execMode = argv[0] === 'exec';
  if (execMode) {
    return runCommand(
      EXEC,
      argv.slice(1),
      ({ values, positionals }) => run(io, values, positionals, ioOverrides),
      cio,
    );
  }
  return runCommand(VOLUMES, argv, ({ values }) => run(io, values, undefined, ioOverrides), cio);
}

async function run(
  io: InitCliIo,
  values: OptionValues<typeof VOLUMES.options>,
  command: readonly string[] | undefined,
  overrides: Partial<InitCliIo>,
): Promise<number> {
  let timeoutMs = 50_000;
  const t = values['timeout-ms'];
  if (t !== undefined) {
    if (!/^[0-9]{1,9}$/.test(t) || Number(t) === 0) {
      throw new UsageError(`invalid value '${t}' for '--timeout-ms' (a positive number of milliseconds)`);
    }
    timeoutMs = Number(t);
  }
  const { level, format } = logFlags(values, ['sealed_secret_init']);
  // One logger for every tool; on stderr, so that the output of an `exec` command stays its own.
  const logger = createLogger({
    name: 'sealed-secret-init',
    env: level !== undefined ? { RUST_LOG: level } : io.env,
    fd: 2,
    ...(format !== undefined && { format }),
    ...(overrides.stderr !== undefined && { destination: { write: overrides.stderr } }),
  });
  const socket = values['cdh-socket'] ?? DEFAULT_CDH_SOCKET;
  const { dataHubUnsealer } = await import('./remote.js');
  const hub = dataHubUnsealer(socket, { timeoutMs });
  try {
    if (command !== undefined) {
      const entries = Object.entries(io.env).flatMap(([k, v]) => (v === undefined ? [] : [`${k}=${v}`]));
      const unsealed = await unsealEnv(entries, { unseal: hub.unseal, logger });
      hub.close();
      const env: Record<string, string> = {};
      for (const e of unsealed) {
        const eq = e.indexOf('=');
        env[e.slice(0, eq)] = e.slice(eq + 1);
      }
      const [program, ...args] = command as [string, ...string[]];
      return await (io.run ?? runChild)(program, args, env);
    }
    const root = values.root ?? DEFAULT_SEALED_ROOT;
    const results = await unsealVolumes(root, { unseal: hub.unseal, logger });
    const failed = results.filter((r) => r.outcome === 'failed').length;
    logger.info({ root, unsealed: results.length - failed, kept: failed }, 'sealed-secret volumes processed');
    return 0;
  } finally {
    hub.close();
    logger.flush();
  }
}
