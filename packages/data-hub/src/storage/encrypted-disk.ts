/**
 * The pod VM's encrypted data disk, opened before the workload starts: the
 * guest side of trustee's provisioner plugin. The operator provisions the
 * VM (`POST /kbs/v0/provisioner/provision`) and puts the answer into the
 * VM's initdata as `"trustee.kbs.resource" = "kbs+provisioner:///default/<uuid>/root"`;
 * this step reads that entry and asks the data hub for a `SecureMount` of
 * the disk (`block-device`, LUKS2, `sourceType = "auto"`): the hub fetches
 * the key after attestation, formats a blank disk on first use (ext4) and
 * opens and mounts it on later boots. Without the entry there is nothing to
 * do. After mounting it records the boot on the disk (`.boots`, one line per
 * boot that opened it), so a boot can tell that it reads what an earlier
 * boot wrote.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, open, readFile, rename, stat, unlink } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import { InitDataError, parseInitData } from '@broker/protocol';
import type { Logger } from 'pino';
import { DataHubError, type EncryptedDiskStep } from '../errors.js';
import type { SecureMountRequestLike } from './block-device.js';

/** The initdata `[data]` entry naming the disk's key (trustee's provisioner flow). */
export const INITDATA_KEY_ENTRY = 'trustee.kbs.resource';
export const DEFAULT_INITDATA_PATH = '/run/confidential-containers/initdata/initdata.toml';
/** A virtio disk with the serial `podvm-data` (`-device virtio-blk-pci,serial=podvm-data`). */
export const DEFAULT_DEVICE = '/dev/disk/by-id/virtio-podvm-data';
export const DEFAULT_MOUNT_POINT = '/run/confidential-containers/encrypted-disk';
export const DEFAULT_MAPPER_NAME = 'encrypted-disk';
/** The record of the boots that opened the disk, at the top of its filesystem. */
export const BOOT_RECORD = '.boots';
/** Lines kept in the boot record (the oldest go first). */
export const BOOT_RECORD_LINES = 100;
const MAX_BOOT_RECORD_BYTES = 64 * 1024;
const MAX_RESOURCE_URI = 1024;
const LUKS_MAGIC = Buffer.from([0x4c, 0x55, 0x4b, 0x53, 0xba, 0xbe]);
const BOOT_ID_RE = /^[0-9a-f-]{36}$/;

export type { EncryptedDiskStep } from '../errors.js';

/** A failure of the encrypted-disk step; `code` names the step. Never holds key bytes. */
export class EncryptedDiskFailed extends DataHubError {
  override readonly name: string = 'EncryptedDiskFailed';
  override readonly code: EncryptedDiskStep;
  constructor(code: EncryptedDiskStep, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

export interface EncryptedDiskOptions {
  readonly initdataPath: string;
  readonly device: string;
  readonly mountPoint: string;
  readonly mapperName: string;
  /** How long to wait for the device to appear (udev names it after the boot). */
  readonly deviceWaitMs: number;
}

export interface EncryptedDiskDeps {
  /** The hub's `SecureMount` (over ttrpc in the guest). */
  secureMount(request: SecureMountRequestLike): Promise<void>;
  readonly logger: Logger;
  /** Default `/proc/self/mountinfo`. */
  readonly mountInfoPath?: string;
  /** Default `/proc/sys/kernel/random/boot_id`. */
  readonly bootIdPath?: string;
  readonly now?: () => Date;
  readonly sleep?: (ms: number) => Promise<void>;
}

export type EncryptedDiskResult =
  | { readonly outcome: 'none' }
  | { readonly outcome: 'already-open' }
  | {
      readonly outcome: 'opened';
      readonly formatted: boolean;
      readonly ms: number;
      readonly bootId: string;
      readonly previous: readonly string[];
    };

/**
 * The key resource the initdata names, or undefined when it names none. The
 * file is the one process-user-data wrote after binding it to PCR 8.
 */
export async function keyResourceOf(initdataPath: string): Promise<string | undefined> {
  let bytes: Buffer;
  try {
    bytes = await readFile(initdataPath);
  } catch (e) {
    throw new EncryptedDiskFailed(
      'initdata',
      `cannot read the initdata ${initdataPath}: ${(e as Error).message}`,
      {
        cause: e,
      },
    );
  }
  let data: Record<string, string>;
  try {
    ({ data } = parseInitData(bytes));
  } catch (e) {
    const why = e instanceof InitDataError ? e.message : String(e);
    throw new EncryptedDiskFailed('initdata', `the initdata ${initdataPath} is refused: ${why}`, {
      cause: e,
    });
  }
  if (!Object.hasOwn(data, INITDATA_KEY_ENTRY)) return undefined;
  const uri = data[INITDATA_KEY_ENTRY] as string;
  if (uri.length > MAX_RESOURCE_URI || !/^kbs(\+[A-Za-z0-9_-]+)?:\/\/[^\s]*\/[^\s]+$/.test(uri)) {
    throw new EncryptedDiskFailed(
      'initdata',
      `the initdata's ${INITDATA_KEY_ENTRY} is not a KBS resource URI (kbs:///… or kbs+<plugin>:///…)`,
    );
  }
  return uri;
}

/** The `SecureMount` request for the disk: upstream's block-device options, the key from the KBS. */
export function secureMountRequest(options: EncryptedDiskOptions, keyUri: string): SecureMountRequestLike {
  return {
    volume_type: 'block-device',
    options: {
      devicePath: options.device,
      encryptionType: 'luks2',
      sourceType: 'auto',
      targetType: 'fileSystem',
      filesystemType: 'ext4',
      key: keyUri,
      mapperName: options.mapperName,
    },
    flags: [],
    mount_point: options.mountPoint,
  };
}

/** Unescapes the octal escapes of /proc/self/mountinfo (`\040` for a space). */
function unescapeMountField(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
}

/** Whether `mountPoint` is a mount point now (field 5 of mountinfo). */
export async function isMounted(
  mountPoint: string,
  mountInfoPath = '/proc/self/mountinfo',
): Promise<boolean> {
  const text = await readFile(mountInfoPath, 'utf8');
  return text.split('\n').some((line) => unescapeMountField(line.split(' ')[4] ?? '') === mountPoint);
}

async function waitForDevice(
  device: string,
  waitMs: number,
  sleep: (ms: number) => Promise<void>,
): Promise<void> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      const s = await stat(device);
      if (!s.isBlockDevice() && !s.isFile()) {
        throw new EncryptedDiskFailed('device', `${device} is not a block device`);
      }
      return;
    } catch (e) {
      if (e instanceof EncryptedDiskFailed) throw e;
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') {
        throw new EncryptedDiskFailed('device', `cannot use ${device}: ${(e as Error).message}`, {
          cause: e,
        });
      }
    }
    if (Date.now() >= deadline) {
      throw new EncryptedDiskFailed('device', `the disk ${device} did not appear within ${waitMs} ms`);
    }
    await sleep(Math.min(200, Math.max(1, deadline - Date.now())));
  }
}

/** Whether the device starts with the LUKS magic (an earlier boot formatted it). */
async function isLuks(device: string): Promise<boolean> {
  const fh = await open(device, 'r');
  try {
    const head = Buffer.alloc(LUKS_MAGIC.length);
    const { bytesRead } = await fh.read(head, 0, head.length, 0);
    return bytesRead === head.length && head.equals(LUKS_MAGIC);
  } finally {
    await fh.close();
  }
}

/** The boot record's lines (the last BOOT_RECORD_LINES), tolerating a missing file. */
export function parseBootRecord(text: string): string[] {
  return text
    .split('\n')
    .filter((l) => l !== '')
    .slice(-BOOT_RECORD_LINES);
}

/**
 * Appends `line` to the boot record at the top of the mounted disk, atomically (a new file, synced,
 * renamed over the old one); returns the lines it held before.
 */
export async function recordBoot(mountPoint: string, line: string): Promise<string[]> {
  const file = join(mountPoint, BOOT_RECORD);
  let previous: string[] = [];
  try {
    const fh = await open(file, 'r');
    try {
      const size = (await fh.stat()).size;
      const start = Math.max(0, size - MAX_BOOT_RECORD_BYTES);
      const buf = Buffer.alloc(size - start);
      const { bytesRead } = await fh.read(buf, 0, buf.length, start);
      let text = buf.subarray(0, bytesRead).toString('utf8');
      if (start > 0) text = text.slice(text.indexOf('\n') + 1); // a partial first line
      previous = parseBootRecord(text);
    } finally {
      await fh.close();
    }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new EncryptedDiskFailed('record', `cannot read ${file}: ${(e as Error).message}`, { cause: e });
    }
  }
  const next = [...previous, line].slice(-BOOT_RECORD_LINES);
  const tmp = `${file}.${randomUUID()}.tmp`;
  try {
    const fh = await open(tmp, 'wx', 0o600);
    try {
      await fh.writeFile(`${next.join('\n')}\n`);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, file);
    const dir = await open(mountPoint, 'r');
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  } catch (e) {
    await unlink(tmp).catch(() => {});
    throw new EncryptedDiskFailed('record', `cannot write ${file}: ${(e as Error).message}`, { cause: e });
  }
  return previous;
}

/**
 * Opens the disk the initdata asks for. Resolves `none` when the initdata names no key, `already-open`
 * when the mount point is mounted (the chain restarted), else `opened`. Throws EncryptedDiskFailed
 * (or the hub's SecureMount error, as `mount`) when the disk cannot be opened: the caller must then
 * not start the workload.
 */
export async function openEncryptedDisk(
  options: EncryptedDiskOptions,
  deps: EncryptedDiskDeps,
): Promise<EncryptedDiskResult> {
  const log = deps.logger;
  for (const [what, p] of [
    ['--device', options.device],
    ['--mount-point', options.mountPoint],
    ['--initdata', options.initdataPath],
  ] as const) {
    if (!isAbsolute(p) || p.includes('\0'))
      throw new EncryptedDiskFailed('initdata', `${what} must be an absolute path`);
  }
  const uri = await keyResourceOf(options.initdataPath);
  if (uri === undefined) {
    log.info(
      { initdata: options.initdataPath },
      `the initdata names no ${INITDATA_KEY_ENTRY}: no encrypted disk to open`,
    );
    return { outcome: 'none' };
  }
  if (await isMounted(options.mountPoint, deps.mountInfoPath)) {
    log.info({ mountPoint: options.mountPoint }, 'encrypted disk already open (mounted by an earlier start)');
    return { outcome: 'already-open' };
  }
  await waitForDevice(
    options.device,
    options.deviceWaitMs,
    deps.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms))),
  );
  let formatted: boolean;
  try {
    formatted = !(await isLuks(options.device));
  } catch (e) {
    throw new EncryptedDiskFailed('device', `cannot read ${options.device}: ${(e as Error).message}`, {
      cause: e,
    });
  }
  try {
    await mkdir(options.mountPoint, { recursive: true, mode: 0o700 });
  } catch (e) {
    throw new EncryptedDiskFailed('mount', `cannot create ${options.mountPoint}: ${(e as Error).message}`, {
      cause: e,
    });
  }
  log.info(
    { device: options.device, mountPoint: options.mountPoint, key: uri, luks: !formatted },
    formatted
      ? 'encrypted disk: fetching the key, then formatting the blank disk (LUKS2, ext4)'
      : 'encrypted disk: fetching the key, then opening the LUKS2 disk',
  );
  const started = performance.now();
  try {
    await deps.secureMount(secureMountRequest(options, uri));
  } catch (e) {
    throw new EncryptedDiskFailed(
      'mount',
      `the disk ${options.device} was not opened: ${(e as Error).message}`,
      {
        cause: e,
      },
    );
  }
  const ms = Math.round(performance.now() - started);
  let bootId = (
    await readFile(deps.bootIdPath ?? '/proc/sys/kernel/random/boot_id', 'utf8').catch(() => '')
  ).trim();
  if (!BOOT_ID_RE.test(bootId)) bootId = randomUUID();
  const when = (deps.now?.() ?? new Date()).toISOString();
  const previous = await recordBoot(options.mountPoint, `${bootId} ${when}`);
  log.info(
    {
      device: options.device,
      mountPoint: options.mountPoint,
      mapper: `/dev/mapper/${options.mapperName}`,
      formatted,
      ms,
      boot: bootId,
      previousBoots: previous.length,
      lastBoot: previous.at(-1) ?? null,
    },
    formatted ? 'encrypted disk formatted and opened' : 'encrypted disk opened',
  );
  return { outcome: 'opened', formatted, ms, bootId, previous };
}
