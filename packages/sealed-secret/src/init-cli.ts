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
 * unchanged. Only a usage error exits 2. Logs are JSON lines on stderr, so that the output of an `exec` command stays its own.
 */
import { spawn } from 'node:child_process';
import { constants as osConstants } from 'node:os';
import { type OptionSpec, parseArgs, UsageError } from './args.js';
import { DEFAULT_SEALED_ROOT, type StepLogger, unsealEnv, unsealVolumes } from './volumes.js';

export const SEALED_SECRET_INIT_VERSION = '0.1.0';
const DEFAULT_CDH_SOCKET = 'unix:///run/confidential-containers/cdh.sock';

const USAGE = `Usage: sealed-secret-init [OPTIONS]
       sealed-secret-init exec [OPTIONS] -- <COMMAND> [ARGS]...

Replaces sealed-secret pointers (text starting with \`sealed.\`) with their secrets through the
confidential data hub: in the files of the secret volumes under --root, or, with \`exec\`, in the
environment given to COMMAND. A pointer that cannot be unsealed is kept and logged; the volume step
still exits 0 so that the container starts.

Options:
      --root <DIR>          Folder the sealed-secret volumes are mounted under [default: ${DEFAULT_SEALED_ROOT}]
      --cdh-socket <ADDR>   The data hub's ttrpc socket [default: ${DEFAULT_CDH_SOCKET}]
      --timeout-ms <MS>     Deadline of each UnsealSecret call [default: 50000]
      --log-level <LEVEL>   trace, debug, info, warn, error or off [default: info]
  -h, --help                Print help
  -V, --version             Print version
`;

const OPTS: OptionSpec[] = [
  { name: 'root', value: true },
  { name: 'cdh-socket', value: true },
  { name: 'timeout-ms', value: true },
  { name: 'log-level', value: true },
];

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'off'] as const;
type Level = (typeof LEVELS)[number];

export interface InitCliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Runs the command of `exec`; resolves with the exit status to return (tests replace it). */
  readonly run?: (command: string, args: readonly string[], env: Record<string, string>) => Promise<number>;
}

/** JSON-lines logger at `level`. */
export function jsonLineLogger(write: (line: string) => void, level: Level = 'info'): StepLogger {
  const rank = (l: Level) => LEVELS.indexOf(l);
  const emit = (l: Level, fields: object, msg: string) => {
    if (level === 'off' || rank(l) < rank(level)) return;
    write(`${JSON.stringify({ level: l, time: new Date().toISOString(), msg, ...fields })}\n`);
  };
  return {
    debug: (f, m) => emit('debug', f, m),
    info: (f, m) => emit('info', f, m),
    warn: (f, m) => emit('warn', f, m),
  };
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
export async function mainInit(
  argv: readonly string[],
  ioOverrides: Partial<InitCliIo> = {},
): Promise<number> {
  const io: InitCliIo = {
    stdout: (t) => process.stdout.write(t),
    stderr: (t) => process.stderr.write(t),
    env: process.env,
    ...ioOverrides,
  };
  const execMode = argv[0] === 'exec';
  let parsed: ReturnType<typeof parseArgs>;
  let timeoutMs = 50_000;
  let level: Level = 'info';
  try {
    parsed = parseArgs(
      execMode ? argv.slice(1) : argv,
      execMode ? OPTS.filter((o) => o.name !== 'root') : OPTS,
    );
    if (parsed.help) {
      io.stdout(USAGE);
      return 0;
    }
    if (parsed.version) {
      io.stdout(`sealed-secret-init ${SEALED_SECRET_INIT_VERSION}\n`);
      return 0;
    }
    const t = parsed.values.get('timeout-ms');
    if (t !== undefined) {
      if (!/^[0-9]{1,9}$/.test(t) || Number(t) === 0) {
        throw new UsageError(
          `invalid value '${t}' for '--timeout-ms <MS>': a positive number of milliseconds`,
        );
      }
      timeoutMs = Number(t);
    }
    const l = parsed.values.get('log-level');
    if (l !== undefined) {
      if (!(LEVELS as readonly string[]).includes(l)) {
        throw new UsageError(`invalid value '${l}' for '--log-level <LEVEL>': expected ${LEVELS.join(', ')}`);
      }
      level = l as Level;
    }
    if (execMode && parsed.positionals.length === 0) throw new UsageError('exec needs a command after `--`');
    if (!execMode && parsed.positionals.length > 0) {
      throw new UsageError(`unexpected argument '${parsed.positionals[0]}' found`);
    }
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    io.stderr(`error: ${e.message}\n\nFor more information, try '--help'.\n`);
    return 2;
  }

  const logger = jsonLineLogger(io.stderr, level);
  const socket = parsed.values.get('cdh-socket') ?? DEFAULT_CDH_SOCKET;
  const { dataHubUnsealer } = await import('./remote.js');
  const hub = dataHubUnsealer(socket, { timeoutMs });
  try {
    if (execMode) {
      const entries = Object.entries(io.env).flatMap(([k, v]) => (v === undefined ? [] : [`${k}=${v}`]));
      const unsealed = await unsealEnv(entries, { unseal: hub.unseal, logger });
      hub.close();
      const env: Record<string, string> = {};
      for (const e of unsealed) {
        const eq = e.indexOf('=');
        env[e.slice(0, eq)] = e.slice(eq + 1);
      }
      const [command, ...args] = parsed.positionals as [string, ...string[]];
      return await (io.run ?? runChild)(command, args, env);
    }
    const root = parsed.values.get('root') ?? DEFAULT_SEALED_ROOT;
    const results = await unsealVolumes(root, { unseal: hub.unseal, logger });
    const failed = results.filter((r) => r.outcome === 'failed').length;
    logger.info({ root, unsealed: results.length - failed, kept: failed }, 'sealed-secret volumes processed');
    return 0;
  } finally {
    hub.close();
  }
}
