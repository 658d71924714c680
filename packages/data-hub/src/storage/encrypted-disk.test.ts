// The encrypted-disk step: the initdata entry it reads (hostile values included), the SecureMount
// request it builds, the mount check, the boot record, each failing step (no call to the hub when there
// is nothing to do, nothing recorded when the mount fails); then the command over ttrpc against a real
// hub whose SecureMount runs fake `cryptsetup`, `mkfs.ext4`, `mount` and `umount` scripts on the PATH,
// with the key from a real KBS; and Debian's cryptsetup formatting a plain file with the hub's arguments
// and that key, which luksDump reads back as LUKS2.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseCdhConfig } from '../config.js';
import { startDataHub } from '../server.js';
import { captureLogger, FakeAa, startTestKbs, type TestKbs, tempDir } from '../testing/helpers.js';
import { cryptsetupArgs, type SecureMountRequestLike } from './block-device.js';
import {
  BOOT_RECORD,
  BOOT_RECORD_LINES,
  EncryptedDiskFailed,
  type EncryptedDiskOptions,
  isMounted,
  keyResourceOf,
  openEncryptedDisk,
  parseBootRecord,
  recordBoot,
  secureMountRequest,
} from './encrypted-disk.js';
import { encryptedDiskMain } from './encrypted-disk-cli.js';

const BOOT_ID = '0b6f6a48-2c1e-4d3a-9d8e-6b1f0a6e1c11';
const KEY_URI = 'kbs+provisioner:///default/c007d2cc-5f14-41e5-a202-8d15f6f68607/root';

let dir: string;
let cleanup: () => Promise<void>;

beforeEach(async () => {
  ({ dir, cleanup } = await tempDir('cdh-encdisk-'));
});
afterEach(async () => {
  await cleanup();
});

function initdata(data: Record<string, string>, name = 'initdata.toml'): string {
  const entries = Object.entries(data).map(([k, v]) => `${JSON.stringify(k)} = ${JSON.stringify(v)}`);
  const file = join(dir, name);
  writeFileSync(file, `version = "0.1.0"\nalgorithm = "sha256"\n\n[data]\n${entries.join('\n')}\n`);
  return file;
}

function options(over: Partial<EncryptedDiskOptions> = {}): EncryptedDiskOptions {
  return {
    initdataPath: initdata({ 'trustee.kbs.resource': KEY_URI, 'aa.toml': '' }),
    device: join(dir, 'disk.img'),
    mountPoint: join(dir, 'mnt'),
    mapperName: 'encrypted-disk',
    deviceWaitMs: 0,
    ...over,
  };
}

async function failure(p: Promise<unknown>): Promise<EncryptedDiskFailed> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(EncryptedDiskFailed);
    return e as EncryptedDiskFailed;
  }
  throw new Error('expected a failure');
}

describe('the initdata entry', () => {
  it('is the KBS resource named by trustee.kbs.resource, or none', async () => {
    expect(await keyResourceOf(initdata({ 'trustee.kbs.resource': KEY_URI }))).toBe(KEY_URI);
    expect(await keyResourceOf(initdata({ 'trustee.kbs.resource': 'kbs:///default/disk/key' }))).toBe(
      'kbs:///default/disk/key',
    );
    expect(await keyResourceOf(initdata({ 'cdh.toml': 'x' }))).toBeUndefined();
  });

  it('refuses hostile or broken initdata and values that are not KBS resource URIs', async () => {
    for (const bad of [
      'https://kbs.example/default/disk/key',
      'file:///etc/shadow',
      'sealed.fake',
      'kbs:///',
      'kbs:///default/disk/key with space',
      'kbs:///default/disk/key\n',
      'kbs+a/b:///default/disk/key',
      `kbs:///${'a'.repeat(2000)}`,
      '',
    ]) {
      const e = await failure(keyResourceOf(initdata({ 'trustee.kbs.resource': bad })));
      expect(e.code, bad).toBe('initdata');
      expect(e.message).toContain('not a KBS resource URI');
    }
    writeFileSync(join(dir, 'bad.toml'), 'version = "0.1.0"\nalgorithm = "md5"\n[data]\n');
    expect((await failure(keyResourceOf(join(dir, 'bad.toml')))).code).toBe('initdata');
    writeFileSync(join(dir, 'bad.toml'), 'version = "0.1.0"\nalgorithm = "sha256"\n[data]\n"x" = 1\n');
    expect((await failure(keyResourceOf(join(dir, 'bad.toml')))).code).toBe('initdata');
    writeFileSync(join(dir, 'bad.toml'), Buffer.from([0xff, 0xfe, 0x00]));
    expect((await failure(keyResourceOf(join(dir, 'bad.toml')))).message).toMatch(/refused/);
    writeFileSync(join(dir, 'big.toml'), Buffer.alloc(2 * 1024 * 1024, 0x20));
    expect((await failure(keyResourceOf(join(dir, 'big.toml')))).message).toMatch(/larger than/);
    expect((await failure(keyResourceOf(join(dir, 'missing.toml')))).message).toMatch(/cannot read/);
  });
});

describe('the SecureMount request', () => {
  it("is upstream's block-device volume: LUKS2, auto, a filesystem, the key from the KBS", () => {
    const o = options({ device: '/dev/vdc', mountPoint: '/run/disk', mapperName: 'data' });
    expect(secureMountRequest(o, KEY_URI)).toEqual({
      volume_type: 'block-device',
      options: {
        devicePath: '/dev/vdc',
        encryptionType: 'luks2',
        sourceType: 'auto',
        targetType: 'fileSystem',
        filesystemType: 'ext4',
        key: KEY_URI,
        mapperName: 'data',
      },
      flags: [],
      mount_point: '/run/disk',
    });
  });
});

describe('the mount check', () => {
  it('reads field 5 of mountinfo, with its octal escapes', async () => {
    const info = join(dir, 'mountinfo');
    writeFileSync(
      info,
      '22 1 8:1 / / rw - ext4 /dev/vda rw\n40 22 254:3 / /run/encrypted\\040disk rw - ext4 /dev/mapper/x rw\n',
    );
    expect(await isMounted('/run/encrypted disk', info)).toBe(true);
    expect(await isMounted('/run/encrypted', info)).toBe(false);
    expect(await isMounted('/', info)).toBe(true);
  });
});

describe('the boot record', () => {
  it('appends one line per boot, keeps the last lines, leaves no temporary file', async () => {
    mkdirSync(join(dir, 'mnt'));
    expect(await recordBoot(join(dir, 'mnt'), 'a 1')).toEqual([]);
    expect(await recordBoot(join(dir, 'mnt'), 'b 2')).toEqual(['a 1']);
    expect(readFileSync(join(dir, 'mnt', BOOT_RECORD), 'utf8')).toBe('a 1\nb 2\n');
    for (let i = 0; i < BOOT_RECORD_LINES + 5; i++) await recordBoot(join(dir, 'mnt'), `boot ${i}`);
    const lines = parseBootRecord(readFileSync(join(dir, 'mnt', BOOT_RECORD), 'utf8'));
    expect(lines).toHaveLength(BOOT_RECORD_LINES);
    expect(lines.at(-1)).toBe(`boot ${BOOT_RECORD_LINES + 4}`);
    expect(readdirSync(join(dir, 'mnt'))).toEqual([BOOT_RECORD]);
  });

  it('reads only the end of an oversized record, without its partial first line', async () => {
    mkdirSync(join(dir, 'mnt'));
    writeFileSync(join(dir, 'mnt', BOOT_RECORD), `${'x'.repeat(200_000)}\nlast 1\n`);
    expect(await recordBoot(join(dir, 'mnt'), 'now')).toEqual(['last 1']);
  });

  it('names its step when the disk cannot be written', async () => {
    const e = await failure(recordBoot(join(dir, 'no-such-dir'), 'x'));
    expect(e.code).toBe('record');
  });
});

describe('opening the disk', () => {
  const calls: SecureMountRequestLike[] = [];
  const { logger, lines } = captureLogger();
  const mountInfoPath = () => {
    const p = join(dir, 'mountinfo');
    if (!existsSync(p)) writeFileSync(p, '22 1 8:1 / / rw - ext4 /dev/vda rw\n');
    return p;
  };
  const deps = (secureMount = async (r: SecureMountRequestLike) => void calls.push(r)) => ({
    secureMount,
    logger,
    mountInfoPath: mountInfoPath(),
    bootIdPath: join(dir, 'boot_id'),
    now: () => new Date('2026-12-02T01:00:00.000Z'),
    sleep: async () => {},
  });
  beforeEach(() => {
    calls.length = 0;
    lines.length = 0;
    writeFileSync(join(dir, 'boot_id'), `${BOOT_ID}\n`);
  });

  it('does nothing when the initdata names no key', async () => {
    const r = await openEncryptedDisk(
      options({ initdataPath: initdata({ 'aa.toml': '' }, 'no-key.toml') }),
      deps(),
    );
    expect(r).toEqual({ outcome: 'none' });
    expect(calls).toEqual([]);
    expect(lines.join('')).toContain('no encrypted disk to open');
  });

  it('formats a blank disk on first use and records the boot; opens a LUKS one later and reads the record', async () => {
    writeFileSync(join(dir, 'disk.img'), Buffer.alloc(4096));
    const first = await openEncryptedDisk(options(), deps());
    expect(first).toMatchObject({ outcome: 'opened', formatted: true, bootId: BOOT_ID, previous: [] });
    expect(calls).toEqual([secureMountRequest(options(), KEY_URI)]);
    expect(readFileSync(join(dir, 'mnt', BOOT_RECORD), 'utf8')).toBe(`${BOOT_ID} 2026-12-02T01:00:00.000Z\n`);
    // What the hub formatted now starts with the LUKS magic.
    writeFileSync(
      join(dir, 'disk.img'),
      Buffer.concat([Buffer.from('LUKS\xba\xbe', 'latin1'), Buffer.alloc(4090)]),
    );
    writeFileSync(join(dir, 'boot_id'), 'not a boot id');
    const second = await openEncryptedDisk(options(), deps());
    expect(second).toMatchObject({
      outcome: 'opened',
      formatted: false,
      previous: [`${BOOT_ID} 2026-12-02T01:00:00.000Z`],
    });
    const line = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'encrypted disk opened');
    expect(line).toMatchObject({
      formatted: false,
      previousBoots: 1,
      lastBoot: `${BOOT_ID} 2026-12-02T01:00:00.000Z`,
    });
    // An unreadable boot id is replaced by a random one, never written as given.
    expect(line.boot).toMatch(/^[0-9a-f-]{36}$/);
    expect(line.boot).not.toBe(BOOT_ID);
  });

  it('leaves a mounted disk as it is (the chain restarted)', async () => {
    writeFileSync(join(dir, 'disk.img'), Buffer.alloc(4096));
    writeFileSync(join(dir, 'mountinfo'), `40 22 254:3 / ${join(dir, 'mnt')} rw - ext4 /dev/mapper/x rw\n`);
    expect(await openEncryptedDisk(options(), deps())).toEqual({ outcome: 'already-open' });
    expect(calls).toEqual([]);
  });

  it('fails at the device step when the disk does not appear, without asking the hub', async () => {
    const e = await failure(openEncryptedDisk(options({ deviceWaitMs: 5 }), deps()));
    expect(e.code).toBe('device');
    expect(e.message).toMatch(/did not appear within 5 ms/);
    mkdirSync(join(dir, 'disk.img'));
    expect((await failure(openEncryptedDisk(options(), deps()))).message).toMatch(/not a block device/);
    expect(calls).toEqual([]);
  });

  it("fails at the mount step with the hub's reason, and records nothing", async () => {
    writeFileSync(join(dir, 'disk.img'), Buffer.alloc(4096));
    const e = await failure(
      openEncryptedDisk(
        options(),
        deps(async () => {
          throw new Error('[CDH] [ERROR]: Secure Mount failed: Failed to get key: 401');
        }),
      ),
    );
    expect(e.code).toBe('mount');
    expect(e.message).toMatch(/was not opened: .*Failed to get key/);
    expect(existsSync(join(dir, 'mnt', BOOT_RECORD))).toBe(false);
  });

  it('refuses relative paths', async () => {
    for (const o of [{ device: 'disk.img' }, { mountPoint: 'mnt' }, { initdataPath: 'initdata.toml' }]) {
      expect((await failure(openEncryptedDisk(options(o), deps()))).message).toMatch(/absolute path/);
    }
  });
});

// One script for every tool (as in block-device.test.ts): logs `<tool> <args…>`, saves the key it reads
// on stdin, fails (exit 3) when its step is listed in FAKE_FAIL.
const FAKE_TOOL = `#!/bin/sh
tool=$(basename "$0")
step=$tool
for a in "$@"; do case "$a" in luksFormat|open|close) step=$a;; esac; done
echo "$tool $*" >> "$FAKE_DIR/log"
case " $* " in *" --key-file=- "*) cat > "$FAKE_DIR/stdin-$step";; esac
case ",$FAKE_FAIL," in *",$step,"*) echo "fake $step failure" >&2; exit 3;; esac
exit 0
`;

describe('the encrypted-disk command, over ttrpc to a hub running fake tools, the key from a KBS', () => {
  const KEY =
    'version = "0.1.0"\n\n[data]\n"io.cryptsetup.key.text.root" = "k3yk3yk3yk3yk3yk3yk3yk3yk3yk3yk3"\n';
  let kbs: TestKbs;
  beforeAll(async () => {
    kbs = await startTestKbs();
    await kbs.setResource('default/disk/root', KEY);
  });
  afterAll(async () => {
    await kbs.close();
  });

  async function withHub(fail: string, body: (argv: string[]) => Promise<void>): Promise<void> {
    const fakes = join(dir, 'bin');
    mkdirSync(fakes);
    for (const tool of ['cryptsetup', 'mkfs.ext4', 'mount', 'umount']) {
      writeFileSync(join(fakes, tool), FAKE_TOOL);
      chmodSync(join(fakes, tool), 0o755);
    }
    writeFileSync(join(dir, 'disk.img'), Buffer.alloc(2 * 1024 * 1024));
    writeFileSync(join(dir, 'mountinfo'), '');
    const cfg = parseCdhConfig(
      `socket = "unix://${join(dir, 'cdh.sock')}"\ncredentials = []\n[aa]\naa_socket = "unix://${join(dir, 'aa.sock')}"\n[kbc]\nname = "cc_kbc"\nurl = "${kbs.url}"\n`,
    );
    const aa = await FakeAa.start(join(dir, 'aa.sock'), kbs);
    const hub = await startDataHub(cfg, {
      logger: captureLogger().logger,
      credentialRoot: join(dir, 'kbs'),
      secureMount: { env: { PATH: `${fakes}:/usr/bin:/bin`, FAKE_DIR: dir, FAKE_FAIL: fail } },
    });
    try {
      await body([
        '--device',
        join(dir, 'disk.img'),
        '--mount-point',
        join(dir, 'mnt'),
        '--cdh-socket',
        cfg.socket,
        '--timeout-ms',
        '20000',
      ]);
    } finally {
      await hub.close({ graceMs: 0 });
      await aa.close();
    }
  }
  const toolLog = () =>
    existsSync(join(dir, 'log'))
      ? readFileSync(join(dir, 'log'), 'utf8')
          .split('\n')
          .filter((l) => l !== '')
      : [];
  const run = async (argv: string[]) => {
    let out = '';
    let err = '';
    const code = await encryptedDiskMain(argv, {
      stdout: (t) => {
        out += t;
      },
      stderr: (t) => {
        err += t;
      },
      env: { RUST_LOG: 'info' },
      deps: { mountInfoPath: join(dir, 'mountinfo'), bootIdPath: join(dir, 'boot_id') },
    });
    return { code, out, err };
  };

  it('formats the blank disk with the key the initdata names, on cryptsetup stdin only', async () => {
    await withHub('', async (argv) => {
      const init = initdata({ 'trustee.kbs.resource': 'kbs:///default/disk/root' });
      const { code, err } = await run([...argv, '--initdata', init]);
      expect(code, err).toBe(0);
      const disk = join(dir, 'disk.img');
      expect(toolLog()).toEqual([
        `cryptsetup ${cryptsetupArgs.format(disk).join(' ')}`,
        `cryptsetup ${cryptsetupArgs.open(disk, 'encrypted-disk').join(' ')}`,
        'mkfs.ext4 -F /dev/mapper/encrypted-disk',
        `mount -t ext4 -o noatime /dev/mapper/encrypted-disk ${join(dir, 'mnt')}`,
      ]);
      expect(readFileSync(join(dir, 'stdin-open'), 'utf8')).toBe(KEY);
      expect(readFileSync(join(dir, 'stdin-luksFormat'), 'utf8')).toBe(KEY);
      expect(err).toContain('"msg":"encrypted disk formatted and opened"');
      expect(err).not.toContain('k3yk3y');
      expect(existsSync(join(dir, 'mnt', BOOT_RECORD))).toBe(true);
    });
  });

  it('exits 1 naming the failing step, with the mapping closed again, and records nothing', async () => {
    await withHub('mount', async (argv) => {
      const init = initdata({ 'trustee.kbs.resource': 'kbs:///default/disk/root' });
      const { code, err } = await run([...argv, '--initdata', init]);
      expect(code).toBe(1);
      expect(err).toMatch(/encrypted-disk: the disk .* was not opened: .*Secure Mount failed: mount failed/);
      expect(err.split('\n').filter((l) => l.includes('not opened'))).toHaveLength(1);
      expect(toolLog().at(-1)).toBe('cryptsetup close encrypted-disk');
      expect(existsSync(join(dir, 'mnt', BOOT_RECORD))).toBe(false);
    });
  });

  it('exits 1 without running a tool when the KBS has no such key', async () => {
    await withHub('', async (argv) => {
      const init = initdata({ 'trustee.kbs.resource': 'kbs:///default/disk/other' });
      const { code, err } = await run([...argv, '--initdata', init]);
      expect(code).toBe(1);
      expect(err).toMatch(/Secure Mount failed: Failed to get key/);
      expect(toolLog()).toEqual([]);
    });
  });

  it('exits 1 when the hub cannot be reached, 0 without a key entry, 2 on a bad flag', async () => {
    const init = initdata({ 'trustee.kbs.resource': 'kbs:///default/disk/root' });
    writeFileSync(join(dir, 'disk.img'), Buffer.alloc(4096));
    writeFileSync(join(dir, 'mountinfo'), '');
    const base = ['--device', join(dir, 'disk.img'), '--mount-point', join(dir, 'mnt'), '--initdata'];
    const gone = await run([...base, init, '--cdh-socket', `unix://${join(dir, 'none.sock')}`]);
    expect(gone.code).toBe(1);
    expect(gone.err).toMatch(/was not opened/);
    const none = await run([
      ...base,
      initdata({ 'aa.toml': '' }, 'no-key.toml'),
      '--cdh-socket',
      `unix://${join(dir, 'none.sock')}`,
    ]);
    expect(none.code).toBe(0);
    const missing = join(dir, 'no-such-initdata.toml');
    const unread = await run([...base, missing]);
    expect(unread.code).toBe(1);
    expect(unread.err.trim().split('\n')).toEqual([
      expect.stringMatching(new RegExp(`^encrypted-disk: .*${missing}`)),
    ]);
    for (const [flag, value] of [
      ['--device', 'relative'],
      ['--mapper-name', '-bad'],
      ['--device-wait-ms', 'soon'],
      ['--timeout-ms', '0'],
    ] as const) {
      const r = await run([flag, value]);
      expect(r.code, flag).toBe(2);
      expect(r.err).toContain(`'${flag}'`);
    }
    const help = await run(['--help']);
    expect(help.code).toBe(0);
    expect(help.out).toContain('trustee.kbs.resource');
  });
});

describe("Debian's cryptsetup with the hub's arguments and a provisioner key", () => {
  it('formats a plain file that luksDump reads as LUKS2 and the key unlocks', () => {
    const probe = spawnSync('cryptsetup', ['--version']);
    if (probe.error !== undefined)
      throw new Error('cryptsetup not found: install the Debian package cryptsetup-bin');
    const key =
      'version = "0.1.0"\n\n[data]\n"io.cryptsetup.key.text.root" = "abcdefghijklmnopqrstuvwxyz012345"\n';
    const disk = join(dir, 'disk.img');
    writeFileSync(disk, Buffer.alloc(32 * 1024 * 1024));
    // A cheap PBKDF: the test checks the arguments, not the key derivation's cost.
    const cheap = ['--pbkdf', 'pbkdf2', '--pbkdf-force-iterations', '1000'];
    const format = cryptsetupArgs.format(disk);
    execFileSync('cryptsetup', [...format.slice(0, -2), ...cheap, ...format.slice(-2)], { input: key });
    const dump = execFileSync('cryptsetup', ['luksDump', disk], { encoding: 'utf8' });
    expect(dump).toMatch(/^Version:\s*2$/m);
    expect(dump).toMatch(/cipher:\s*aes-xts-plain64/);
    expect(dump).toMatch(/sector:\s*4096/);
    execFileSync('cryptsetup', ['open', '--test-passphrase', '--type', 'luks2', '--key-file=-', disk], {
      input: key,
    });
    const wrong = spawnSync(
      'cryptsetup',
      ['open', '--test-passphrase', '--type', 'luks2', '--key-file=-', disk],
      {
        input: `${key}x`,
      },
    );
    expect(wrong.status).not.toBe(0);
  });
});
