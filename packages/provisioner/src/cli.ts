// `process-user-data`: the pod VM's first service (CAA's command name and subcommand).
import { existsSync, statSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ProvisionError } from './errors.js';
import { DEFAULT_INITDATA_TOML } from './initdata.js';
import { provisionFiles } from './provision.js';
import { defaultSource, type UserDataSource } from './sources.js';

export const PROCESS_USER_DATA_USAGE = `usage:
  process-user-data provision-files [--user-data FILE|DIR | --imds-url URL] [--root DIR]
                                    [--tpm /dev/tpmrm0|swtpm:HOST:PORT|none] [--user-data-fetch-timeout SECONDS]
      Reads the pod's user data (a cidata ISO image or block device, a folder or file holding user-data,
      or an IMDS-style endpoint), takes its initdata (or the default one), extends PCR8 with the initdata
      digest and writes aa.toml, cdh.toml, policy.rego, initdata.digest under /run/peerpod and
      initdata.toml under /run/confidential-containers/initdata. Without --user-data and --imds-url it
      looks for /media/cidata/user-data, then /dev/disk/by-label/cidata. The TPM defaults to $BROKER_TPM,
      else /dev/tpmrm0.
  process-user-data default-initdata
      Prints the initdata provisioned for pods without one (its PCR8 is a constant reference value).
`;

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

const OPTIONS = {
  'user-data': { type: 'string' },
  'imds-url': { type: 'string' },
  root: { type: 'string' },
  tpm: { type: 'string' },
  'user-data-fetch-timeout': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

function usage(why: string): never {
  throw new ProvisionError('USAGE', why);
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

async function provisionCommand(argv: readonly string[], io: ProcessUserDataIo): Promise<number> {
  let values: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; strict: true }>>['values'];
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: [...argv],
      options: OPTIONS,
      strict: true,
      allowPositionals: true,
    }));
  } catch (e) {
    return usage((e as Error).message);
  }
  if (values.help) {
    io.out(PROCESS_USER_DATA_USAGE);
    return 0;
  }
  if (positionals.length > 0) usage(`unexpected argument ${JSON.stringify(positionals[0])}`);
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
  const result = await provisionFiles({
    ...(source !== undefined && { source }),
    root: values.root ?? '/',
    tpm,
    fetch: { timeoutMs },
    log: (line) => io.err(`process-user-data: ${line}\n`),
  });
  io.err(
    `process-user-data: provisioned ${result.initData.isDefault ? 'the default initdata' : 'the pod initdata'} (${result.initData.algorithm} ${result.initData.digest.toString('hex')})\n`,
  );
  return 0;
}

/** The CLI: 0 on success, 2 on a usage error, 1 when provisioning fails (nothing is written then). */
export async function processUserDataMain(
  argv: readonly string[],
  io: ProcessUserDataIo = nodeIo,
): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'provision-files':
        return await provisionCommand(rest, io);
      case 'default-initdata':
        if (rest.length > 0) usage('default-initdata takes no arguments');
        io.out(DEFAULT_INITDATA_TOML);
        return 0;
      case '-h':
      case '--help':
        io.out(PROCESS_USER_DATA_USAGE);
        return 0;
      default:
        return usage(
          command === undefined ? 'a command is required' : `unknown command ${JSON.stringify(command)}`,
        );
    }
  } catch (e) {
    if (e instanceof ProvisionError && e.code === 'USAGE') {
      io.err(`process-user-data: ${e.message}\n${PROCESS_USER_DATA_USAGE}`);
      return 2;
    }
    io.err(`process-user-data: ${(e as Error).message}\n`);
    return 1;
  }
}
