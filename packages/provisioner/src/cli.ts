// `process-user-data`: the pod VM's first service (CAA's command name and subcommand).
import { existsSync, statSync } from 'node:fs';
import { createLogger, type OptionValues, runCommand, UsageError } from '@broker/cli';
import { ProvisionError } from './errors.js';
import { DEFAULT_INITDATA_TOML } from './initdata.js';
import { provisionFiles } from './provision.js';
import { defaultSource, type UserDataSource } from './sources.js';

const VERSION = '0.1.0';

export const PROCESS_USER_DATA_USAGE = `Usage: process-user-data <COMMAND> [OPTIONS]

The pod VM's first service (CAA's command name and subcommands).

Commands:
  provision-files   Provision the guest components' files from the pod's user data
  default-initdata  Print the initdata provisioned for pods without one

Options:
  -h, --help     Print help (each command has its own: process-user-data provision-files --help)
  -V, --version  Print version
`;

const PROVISION_HELP = `Usage: process-user-data provision-files [OPTIONS]

Reads the pod's user data (a cidata ISO image or block device, a folder or file holding user-data,
or an IMDS-style endpoint), takes its initdata (or the default one), extends PCR8 with the initdata
digest and writes aa.toml, cdh.toml, policy.rego, initdata.digest under /run/peerpod and
initdata.toml under /run/confidential-containers/initdata. Without --user-data and --imds-url it
looks for /media/cidata/user-data, then /dev/disk/by-label/cidata. Log lines are JSON on stdout
(text on a terminal), level from RUST_LOG.

Options:
      --user-data <FILE|DIR>               The user data (ISO image, block device, folder or file)
      --imds-url <URL>                     An IMDS-style endpoint serving the user data
      --root <DIR>                         Where the files go [default: /]
      --tpm <ADDRESS>                      /dev/tpmrm0, swtpm:HOST:PORT or none [default: $BROKER_TPM, else /dev/tpmrm0]
      --user-data-fetch-timeout <SECONDS>  How long to wait for the user data [default: 180]
  -h, --help                               Print help
`;

const EXIT_STATUS = [[1, 'provisioning failed; nothing was written']] as const;

const TOP = {
  name: 'process-user-data',
  version: VERSION,
  help: PROCESS_USER_DATA_USAGE,
  subcommands: ['provision-files', 'default-initdata'],
  exitStatus: EXIT_STATUS,
} as const;

const PROVISION = {
  name: 'process-user-data provision-files',
  version: VERSION,
  help: PROVISION_HELP,
  options: {
    'user-data': { type: 'string' },
    'imds-url': { type: 'string' },
    root: { type: 'string' },
    tpm: { type: 'string' },
    'user-data-fetch-timeout': { type: 'string' },
  },
  exitStatus: EXIT_STATUS,
} as const;

const DEFAULT_INITDATA = {
  name: 'process-user-data default-initdata',
  version: VERSION,
  help: 'Usage: process-user-data default-initdata\n\nPrints the initdata provisioned for pods without one (its PCR8 is a constant reference value).\n',
} as const;

export interface ProcessUserDataIo {
  readonly out: (s: string) => void;
  readonly err: (s: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
}

const nodeIo: ProcessUserDataIo = {
  out: (s) => process.stdout.write(s),
  err: (s) => process.stderr.write(s),
  env: process.env,
};

function usage(why: string): never {
  throw new UsageError(why);
}

function tpmAddress(flag: string | undefined, env: ProcessUserDataIo['env']): string | null {
  if (flag === 'none') return null;
  if (flag !== undefined) return flag;
  const fromEnv = env.BROKER_TPM;
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  if (existsSync('/dev/tpmrm0')) return '/dev/tpmrm0';
  return usage(
    'no TPM found (no $BROKER_TPM, no /dev/tpmrm0); give --tpm ADDRESS, or --tpm none to leave PCR8 unbound',
  );
}

async function provisionCommand(
  values: OptionValues<typeof PROVISION.options>,
  io: ProcessUserDataIo,
): Promise<number> {
  if (values['user-data'] !== undefined && values['imds-url'] !== undefined) {
    usage('give --user-data or --imds-url, not both');
  }
  let timeoutMs = 180_000;
  const timeoutText = values['user-data-fetch-timeout'];
  if (timeoutText !== undefined) {
    if (!/^\d{1,6}$/.test(timeoutText)) usage('--user-data-fetch-timeout takes whole seconds');
    timeoutMs = Number(timeoutText) * 1000;
  }
  let source: UserDataSource | undefined;
  const ud = values['user-data'];
  const imds = values['imds-url'];
  if (ud !== undefined) {
    let isDir = false;
    try {
      isDir = statSync(ud).isDirectory();
    } catch (e) {
      throw new ProvisionError(
        'USER_DATA_MISSING',
        `--user-data ${ud}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
      );
    }
    source = { kind: isDir ? 'dir' : 'file', path: ud };
  } else if (imds !== undefined) {
    let url: URL;
    try {
      url = new URL(imds);
    } catch {
      return usage(`--imds-url ${imds} is not a URL`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') usage('--imds-url must be http: or https:');
    source = { kind: 'imds', baseUrl: imds };
  } else {
    source = await defaultSource();
  }
  const tpm = tpmAddress(values.tpm, io.env);
  const logger = createLogger({
    name: 'process-user-data',
    env: io.env,
    ...(io !== nodeIo && { destination: { write: io.err } }),
  });
  const result = await provisionFiles({
    ...(source !== undefined && { source }),
    root: values.root ?? '/',
    tpm,
    fetch: { timeoutMs },
    log: (line) => logger.info(line),
  });
  logger.info(
    { algorithm: result.initData.algorithm, digest: result.initData.digest.toString('hex') },
    `provisioned ${result.initData.isDefault ? 'the default initdata' : 'the pod initdata'}`,
  );
  logger.flush();
  return 0;
}

/** The CLI: 0 on success, 2 on a usage error, 1 when provisioning fails (nothing is written then). */
export function processUserDataMain(
  argv: readonly string[],
  io: ProcessUserDataIo = nodeIo,
): Promise<number> {
  return runCommand(
    TOP,
    argv,
    ({ command, rest }) =>
      command === 'provision-files'
        ? runCommand(PROVISION, rest, ({ values }) => provisionCommand(values, io), io)
        : runCommand(
            DEFAULT_INITDATA,
            rest,
            () => {
              io.out(DEFAULT_INITDATA_TOML);
              return 0;
            },
            io,
          ),
    io,
  );
}
