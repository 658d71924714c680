/** The `sandbox-agent` command: serves grpc.AgentService until SIGINT, SIGTERM or SIGHUP. */
import {
  createLogger,
  LOG_FORMAT_HELP,
  LOG_FORMAT_OPTION,
  type LogFormat,
  type OptionValues,
  runCommand,
  UsageError,
} from '@broker/cli';
import { DEFAULT_CDH_SOCKET } from '@broker/guest-api';
import { formatTtrpcAddress, type ListenOptions, parseTtrpcAddress, type TtrpcAddress } from '@broker/ttrpc';
import { DEFAULT_ROOT, DEFAULT_STATE_DIR } from './agent.js';
import {
  DEFAULT_LISTEN,
  dataHubPuller,
  parseListenAddress,
  type RunningAgent,
  startSandboxAgent,
} from './server.js';
import { AGENT_VERSION, IMPLEMENTED_RPCS } from './service.js';

const COMMAND = {
  name: 'sandbox-agent',
  version: AGENT_VERSION,
  help: `Usage: sandbox-agent [OPTIONS]

Serves kata's grpc.AgentService over ttrpc and runs the pod's containers with runc. Serves until
SIGINT, SIGTERM or SIGHUP, then removes every container. Log lines are JSON on stdout (text on a
terminal). kata's vsock://-1:1024 cannot be listened on (Node.js has no vsock sockets).

Options:
      --listen <ADDR>       unix:///PATH or tcp://HOST:PORT; repeatable [default: ${DEFAULT_LISTEN}]
      --root <DIR>          paths in requests must stay below it; repeatable; the first holds pulled
                            images [default: ${DEFAULT_ROOT}]
      --state-dir <DIR>     container bundles and runc's state [default: ${DEFAULT_STATE_DIR}]
      --runc <PATH>         the runc executable [default: runc]
      --data-hub <ADDR>     the data hub (CDH) for image_guest_pull storages [default: ${DEFAULT_CDH_SOCKET}]
      --no-data-hub         refuse image_guest_pull storages
      --pause-bundle <DIR>  the guest's pause image (config.json, rootfs/) for the sandbox container
                            [default: /pause_bundle]
      --log-level <LEVEL>   off, error, warn, info, debug or trace [default: RUST_LOG, else info]
${LOG_FORMAT_HELP}
  -h, --help                Print help
  -V, --version             Print version
`,
  options: {
    listen: { type: 'string', multiple: true },
    root: { type: 'string', multiple: true },
    'state-dir': { type: 'string' },
    runc: { type: 'string' },
    'data-hub': { type: 'string' },
    'no-data-hub': { type: 'boolean' },
    'pause-bundle': { type: 'string' },
    'log-level': { type: 'string' },
    ...LOG_FORMAT_OPTION,
  },
  exitStatus: [
    [0, 'stopped by SIGINT, SIGTERM or SIGHUP'],
    [1, 'an address could not be listened on, or the state directories could not be made'],
  ],
} as const;

export interface MainOptions {
  readonly stdout?: (text: string) => void;
  readonly stderr?: (text: string) => void;
  readonly logDestination?: { write(line: string): void };
  /** Aborting it stops the agent as SIGTERM would. */
  readonly signal?: AbortSignal;
  readonly onListening?: (agent: RunningAgent) => void;
}

function listenOptions(values: OptionValues<typeof COMMAND.options>): ListenOptions[] {
  try {
    return (values.listen ?? [DEFAULT_LISTEN]).map(parseListenAddress);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

function untilStopped(signal: AbortSignal | undefined): Promise<string> {
  return new Promise((resolve) => {
    const handlers = STOP_SIGNALS.map((name) => {
      const h = () => done(name);
      process.on(name, h);
      return [name, h] as const;
    });
    const onAbort = () => done('abort');
    function done(why: string): void {
      for (const [name, h] of handlers) process.off(name, h);
      signal?.removeEventListener('abort', onAbort);
      resolve(why);
    }
    if (signal?.aborted) done('abort');
    else signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The `sandbox-agent` command. Resolves with the exit status. */
export function main(argv: string[], options: MainOptions = {}): Promise<number> {
  const out = options.stdout ?? ((t: string) => void process.stdout.write(t));
  const err = options.stderr ?? ((t: string) => void process.stderr.write(t));
  return runCommand(
    COMMAND,
    argv,
    async ({ values }) => {
      const listen = listenOptions(values);
      const logger = createLogger({
        name: 'sandbox-agent',
        ...(values['log-level'] !== undefined && { env: { RUST_LOG: values['log-level'] } }),
        ...(values['log-format'] !== undefined && { format: values['log-format'] as LogFormat }),
        ...(options.logDestination !== undefined && { destination: options.logDestination }),
      });
      const dataHub = values['no-data-hub'] ? undefined : (values['data-hub'] ?? DEFAULT_CDH_SOCKET);
      let hubSocket: string[] = [];
      if (dataHub !== undefined) {
        let address: TtrpcAddress;
        try {
          address = parseTtrpcAddress(dataHub);
        } catch (e) {
          throw new UsageError(`--data-hub: ${(e as Error).message}`);
        }
        if ('path' in address) hubSocket = [address.path];
      }
      // A log reader that went away (EPIPE on stdout) must not take the agent down with it, and with it
      // the cleanup of the pod's containers: lines it cannot write are lost instead, to the end.
      if (options.logDestination === undefined) process.stdout.on('error', () => {});
      const stopped = untilStopped(options.signal);
      const running = await startSandboxAgent({
        listen,
        roots: values.root ?? undefined,
        stateDir: values['state-dir'],
        runc: values.runc,
        pauseBundle: values['pause-bundle'],
        protectedPaths: hubSocket,
        ...(dataHub !== undefined && { pullImage: dataHubPuller(dataHub) }),
        logger,
      });
      logger.info(
        {
          listen: running.addresses.map((a: TtrpcAddress) => formatTtrpcAddress(a)),
          roots: running.agent.roots,
          stateDir: running.agent.stateDir,
          implemented: IMPLEMENTED_RPCS,
        },
        'sandbox-agent serving',
      );
      options.onListening?.(running);
      const why = await stopped;
      logger.info({ reason: why }, 'stopping');
      await running.close();
      return 0;
    },
    { out, err },
  );
}
