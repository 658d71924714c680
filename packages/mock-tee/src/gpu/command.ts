// `mock-tee gpu`: the simulated Hopper in the foreground, for a guest run by hand or the demo.
import { type CommandIo, choice, runCommand, UsageError } from '@broker/cli';
import { MockTeeError } from '../errors.js';
import { GPU_TOOL_ENV, startMockGpu } from './index.js';

/** The setting naming the GPU's test root, for the KBS's `nvidia_verifier.trusted_root_paths`. */
export const GPU_ROOT_ENV = 'MOCK_TEE_GPU_ROOT';

const spec = (version: string) =>
  ({
    name: 'mock-tee gpu',
    version,
    help: `Usage: mock-tee gpu --state <DIR> [OPTIONS]

Runs a simulated NVIDIA Hopper GPU in confidential-computing mode in the foreground until
SIGTERM/SIGINT, with nvidia-smi and nvattest stand-ins in <DIR>/bin. Prints the guest's settings
and the test root the KBS must trust as KEY=VALUE lines once it serves.

Options:
      --state <DIR>             State folder (device chain and key, tool stand-ins)
      --cc <MODE>               on or off [default: on]
      --driver-version <V>      Driver version a new device reports [default: 550.90.07]
  -h, --help                    Print help
`,
    options: {
      state: { type: 'string' },
      cc: { type: 'string' },
      'driver-version': { type: 'string' },
    },
    exitStatus: [
      [0, 'stopped by SIGTERM, SIGINT or SIGHUP'],
      [1, 'the device did not start'],
    ],
  }) as const;

export interface ForegroundIo extends CommandIo {
  /** Resolves when the command should stop (a signal); `cancel` drops the handlers. */
  watch(): { stopped: Promise<string>; cancel(): void };
  /** A value as a shell word. */
  word(value: string): string;
}

export function gpuMain(argv: readonly string[], version: string, io: ForegroundIo): Promise<number> {
  return runCommand(
    spec(version),
    [...argv],
    async ({ values }) => {
      if (values.state === undefined) throw new UsageError("missing option '--state'");
      const cc = choice('cc', values.cc, ['on', 'off'] as const);
      const stop = io.watch();
      let gpu: Awaited<ReturnType<typeof startMockGpu>>;
      try {
        gpu = await startMockGpu({
          stateDir: values.state,
          ccStatus: cc === 'off' ? 'OFF' : 'ON',
          ...(values['driver-version'] !== undefined && { driverVersion: values['driver-version'] }),
        });
      } catch (e) {
        stop.cancel();
        throw new MockTeeError('START_FAILED', `the GPU did not start: ${(e as Error).message}`, {
          cause: e,
        });
      }
      const settings: [string, string][] = [
        [GPU_TOOL_ENV['nvidia-smi'], gpu.env.BROKER_NVIDIA_SMI],
        [GPU_TOOL_ENV.nvattest, gpu.env.BROKER_NVATTEST],
        [GPU_ROOT_ENV, gpu.rootPath],
      ];
      io.out(settings.map(([k, v]) => `${k}=${io.word(v)}\n`).join(''));
      await stop.stopped;
      stop.cancel();
      await gpu.close();
      return 0;
    },
    io,
  );
}
