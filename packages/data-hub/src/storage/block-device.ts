/**
 * `SecureMount` with `volume_type = "block-device"` (guest-components
 * `confidential-data-hub/hub/src/storage/volume_type/blockdevice/` and its
 * LUKS2 driver): a block device encrypted with LUKS2 whose key comes from
 * the KBS after attestation, opened inside the TEE and exposed at
 * `mount_point` as an ext4 filesystem or as a device symlink.
 *
 * Options keep upstream's names: `devicePath` or `deviceId` (`MAJ:MIN`,
 * looked up in sysfs), `sourceType` (`empty`: format, `encrypted`: open, and
 * this hub's `auto`: format a device that is all zeros, open one that is
 * LUKS, refuse anything else), `encryptionType` (`luks2`), `key` (`kbs:///…`
 * or `kbs+<plugin>:///…` through the hub's KBS path, `sealed.…` through the hub's unsealing,
 * `file://…`, or absent for a random ephemeral key), `targetType` (`device`
 * or `fileSystem`), `filesystemType` (`ext4`), `mkfsOpts`, `mapperName`,
 * `dataIntegrity` (`false`; `true` is refused).
 *
 * The key reaches `cryptsetup` on its standard input only (`--key-file=-`),
 * never a file or an argument, and the buffer is zeroed afterwards. Every
 * failure names its step; what the call set up before it (mapping, mount,
 * symlink) is undone in reverse order before the error is thrown.
 */
import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { open, readFile, symlink, unlink } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import type { Logger } from 'pino';
import { DataHubError, type SecureMountStep, shown } from '../errors.js';

export const BLOCK_DEVICE_VOLUME_TYPE = 'block-device';
/** Bytes of the random key used when the request names none (upstream's). */
export const RANDOM_KEY_BYTES = 4096;
/** What `sourceType = "auto"` reads to tell a fresh device from a used one. */
export const PROBE_BYTES = 1024 * 1024;
/** upstream's cipher and sector size for luksFormat. */
export const LUKS2_CIPHER = 'aes-xts-plain64';
export const LUKS2_SECTOR_SIZE = 4096;
const LUKS_MAGIC = Buffer.from([0x4c, 0x55, 0x4b, 0x53, 0xba, 0xbe]); // "LUKS\xba\xbe"
const MAX_KEY_BYTES = 64 * 1024;
const MAX_STDERR = 4096;
const DEFAULT_TOOL_TIMEOUT_MS = 10 * 60_000;
const MAPPER_NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,126}$/;
const DEVICE_ID_RE = /^(\d{1,10}):(\d{1,10})$/;

export type { SecureMountStep } from '../errors.js';

/**
 * A `SecureMount` failure. The message (which reaches the caller) is
 * upstream's `Secure Mount failed` and the step; `reason` (tool output,
 * exit codes) is for the hub's log. Neither ever holds key bytes.
 */
export class SecureMountFailed extends DataHubError {
  override readonly name: string = 'SecureMountFailed';
  override readonly code: SecureMountStep;
  readonly reason: string;
  constructor(code: SecureMountStep, summary: string, reason = summary, options?: { cause?: unknown }) {
    super(`Secure Mount failed: ${summary}`, options);
    this.code = code;
    this.reason = reason;
  }
}

export interface SecureMountRequestLike {
  readonly volume_type: string;
  readonly options: Readonly<Record<string, string>>;
  readonly flags: readonly string[];
  readonly mount_point: string;
}

export interface BlockDeviceDeps {
  /** The hub's KBS path for `kbs:///…` keys. */
  getResource(uri: string): Promise<Uint8Array>;
  /** The hub's unsealing for `sealed.…` keys. */
  unsealSecret(secret: Uint8Array): Promise<Uint8Array>;
  readonly logger?: Logger;
  /** Environment of the tools (its PATH finds `cryptsetup`, `mkfs.ext4`, `mount`, `umount`). Default process.env. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Where `deviceId` is looked up (default `/sys/dev/block`). */
  readonly sysBlockDir?: string;
  /** Deadline of each tool run (default 10 min: mkfs of a large disk). */
  readonly toolTimeoutMs?: number;
}

export interface BlockDeviceParameters {
  readonly device: { readonly path: string } | { readonly id: readonly [number, number] };
  readonly sourceType: 'empty' | 'encrypted' | 'auto';
  readonly key: string | undefined;
  readonly targetType: 'device' | 'fileSystem';
  readonly filesystemType: 'ext4';
  readonly mkfsOpts: readonly string[];
  readonly mapperName: string | undefined;
}

const KNOWN_OPTIONS = new Set([
  'deviceId',
  'devicePath',
  'sourceType',
  'encryptionType',
  'key',
  'targetType',
  'filesystemType',
  'mkfsOpts',
  'mapperName',
  'dataIntegrity',
]);

function optionError(what: string): SecureMountFailed {
  return new SecureMountFailed('options', `invalid block-device options: ${what}`);
}

/** The request's `options` map, checked as upstream's serde would read it (and a little stricter). */
export function parseBlockDeviceOptions(options: Readonly<Record<string, string>>): BlockDeviceParameters {
  const get = (k: string): string | undefined => (Object.hasOwn(options, k) ? options[k] : undefined);
  for (const k of Object.keys(options)) {
    if (!KNOWN_OPTIONS.has(k)) {
      // upstream's zfs options belong to encryptionType = "zfs", which is refused below.
      if (k !== 'pool' && k !== 'dataset')
        throw optionError(`unknown option ${JSON.stringify(shown(k, 64))}`);
    }
  }
  const encryptionType = get('encryptionType');
  if (encryptionType === undefined) throw optionError('encryptionType is required (luks2)');
  if (encryptionType !== 'luks2') {
    throw optionError(`encryptionType ${JSON.stringify(shown(encryptionType, 64))} is not supported (luks2)`);
  }
  let device: BlockDeviceParameters['device'];
  const deviceId = get('deviceId');
  const devicePath = get('devicePath');
  if (deviceId !== undefined) {
    const m = DEVICE_ID_RE.exec(deviceId);
    const major = Number(m?.[1]);
    const minor = Number(m?.[2]);
    if (m === null || major > 0xffff_ffff || minor > 0xffff_ffff) {
      throw optionError('deviceId must be in the format of MAJ:MIN');
    }
    device = { id: [major, minor] };
  } else if (devicePath !== undefined) {
    if (!isAbsolute(devicePath) || devicePath.includes('\0'))
      throw optionError('devicePath must be an absolute path');
    device = { path: devicePath };
  } else {
    throw optionError('either deviceId or devicePath must be specified');
  }
  const sourceType = get('sourceType');
  if (sourceType !== 'empty' && sourceType !== 'encrypted' && sourceType !== 'auto') {
    throw optionError('sourceType must be empty, encrypted or auto');
  }
  const targetType = get('targetType');
  if (targetType !== 'device' && targetType !== 'fileSystem') {
    throw optionError('targetType must be device or fileSystem');
  }
  const filesystemType = get('filesystemType') ?? 'ext4';
  if (filesystemType !== 'ext4') throw optionError('filesystemType must be ext4');
  const integrity = get('dataIntegrity') ?? 'false';
  if (integrity === 'true') throw optionError('dataIntegrity = true is not supported by this data hub');
  if (integrity !== 'false') throw optionError('dataIntegrity must be true or false');
  const mapperName = get('mapperName');
  if (mapperName !== undefined && !MAPPER_NAME_RE.test(mapperName)) {
    throw optionError('mapperName must be 1-127 characters of [A-Za-z0-9_.+-], not starting with . + or -');
  }
  const mkfsText = get('mkfsOpts') ?? '';
  if (mkfsText.length > 4096) throw optionError('mkfsOpts is longer than 4096 characters');
  const mkfsOpts = mkfsText.split(/[\t\n\v\f\r ]+/).filter((s) => s !== '');
  return {
    device,
    sourceType,
    key: get('key'),
    targetType,
    filesystemType,
    mkfsOpts,
    mapperName,
  };
}

/** cryptsetup's argument vectors: the key always on standard input. */
export const cryptsetupArgs = {
  format: (device: string) => [
    '--batch-mode',
    'luksFormat',
    '--type',
    'luks2',
    '--cipher',
    LUKS2_CIPHER,
    '--sector-size',
    String(LUKS2_SECTOR_SIZE),
    '--key-file=-',
    device,
  ],
  open: (device: string, name: string) => ['open', '--type', 'luks2', '--key-file=-', device, name],
  close: (name: string) => ['close', name],
};

interface ToolResult {
  readonly code: number | null;
  readonly signal: string | null;
  readonly stderr: string;
}

/** The calls running per device path, in this process. */
const deviceLocks = new Map<string, Promise<void>>();

export class BlockDevice {
  readonly #deps: BlockDeviceDeps;
  readonly #log: Logger | undefined;

  constructor(deps: BlockDeviceDeps) {
    this.#deps = deps;
    this.#log = deps.logger;
  }

  /** Mounts; throws SecureMountFailed with everything it set up undone. */
  async mount(request: SecureMountRequestLike): Promise<void> {
    const p = parseBlockDeviceOptions(request.options);
    const mountPoint = request.mount_point;
    if (!isAbsolute(mountPoint) || mountPoint.includes('\0')) {
      throw optionError('mount_point must be an absolute path');
    }
    const device = await this.#devicePath(p.device);
    // One call at a time per device: two `auto` calls must not both see a blank device and format it.
    const previous = deviceLocks.get(device) ?? Promise.resolve();
    let release = () => {};
    const mine = new Promise<void>((r) => {
      release = r;
    });
    const chain = previous.then(() => mine);
    deviceLocks.set(device, chain);
    await previous;
    try {
      await this.#mountDevice(p, device, mountPoint);
    } finally {
      release();
      if (deviceLocks.get(device) === chain) deviceLocks.delete(device);
    }
  }

  async #mountDevice(p: BlockDeviceParameters, device: string, mountPoint: string): Promise<void> {
    const key = await this.#key(p.key);
    const undo: { what: string; run: () => Promise<void> }[] = [];
    try {
      let fresh: boolean;
      if (p.sourceType === 'auto') fresh = await this.#probe(device);
      else fresh = p.sourceType === 'empty';
      if (fresh) {
        this.#log?.warn({ device }, 'formatting the device with LUKS2: its data is overwritten');
        await this.#tool('format', 'cryptsetup', cryptsetupArgs.format(device), key);
      }
      const name = p.mapperName ?? randomUUID();
      await this.#tool('open', 'cryptsetup', cryptsetupArgs.open(device, name), key);
      undo.push({
        what: `cryptsetup close ${name}`,
        run: () => this.#cleanup('cryptsetup', cryptsetupArgs.close(name)),
      });
      const mapped = `/dev/mapper/${name}`;
      if (p.targetType === 'device') {
        try {
          await symlink(mapped, mountPoint);
        } catch (e) {
          throw new SecureMountFailed(
            'symlink',
            `symlink ${mapped} to the mount point failed`,
            (e as Error).message,
            {
              cause: e,
            },
          );
        }
        undo.push({ what: `remove ${mountPoint}`, run: () => unlink(mountPoint) });
      } else {
        if (fresh) await this.#tool('mkfs', `mkfs.${p.filesystemType}`, ['-F', ...p.mkfsOpts, mapped]);
        await this.#tool('mount', 'mount', ['-t', p.filesystemType, '-o', 'noatime', mapped, mountPoint]);
        undo.push({ what: `umount ${mountPoint}`, run: () => this.#cleanup('umount', [mountPoint]) });
      }
      this.#log?.info({ device, mountPoint, mapper: name, formatted: fresh }, 'block device mounted');
    } catch (e) {
      for (const u of undo.reverse()) {
        try {
          await u.run();
        } catch (cleanupError) {
          this.#log?.error(
            { err: (cleanupError as Error).message },
            `clean-up after a failed secure mount: ${u.what} failed`,
          );
        }
      }
      if (e instanceof SecureMountFailed) throw e;
      throw new SecureMountFailed('mount', 'unexpected failure', (e as Error).message, { cause: e });
    } finally {
      key.fill(0);
    }
  }

  async #devicePath(d: BlockDeviceParameters['device']): Promise<string> {
    if ('path' in d) return d.path;
    const [major, minor] = d.id;
    const uevent = join(this.#deps.sysBlockDir ?? '/sys/dev/block', `${major}:${minor}`, 'uevent');
    let text: string;
    try {
      text = await readFile(uevent, 'utf8');
    } catch (e) {
      throw new SecureMountFailed('device', `no block device ${major}:${minor}`, (e as Error).message, {
        cause: e,
      });
    }
    for (const line of text.split('\n')) {
      if (line.startsWith('DEVNAME=')) {
        const name = line.slice('DEVNAME='.length);
        if (name === '' || name.split('/').some((s) => s === '' || s === '.' || s === '..')) break;
        return `/dev/${name}`;
      }
    }
    throw new SecureMountFailed('device', `Failed to get device path with major: ${major}, minor: ${minor}`);
  }

  async #key(uri: string | undefined): Promise<Buffer> {
    if (uri === undefined) {
      this.#log?.debug('no key given: a random key, the volume is ephemeral');
      return randomBytes(RANDOM_KEY_BYTES);
    }
    let bytes: Uint8Array;
    try {
      if (uri.startsWith('sealed.')) bytes = await this.#deps.unsealSecret(Buffer.from(uri, 'utf8'));
      // kbs:///… and kbs+<plugin>://… go to the hub's KBS path, which decides what it serves; the bytes are
      // the passphrase unparsed (a provisioner's whole confdata document), as upstream's hub uses them.
      else if (uri.startsWith('kbs://') || uri.startsWith('kbs+')) bytes = await this.#deps.getResource(uri);
      else if (uri.startsWith('file://')) bytes = await readFile(uri.slice('file://'.length));
      else {
        throw new SecureMountFailed('key', 'The scheme of the key uri should be `kbs`, `file` or `sealed`');
      }
    } catch (e) {
      if (e instanceof SecureMountFailed) throw e;
      const reason = e instanceof DataHubError && 'reason' in e ? String(e.reason) : (e as Error).message;
      throw new SecureMountFailed('key', `Failed to get key: ${(e as Error).message}`, reason, { cause: e });
    }
    if (bytes.length === 0 || bytes.length > MAX_KEY_BYTES) {
      throw new SecureMountFailed('key', `the key must be 1 to ${MAX_KEY_BYTES} bytes, got ${bytes.length}`);
    }
    // Our own copy, zeroed after use.
    const key = Buffer.from(bytes);
    if (bytes instanceof Buffer) bytes.fill(0);
    return key;
  }

  /** `auto`: true for a device to format (all zeros), false for a LUKS device; anything else is refused. */
  async #probe(device: string): Promise<boolean> {
    let head: Buffer;
    try {
      const fh = await open(device, 'r');
      try {
        head = Buffer.alloc(PROBE_BYTES);
        const { bytesRead } = await fh.read(head, 0, PROBE_BYTES, 0);
        head = head.subarray(0, bytesRead);
      } finally {
        await fh.close();
      }
    } catch (e) {
      throw new SecureMountFailed('probe', 'reading the device failed', (e as Error).message, { cause: e });
    }
    if (head.subarray(0, LUKS_MAGIC.length).equals(LUKS_MAGIC)) return false;
    if (head.length > 0 && head.every((b) => b === 0)) return true;
    throw new SecureMountFailed(
      'probe',
      'sourceType auto: the device is neither LUKS nor empty (its first MiB is not all zeros); not formatting it',
    );
  }

  async #tool(
    step: SecureMountStep,
    command: string,
    args: readonly string[],
    stdin?: Buffer,
  ): Promise<void> {
    let r: ToolResult;
    try {
      r = await this.#run(command, args, stdin);
    } catch (e) {
      throw new SecureMountFailed(
        step,
        `${command} ${args.includes('luksFormat') ? 'luksFormat' : args[0]} failed`,
        (e as Error).message,
        {
          cause: e,
        },
      );
    }
    if (r.code !== 0) {
      const sub = command === 'cryptsetup' ? ` ${args.includes('luksFormat') ? 'luksFormat' : args[0]}` : '';
      const status = r.signal !== null ? `killed by ${r.signal}` : `exit status ${r.code}`;
      throw new SecureMountFailed(
        step,
        `${command}${sub} failed (${status})`,
        `${command}${sub}: ${status}: ${r.stderr.trim()}`,
      );
    }
  }

  async #cleanup(command: string, args: readonly string[]): Promise<void> {
    const r = await this.#run(command, args);
    if (r.code !== 0)
      throw new DataHubError(`${command} ${args.join(' ')}: exit status ${r.code}: ${r.stderr.trim()}`, {
        code: 'CLEANUP_FAILED',
      });
  }

  #run(command: string, args: readonly string[], stdin?: Buffer): Promise<ToolResult> {
    return new Promise((resolve, reject) => {
      const child = spawn(command, args, {
        env: { ...(this.#deps.env ?? process.env) } as NodeJS.ProcessEnv,
        stdio: [stdin !== undefined ? 'pipe' : 'ignore', 'ignore', 'pipe'],
        timeout: this.#deps.toolTimeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS,
        killSignal: 'SIGKILL',
      });
      let stderr = '';
      child.stderr?.on('data', (c: Buffer) => {
        if (stderr.length < MAX_STDERR) stderr += c.toString('utf8').slice(0, MAX_STDERR - stderr.length);
      });
      child.on('error', (e: NodeJS.ErrnoException) =>
        reject(e.code === 'ENOENT' ? new Error(`${command}: not found in PATH`) : e),
      );
      child.on('close', (code, signal) => resolve({ code, signal, stderr }));
      if (stdin !== undefined && child.stdin !== null) {
        // A tool that exits without reading its input must not crash the hub with EPIPE.
        child.stdin.on('error', () => {});
        child.stdin.end(stdin);
      }
    });
  }
}
