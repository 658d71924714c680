/**
 * `encrypted-disk`: opens the pod VM's encrypted data disk through the data
 * hub's `SecureMount`, keyed by the resource the initdata names (see
 * `./encrypted-disk.ts`). Run once the hub serves and before the workload
 * can start; in the image's shared process it sits between the hub and the
 * agent policy gate, and a failure stops the chain (the gate never listens).
 */
import {
  createLogger,
  LOG_FORMAT_OPTION,
  logFlags,
  type OptionValues,
  runCommand,
  UsageError,
} from '@broker/cli';
import type { SecureMountRequestLike } from './block-device.js';
import {
  DEFAULT_DEVICE,
  DEFAULT_INITDATA_PATH,
  DEFAULT_MAPPER_NAME,
  DEFAULT_MOUNT_POINT,
  type EncryptedDiskDeps,
  INITDATA_KEY_ENTRY,
  openEncryptedDisk,
} from './encrypted-disk.js';

export const ENCRYPTED_DISK_VERSION = '0.1.0';
const DEFAULT_CDH_SOCKET = 'unix:///run/confidential-containers/cdh.sock';
const MAPPER_NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,126}$/;

const HELP = `Usage: encrypted-disk [OPTIONS]

Opens the pod VM's encrypted data disk before the workload starts. The key is the KBS resource the
initdata names as "${INITDATA_KEY_ENTRY}" (kbs+provisioner:///default/<uuid>/root with trustee's
provisioner plugin, or kbs:///<repository>/<type>/<tag>), which the confidential data hub fetches
after attestation: its SecureMount (block-device, LUKS2, sourceType auto) formats a blank disk on
first use (LUKS2, ext4) and opens and mounts it on later boots. The boot is then recorded in the
disk's .boots file. An initdata without that entry means no disk: exit 0. A mount point that is
already mounted (the chain restarted) is left as it is. Log lines go to stderr, JSON (text on a
terminal); the level comes from --log-level, else RUST_LOG, else info.

Options:
      --initdata <FILE>        The initdata process-user-data wrote [default: ${DEFAULT_INITDATA_PATH}]
      --device <PATH>          The disk [default: ${DEFAULT_DEVICE}]
      --mount-point <DIR>      Where its filesystem is mounted [default: ${DEFAULT_MOUNT_POINT}]
      --mapper-name <NAME>     The /dev/mapper name [default: ${DEFAULT_MAPPER_NAME}]
      --device-wait-ms <MS>    How long to wait for the disk to appear [default: 30000]
      --cdh-socket <ADDR>      The data hub's ttrpc socket [default: ${DEFAULT_CDH_SOCKET}]
      --timeout-ms <MS>        Deadline of the SecureMount call (key, format, mkfs) [default: 600000]
      --log-level <LEVEL>      off, error, warn, info, debug or trace
      --log-format <FORMAT>    json (default) or text (default when stderr is a terminal)
  -h, --help                   Print help
  -V, --version                Print version
`;

const SPEC = {
  name: 'encrypted-disk',
  version: ENCRYPTED_DISK_VERSION,
  help: HELP,
  options: {
    initdata: { type: 'string' },
    device: { type: 'string' },
    'mount-point': { type: 'string' },
    'mapper-name': { type: 'string' },
    'device-wait-ms': { type: 'string' },
    'cdh-socket': { type: 'string' },
    'timeout-ms': { type: 'string' },
    'log-level': { type: 'string' },
    ...LOG_FORMAT_OPTION,
  },
  exitStatus: [
    [0, 'the disk is open and mounted, or the initdata names no key'],
    [
      1,
      'the disk was not opened (initdata, device, key, format, open, mkfs, mount or record: the message says which)',
    ],
  ],
} as const;

export interface EncryptedDiskCliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Test hooks: the SecureMount call, /proc paths. */
  readonly deps?: Partial<Omit<EncryptedDiskDeps, 'logger'>>;
}

function milliseconds(option: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^[0-9]{1,9}$/.test(value)) {
    throw new UsageError(
      `invalid value '${value.slice(0, 100)}' for '--${option}' (a number of milliseconds)`,
    );
  }
  return Number(value);
}

function absolute(option: string, value: string | undefined, fallback: string): string {
  if (value === undefined) return fallback;
  if (!value.startsWith('/') || value.includes('\0')) {
    throw new UsageError(`invalid value '${value.slice(0, 100)}' for '--${option}' (an absolute path)`);
  }
  return value;
}

/** Runs `encrypted-disk` with `argv` (without the program name); resolves with the exit status. */
export function encryptedDiskMain(
  argv: readonly string[],
  overrides: Partial<EncryptedDiskCliIo> = {},
): Promise<number> {
  const io: EncryptedDiskCliIo = {
    stdout: (t) => process.stdout.write(t),
    stderr: (t) => process.stderr.write(t),
    env: process.env,
    ...overrides,
  };
  return runCommand(SPEC, argv, ({ values }) => run(io, values, overrides), {
    out: io.stdout,
    err: io.stderr,
    env: io.env,
  });
}

async function run(
  io: EncryptedDiskCliIo,
  values: OptionValues<typeof SPEC.options>,
  overrides: Partial<EncryptedDiskCliIo>,
): Promise<number> {
  const options = {
    initdataPath: absolute('initdata', values.initdata, DEFAULT_INITDATA_PATH),
    device: absolute('device', values.device, DEFAULT_DEVICE),
    mountPoint: absolute('mount-point', values['mount-point'], DEFAULT_MOUNT_POINT),
    mapperName: values['mapper-name'] ?? DEFAULT_MAPPER_NAME,
    deviceWaitMs: milliseconds('device-wait-ms', values['device-wait-ms'], 30_000),
  };
  if (!MAPPER_NAME_RE.test(options.mapperName)) {
    throw new UsageError(
      `invalid value '${options.mapperName.slice(0, 100)}' for '--mapper-name' (1-127 characters of [A-Za-z0-9_.+-], not starting with . + or -)`,
    );
  }
  const timeoutMs = milliseconds('timeout-ms', values['timeout-ms'], 600_000);
  if (timeoutMs === 0) throw new UsageError("invalid value '0' for '--timeout-ms' (a positive number)");
  const { level, format } = logFlags(values, ['encrypted_disk']);
  const logger = createLogger({
    name: 'encrypted-disk',
    env: level !== undefined ? { RUST_LOG: level } : io.env,
    fd: 2,
    ...(format !== undefined && { format }),
    ...(overrides.stderr !== undefined && { destination: { write: overrides.stderr } }),
  });
  const socket = values['cdh-socket'] ?? DEFAULT_CDH_SOCKET;
  let close = () => {};
  const secureMount =
    io.deps?.secureMount ??
    (async (request: SecureMountRequestLike) => {
      const { DataHubClient } = await import('@broker/guest-api');
      const client = await DataHubClient.connect(socket, { connectTimeoutMs: 5_000, timeoutMs });
      close = () => client.close();
      await client.secureMount({ ...request, options: { ...request.options }, flags: [...request.flags] });
    });
  // A failure is reported once, by runCommand, in the dialect every command shares: logging it here
  // too printed it twice.
  try {
    await openEncryptedDisk(options, { ...io.deps, secureMount, logger });
    return 0;
  } finally {
    close();
    logger.flush();
  }
}
