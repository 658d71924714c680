// `mock-tee cca`: the simulated CCA realm in the foreground, for a guest run by hand or the demo.
import { runCommand, UsageError } from '@broker/cli';
import { MockTeeError } from '../errors.js';
import type { ForegroundIo } from '../gpu/command.js';
import { startMockCcaDevice } from './index.js';

const spec = (version: string) =>
  ({
    name: 'mock-tee cca',
    version,
    help: `Usage: mock-tee cca --state <DIR>

Runs a simulated Arm CCA realm (configfs-tsm, provider arm_cca_guest) in the foreground until
SIGTERM/SIGINT. Prints the guest's report root and the CCA verifier configuration the KBS must be
given (its CCA_CONFIG_FILE) as KEY=VALUE lines once it serves.

Options:
      --state <DIR>  State folder (CPAK and RAK, TA and RV stores, the report root)
  -h, --help         Print help
`,
    options: { state: { type: 'string' } },
    exitStatus: [
      [0, 'stopped by SIGTERM, SIGINT or SIGHUP'],
      [1, 'the realm did not start'],
    ],
  }) as const;

export function ccaMain(argv: readonly string[], version: string, io: ForegroundIo): Promise<number> {
  return runCommand(
    spec(version),
    [...argv],
    async ({ values }) => {
      if (values.state === undefined) throw new UsageError("missing option '--state'");
      const stop = io.watch();
      let realm: Awaited<ReturnType<typeof startMockCcaDevice>>;
      try {
        realm = await startMockCcaDevice({ stateDir: values.state });
      } catch (e) {
        stop.cancel();
        throw new MockTeeError('START_FAILED', `the realm did not start: ${(e as Error).message}`, {
          cause: e,
        });
      }
      const settings: [string, string][] = [
        ['BROKER_TSM_REPORT_ROOT', realm.tsmRoot],
        ['CCA_CONFIG_FILE', realm.verifierConfigPath],
      ];
      io.out(settings.map(([k, v]) => `${k}=${io.word(v)}\n`).join(''));
      await stop.stopped;
      stop.cancel();
      realm.close();
      return 0;
    },
    io,
  );
}
