// SecureMount block-device: the option parsing (hostile options included), the tool argument vectors,
// first-use format and later-use open, and every failing step's clean-up, against fake `cryptsetup`,
// `mkfs.ext4`, `mount` and `umount` scripts on the PATH that record their arguments and standard input;
// then Debian's real cryptsetup formatting a plain file with our arguments and key; then the whole call
// over ttrpc with the key fetched from a real KBS through the hub's own KBS path.
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  lstatSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { DataHubClient } from '@broker/guest-api';
import { parseKbsConfigText, startKbs } from '@broker/kbs';
import { TtrpcError } from '@broker/ttrpc';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseCdhConfig } from '../config.js';
import { startDataHub } from '../server.js';
import { captureLogger, FakeAa, startTestKbs, type TestKbs, tempDir } from '../testing/helpers.js';
import {
  BlockDevice,
  type BlockDeviceDeps,
  cryptsetupArgs,
  PROBE_BYTES,
  parseBlockDeviceOptions,
  SecureMountFailed,
} from './block-device.js';

const KEY = Buffer.from('the volume key \x00\xff\n with binary bytes');

// One script for every tool: it logs `<tool> <args…>`, saves its stdin when it reads the key, and fails
// (exit 3, a message on stderr) when its step is listed in FAKE_FAIL.
const FAKE_TOOL = `#!/bin/sh
tool=$(basename "$0")
step=$tool
for a in "$@"; do case "$a" in luksFormat|open|close) step=$a;; esac; done
echo "$tool $*" >> "$FAKE_DIR/log"
case " $* " in *" --key-file=- "*) cat > "$FAKE_DIR/stdin-$step";; esac
case ",$FAKE_FAIL," in *",$step,"*) echo "fake $step failure" >&2; exit 3;; esac
exit 0
`;

let dir: string;
let cleanup: () => Promise<void>;
let fakes: string;
let device: string;
let fail = '';

beforeEach(async () => {
  ({ dir, cleanup } = await tempDir('cdh-blockdev-'));
  fakes = join(dir, 'bin');
  execFileSync('mkdir', ['-p', fakes]);
  for (const tool of ['cryptsetup', 'mkfs.ext4', 'mount', 'umount']) {
    writeFileSync(join(fakes, tool), FAKE_TOOL);
    chmodSync(join(fakes, tool), 0o755);
  }
  device = join(dir, 'disk.img');
  writeFileSync(device, Buffer.alloc(2 * PROBE_BYTES));
  fail = '';
});
afterEach(async () => {
  await cleanup();
});

const log = () =>
  existsSync(join(dir, 'log'))
    ? readFileSync(join(dir, 'log'), 'utf8')
        .split('\n')
        .filter((l) => l !== '')
    : [];
const stdinOf = (step: string) => readFileSync(join(dir, `stdin-${step}`));

function deps(over: Partial<BlockDeviceDeps> = {}): BlockDeviceDeps {
  return {
    getResource: async (uri) => {
      if (uri === 'kbs:///default/disk/key') return Buffer.from(KEY);
      throw new Error(`no resource ${uri}`);
    },
    unsealSecret: async () => Buffer.from(KEY),
    env: { PATH: `${fakes}:/usr/bin:/bin`, FAKE_DIR: dir, FAKE_FAIL: fail },
    ...over,
  };
}

const request = (options: Record<string, string>, mountPoint = join(dir, 'mnt')) => ({
  volume_type: 'block-device',
  options: {
    devicePath: device,
    encryptionType: 'luks2',
    sourceType: 'auto',
    targetType: 'fileSystem',
    key: 'kbs:///default/disk/key',
    mapperName: 'vol0',
    ...options,
  },
  flags: [],
  mount_point: mountPoint,
});

async function failure(p: Promise<unknown>): Promise<SecureMountFailed> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(SecureMountFailed);
    return e as SecureMountFailed;
  }
  throw new Error('expected the mount to fail');
}

const mount = (options: Record<string, string> = {}, over: Partial<BlockDeviceDeps> = {}) =>
  new BlockDevice(
    deps({ env: { PATH: `${fakes}:/usr/bin:/bin`, FAKE_DIR: dir, FAKE_FAIL: fail }, ...over }),
  ).mount(request(options));

describe('block-device options', () => {
  const base = { devicePath: '/dev/vdb', encryptionType: 'luks2', sourceType: 'empty', targetType: 'device' };

  it("reads upstream's options with their defaults", () => {
    expect(parseBlockDeviceOptions(base)).toEqual({
      device: { path: '/dev/vdb' },
      sourceType: 'empty',
      key: undefined,
      targetType: 'device',
      filesystemType: 'ext4',
      mkfsOpts: [],
      mapperName: undefined,
    });
    const p = parseBlockDeviceOptions({
      ...base,
      deviceId: '252:16',
      targetType: 'fileSystem',
      filesystemType: 'ext4',
      mkfsOpts: ' -E  lazy_itable_init=0\t-m 0 ',
      mapperName: 'data-1',
      dataIntegrity: 'false',
      key: 'kbs:///a/b/c',
    });
    // deviceId wins over devicePath, as upstream.
    expect(p.device).toEqual({ id: [252, 16] });
    expect(p.mkfsOpts).toEqual(['-E', 'lazy_itable_init=0', '-m', '0']);
  });

  it.each([
    [{ encryptionType: 'zfs' }, /encryptionType "zfs" is not supported/],
    [{ encryptionType: undefined }, /encryptionType is required/],
    [{ devicePath: undefined }, /either deviceId or devicePath/],
    [{ devicePath: 'dev/vdb' }, /absolute path/],
    [{ deviceId: '8' }, /MAJ:MIN/],
    [{ deviceId: '8:0:1' }, /MAJ:MIN/],
    [{ deviceId: '-1:0' }, /MAJ:MIN/],
    [{ deviceId: '99999999999:0' }, /MAJ:MIN/],
    [{ sourceType: undefined }, /sourceType/],
    [{ sourceType: 'Empty' }, /sourceType/],
    [{ targetType: 'directory' }, /targetType/],
    [{ filesystemType: 'xfs' }, /filesystemType/],
    [{ dataIntegrity: 'true' }, /dataIntegrity = true is not supported/],
    [{ dataIntegrity: 'yes' }, /dataIntegrity must be/],
    [{ mapperName: '../control' }, /mapperName/],
    [{ mapperName: '-x' }, /mapperName/],
    [{ mapperName: 'a b' }, /mapperName/],
    [{ mapperName: 'x'.repeat(200) }, /mapperName/],
    [{ mkfsOpts: 'x'.repeat(4097) }, /mkfsOpts/],
    [{ unknownOption: '1' }, /unknown option "unknownOption"/],
    [JSON.parse('{"__proto__":"x"}') as Record<string, string>, /unknown option "__proto__"/],
  ])('refuses %#: %j', (over, why) => {
    const options: Record<string, string> = { ...base };
    for (const [k, v] of Object.entries(over)) {
      if (v === undefined) delete options[k];
      else
        Object.defineProperty(options, k, { value: v, enumerable: true, configurable: true, writable: true });
    }
    const e = (() => {
      try {
        parseBlockDeviceOptions(options);
      } catch (err) {
        return err as SecureMountFailed;
      }
      throw new Error('accepted');
    })();
    expect(e.code).toBe('options');
    expect(e.message).toMatch(why);
  });

  it('builds cryptsetup argument vectors with the key on standard input only', () => {
    expect(cryptsetupArgs.format('/dev/vdb')).toEqual([
      '--batch-mode',
      'luksFormat',
      '--type',
      'luks2',
      '--cipher',
      'aes-xts-plain64',
      '--sector-size',
      '4096',
      '--key-file=-',
      '/dev/vdb',
    ]);
    expect(cryptsetupArgs.open('/dev/vdb', 'vol0')).toEqual([
      'open',
      '--type',
      'luks2',
      '--key-file=-',
      '/dev/vdb',
      'vol0',
    ]);
    expect(cryptsetupArgs.close('vol0')).toEqual(['close', 'vol0']);
  });
});

describe('block-device mount with fake tools', () => {
  it('first use (all zeros, sourceType auto): luksFormat, open, mkfs, mount; the key only on stdin', async () => {
    await mount({ mkfsOpts: '-m 0' });
    expect(log()).toEqual([
      `cryptsetup ${cryptsetupArgs.format(device).join(' ')}`,
      `cryptsetup open --type luks2 --key-file=- ${device} vol0`,
      'mkfs.ext4 -F -m 0 /dev/mapper/vol0',
      `mount -t ext4 -o noatime /dev/mapper/vol0 ${join(dir, 'mnt')}`,
    ]);
    expect(stdinOf('luksFormat')).toEqual(KEY);
    expect(stdinOf('open')).toEqual(KEY);
    // No argument carries the key.
    expect(log().join('\n')).not.toContain('volume key');
  });

  it('later use (a LUKS header, sourceType auto): open and mount, no format, no mkfs', async () => {
    writeFileSync(device, Buffer.concat([Buffer.from('LUKS\xba\xbe', 'latin1'), Buffer.alloc(4096, 7)]));
    await mount();
    expect(log()).toEqual([
      `cryptsetup open --type luks2 --key-file=- ${device} vol0`,
      `mount -t ext4 -o noatime /dev/mapper/vol0 ${join(dir, 'mnt')}`,
    ]);
  });

  it('sourceType empty formats and encrypted opens, whatever the device holds', async () => {
    writeFileSync(device, 'LUKS\xba\xbe');
    await mount({ sourceType: 'empty' });
    expect(log().map((l) => l.split(' ').slice(0, 2).join(' '))).toEqual([
      'cryptsetup --batch-mode',
      'cryptsetup open',
      'mkfs.ext4 -F',
      'mount -t',
    ]);
    writeFileSync(join(dir, 'log'), '');
    writeFileSync(device, Buffer.alloc(4096));
    await mount({ sourceType: 'encrypted' });
    expect(log().map((l) => l.split(' ')[1])).toEqual(['open', '-t']);
  });

  it('auto refuses a device that is neither LUKS nor empty, before any tool runs', async () => {
    writeFileSync(device, Buffer.concat([Buffer.alloc(PROBE_BYTES - 1), Buffer.from([1])]));
    const e = await failure(mount());
    expect([e.code, e.message]).toEqual([
      'probe',
      'Secure Mount failed: sourceType auto: the device is neither LUKS nor empty (its first MiB is not all zeros); not formatting it',
    ]);
    expect(log()).toEqual([]);
    const missing = await failure(mount({ devicePath: join(dir, 'nope') }));
    expect(missing.code).toBe('probe');
  });

  it('targetType device: a symlink to the mapping at the mount point', async () => {
    const link = join(dir, 'dev-link');
    await new BlockDevice(deps({ env: { PATH: `${fakes}:/usr/bin:/bin`, FAKE_DIR: dir } })).mount(
      request({ targetType: 'device' }, link),
    );
    expect(readlinkSync(link)).toBe('/dev/mapper/vol0');
    expect(log().map((l) => l.split(' ')[1])).toEqual(['--batch-mode', 'open']);
  });

  it('each failing step names itself and leaves nothing opened or mounted', async () => {
    const cases: [string, string, string[]][] = [
      ['luksFormat', 'cryptsetup luksFormat failed (exit status 3)', ['luksFormat']],
      ['open', 'cryptsetup open failed (exit status 3)', ['luksFormat', 'open']],
      ['mkfs.ext4', 'mkfs.ext4 failed (exit status 3)', ['luksFormat', 'open', 'mkfs.ext4', 'close']],
      ['mount', 'mount failed (exit status 3)', ['luksFormat', 'open', 'mkfs.ext4', 'mount', 'close']],
    ];
    const steps = (lines: string[]) =>
      lines.map((l) => {
        const [tool, ...args] = l.split(' ');
        return tool === 'cryptsetup'
          ? (args.find((a) => ['luksFormat', 'open', 'close'].includes(a)) as string)
          : tool;
      });
    for (const [step, message, ran] of cases) {
      writeFileSync(join(dir, 'log'), '');
      writeFileSync(device, Buffer.alloc(4096));
      fail = step;
      const e = await failure(mount());
      expect(e.message, step).toBe(`Secure Mount failed: ${message}`);
      expect(e.reason, step).toContain(`fake ${step} failure`);
      expect(steps(log().filter(Boolean)), step).toEqual(ran);
    }
  });

  it('a failing symlink closes the mapping; a failing clean-up is logged, the first error kept', async () => {
    const occupied = join(dir, 'occupied');
    writeFileSync(occupied, 'x');
    const { logger, lines } = captureLogger();
    fail = 'close';
    const e = await failure(
      new BlockDevice(
        deps({ logger, env: { PATH: `${fakes}:/usr/bin:/bin`, FAKE_DIR: dir, FAKE_FAIL: fail } }),
      ).mount(request({ targetType: 'device' }, occupied)),
    );
    expect(e.code).toBe('symlink');
    expect(log().at(-1)).toBe('cryptsetup close vol0');
    expect(lines.join('\n')).toMatch(/clean-up after a failed secure mount: cryptsetup close vol0 failed/);
    expect(lstatSync(occupied).isSymbolicLink()).toBe(false);
  });

  it('calls on one device run one at a time (two first uses do not both format)', async () => {
    // luksFormat takes a while and marks the device as LUKS, as the real one does.
    writeFileSync(
      join(fakes, 'cryptsetup'),
      FAKE_TOOL.replace(
        'exit 0\n',
        `case "$step" in luksFormat) sleep 0.3; for a in "$@"; do dev=$a; done; printf 'LUKS\\272\\276' | dd of="$dev" conv=notrunc 2>/dev/null;; esac\nexit 0\n`,
      ),
    );
    await Promise.all([mount({ mapperName: 'a' }), mount({ mapperName: 'b' })]);
    const steps = log().map((l) => l.split(' ').slice(0, 2).join(' '));
    expect(steps).toEqual([
      'cryptsetup --batch-mode',
      'cryptsetup open',
      'mkfs.ext4 -F',
      'mount -t',
      'cryptsetup open',
      'mount -t',
    ]);
  });

  it('a missing tool is the step that needed it', async () => {
    const e = await failure(mount({}, { env: { PATH: join(dir, 'empty-path') } }));
    expect(e.code).toBe('format');
    expect(e.reason).toMatch(/cryptsetup: not found in PATH/);
  });

  it('key sources: kbs through the hub, sealed through unsealing, file, random; bad ones refused before any tool', async () => {
    let unsealed = '';
    const keyFile = join(dir, 'key');
    writeFileSync(keyFile, 'file key');
    const run = (key: string | undefined) => {
      writeFileSync(device, Buffer.alloc(4096));
      const options: Record<string, string> = key === undefined ? {} : { key };
      const r = request(options);
      if (key === undefined) delete (r.options as Record<string, string>).key;
      return new BlockDevice(
        deps({
          unsealSecret: async (s) => {
            unsealed = Buffer.from(s).toString();
            return Buffer.from('unsealed key');
          },
          env: { PATH: `${fakes}:/usr/bin:/bin`, FAKE_DIR: dir },
        }),
      ).mount(r);
    };
    await run('sealed.a.b.c');
    expect([unsealed, stdinOf('open').toString()]).toEqual(['sealed.a.b.c', 'unsealed key']);
    await run(`file://${keyFile}`);
    expect(stdinOf('open').toString()).toBe('file key');
    await run(undefined);
    expect(stdinOf('open').length).toBe(4096);
    writeFileSync(join(dir, 'log'), '');
    for (const [key, why] of [
      ['https://kbs/key', /scheme of the key uri/],
      ['kbs:///default/other/key', /Failed to get key: no resource/],
      [`file://${join(dir, 'missing')}`, /Failed to get key/],
    ] as const) {
      const e = await failure(run(key));
      expect([e.code, e.message]).toEqual(['key', expect.stringMatching(why)]);
    }
    writeFileSync(join(dir, 'empty-key'), '');
    expect((await failure(run(`file://${join(dir, 'empty-key')}`))).message).toMatch(
      /1 to 65536 bytes, got 0/,
    );
    expect(log()).toEqual([]);
  });

  it('deviceId is looked up in sysfs (DEVNAME), refusing names that leave /dev', async () => {
    const sys = join(dir, 'sys');
    execFileSync('mkdir', ['-p', join(sys, '252:16'), join(sys, '252:17'), join(sys, '252:18')]);
    writeFileSync(join(sys, '252:16', 'uevent'), 'MAJOR=252\nMINOR=16\nDEVNAME=vdb\nDEVTYPE=disk\n');
    writeFileSync(join(sys, '252:17', 'uevent'), 'MAJOR=252\nDEVNAME=../etc/passwd\n');
    writeFileSync(join(sys, '252:18', 'uevent'), 'MAJOR=252\n');
    const bd = new BlockDevice(
      deps({ sysBlockDir: sys, env: { PATH: `${fakes}:/usr/bin:/bin`, FAKE_DIR: dir } }),
    );
    await bd.mount(request({ deviceId: '252:16', sourceType: 'encrypted' }));
    expect(log()[0]).toBe('cryptsetup open --type luks2 --key-file=- /dev/vdb vol0');
    for (const id of ['252:17', '252:18', '252:99']) {
      const e = await failure(bd.mount(request({ deviceId: id, sourceType: 'encrypted' })));
      expect(e.code, id).toBe('device');
    }
  });
});

describe("block-device with Debian's cryptsetup on a plain file", () => {
  it('formats LUKS2 with our arguments and key, which unlocks it (open is checked with --test-passphrase)', async () => {
    // The real cryptsetup; `open` becomes `open --test-passphrase` (no device-mapper here) and close a no-op.
    const real = join(dir, 'real');
    execFileSync('mkdir', ['-p', real]);
    writeFileSync(
      join(real, 'cryptsetup'),
      `#!/bin/sh\ncase "$1" in\n  open) shift; exec /usr/sbin/cryptsetup open --test-passphrase "$@";;\n  close) exit 0;;\n  *) exec /usr/sbin/cryptsetup "$@";;\nesac\n`,
    );
    chmodSync(join(real, 'cryptsetup'), 0o755);
    const link = join(dir, 'dev-link');
    writeFileSync(device, Buffer.alloc(32 * 1024 * 1024));
    await new BlockDevice(deps({ env: { PATH: `${real}:/usr/sbin:/usr/bin:/bin` } })).mount(
      request({ targetType: 'device' }, link),
    );
    const dump = execFileSync('/usr/sbin/cryptsetup', ['luksDump', device], { encoding: 'utf8' });
    expect(dump).toMatch(/^Version:\s+2$/m);
    expect(dump).toMatch(/cipher: aes-xts-plain64/);
    expect(dump).toMatch(/sector: 4096/);
    const unlock = (key: Buffer) => {
      try {
        execFileSync('/usr/sbin/cryptsetup', ['open', '--test-passphrase', '--key-file=-', device], {
          input: key,
          stdio: ['pipe', 'ignore', 'ignore'],
        });
        return true;
      } catch {
        return false;
      }
    };
    expect(unlock(KEY)).toBe(true);
    expect(unlock(Buffer.from('another key'))).toBe(false);
    // Later use: the header is found, the device is opened, not formatted again.
    const before = readFileSync(device).subarray(0, 64 * 1024);
    const again = join(dir, 'dev-link-2');
    await new BlockDevice(deps({ env: { PATH: `${real}:/usr/sbin:/usr/bin:/bin` } })).mount(
      request({ targetType: 'device' }, again),
    );
    expect(
      readFileSync(device)
        .subarray(0, 64 * 1024)
        .equals(before),
    ).toBe(true);
    // A wrong key fails at open and leaves no symlink.
    const wrong = join(dir, 'dev-link-3');
    const e = await failure(
      new BlockDevice(
        deps({
          getResource: async () => Buffer.from('not the key'),
          env: { PATH: `${real}:/usr/sbin:/usr/bin:/bin` },
        }),
      ).mount(request({ targetType: 'device' }, wrong)),
    );
    expect(e.code).toBe('open');
    expect(existsSync(wrong)).toBe(false);
  }, 120_000);
});

describe('SecureMount over ttrpc, the key from a KBS through the hub', () => {
  let kbs: TestKbs;
  beforeAll(async () => {
    kbs = await startTestKbs();
    await kbs.setResource('default/disk/key', KEY);
  });
  afterAll(async () => {
    await kbs.close();
  });

  it('mounts with the KBS key, and reports a failing step to the caller', async () => {
    const cfg = parseCdhConfig(
      `socket = "unix://${join(dir, 'cdh.sock')}"\ncredentials = []\n[aa]\naa_socket = "unix://${join(dir, 'aa.sock')}"\n[kbc]\nname = "cc_kbc"\nurl = "${kbs.url}"\n`,
    );
    const aa = await FakeAa.start(join(dir, 'aa.sock'), kbs);
    const { logger, lines } = captureLogger();
    const hub = await startDataHub(cfg, {
      logger,
      credentialRoot: join(dir, 'kbs'),
      secureMount: { env: { PATH: `${fakes}:/usr/bin:/bin`, FAKE_DIR: dir } },
    });
    const client = await DataHubClient.connect(cfg.socket, { timeoutMs: 20_000 });
    try {
      expect(hub.services).toContain('api.SecureMountService');
      await client.secureMount(request({}));
      expect(stdinOf('open')).toEqual(KEY);
      expect(log().map((l) => l.split(' ')[0])).toEqual(['cryptsetup', 'cryptsetup', 'mkfs.ext4', 'mount']);

      writeFileSync(join(dir, 'log'), '');
      const e = await client
        .secureMount(request({ sourceType: 'encrypted', mapperName: 'bad name' }))
        .catch((x) => x);
      expect(e).toBeInstanceOf(TtrpcError);
      expect((e as TtrpcError).message).toMatch(
        /\[CDH\] \[ERROR\]: Secure Mount failed: invalid block-device options: mapperName/,
      );
      const other = await client
        .secureMount({ volume_type: 'alibaba-cloud-oss', options: {}, flags: [], mount_point: '/mnt' })
        .catch((x) => x);
      expect((other as TtrpcError).message).toMatch(
        /Failed to recognize the storage type: "alibaba-cloud-oss"/,
      );
      expect(log()).toEqual([]);
      // The key never reaches the log.
      expect(lines.join('\n')).not.toContain('volume key');
      expect(readdirSync(dir)).not.toContain('mnt');
    } finally {
      client.close();
      await hub.close({ graceMs: 0 });
      await aa.close();
    }
  });
});

describe("SecureMount keyed by trustee's provisioner plugin (kbs+provisioner://)", () => {
  it('the admin provisions, the attested guest mounts with its key, the policy can refuse it, DELETE ends it', async () => {
    const toml = `[http_server]\nsockets = ["127.0.0.1:0"]\ninsecure_http = true\n[attestation_token]\ninsecure_header_jwk = true\n[admin]\nauthorization_mode = "InsecureAllowAll"\n[[plugins]]\nname = "provisioner"\n`;
    const kbs = await startKbs(parseKbsConfigText(toml), { logger: pino({ level: 'silent' }) });
    const url = kbs.urls[0] as string;
    const stops: (() => Promise<unknown> | unknown)[] = [() => kbs.close()];
    try {
      const http = (method: string, path: string, body?: string) =>
        fetch(`${url}/kbs/v0/${path}`, { method, ...(body !== undefined && { body }) });
      const setPolicy = async (allow: boolean) => {
        const rego = `package policy\nimport rego.v1\ndefault allow := ${allow}\n`;
        const r = await http(
          'POST',
          'resource-policy',
          JSON.stringify({ policy: Buffer.from(rego).toString('base64url') }),
        );
        expect(r.status).toBe(200);
      };
      await setPolicy(true);
      const posted = (await (
        await http('POST', 'provisioner/provision', '{"vm_name":"pod-vm-1"}')
      ).json()) as {
        uuid: string;
        resource_path: string;
      };
      const resource = `kbs+provisioner:///${posted.resource_path}`;
      // The guest's initdata names its key, as the operator writes it.
      const aa = await FakeAa.start(join(dir, 'aa.sock'), {
        url,
        certPem: null,
        initData: `version = "0.1.0"\nalgorithm = "sha384"\n\n[data]\n"trustee.kbs.resource" = "${resource}"\n`,
      });
      stops.push(() => aa.close());
      const cfg = parseCdhConfig(
        `socket = "unix://${join(dir, 'cdh.sock')}"\ncredentials = []\n[aa]\naa_socket = "unix://${join(dir, 'aa.sock')}"\n[kbc]\nname = "cc_kbc"\nurl = "${url}"\n`,
      );
      const { logger } = captureLogger();
      const hub = await startDataHub(cfg, {
        logger,
        credentialRoot: join(dir, 'kbs'),
        secureMount: { env: { PATH: `${fakes}:/usr/bin:/bin`, FAKE_DIR: dir } },
      });
      stops.push(() => hub.close({ graceMs: 0 }));
      const client = await DataHubClient.connect(cfg.socket, { timeoutMs: 20_000 });
      stops.push(() => client.close());

      await client.secureMount(request({ key: resource }));
      // The key is the resource as the KBS stores it (trustee's confdata document), as upstream's hub uses it.
      const key = stdinOf('open').toString('utf8');
      expect(key).toMatch(
        /^version = "0\.1\.0"\n\n\[data\]\n"io\.cryptsetup\.key\.text\.root" = "[A-Za-z0-9]{32}"\n$/,
      );
      expect(stdinOf('luksFormat').toString('utf8')).toBe(key);

      // The resource policy refuses: the key step fails and nothing runs.
      writeFileSync(join(dir, 'log'), '');
      await setPolicy(false);
      const denied = await client
        .secureMount(request({ key: resource, sourceType: 'encrypted' }))
        .catch((e) => e);
      expect((denied as TtrpcError).message).toMatch(/Secure Mount failed: Failed to get key/);
      expect(log()).toEqual([]);

      // Deprovisioned: the key is gone for good.
      await setPolicy(true);
      expect((await http('DELETE', `provisioner/provision/${posted.uuid}`)).status).toBe(200);
      const gone = await client
        .secureMount(request({ key: resource, sourceType: 'encrypted' }))
        .catch((e) => e);
      expect((gone as TtrpcError).message).toMatch(/Secure Mount failed: Failed to get key/);
      expect(log()).toEqual([]);
    } finally {
      for (const stop of stops.reverse()) await stop();
    }
  });
});

// trustee's provisioner plugin answers `GET /kbs/v0/provisioner/<path>` with the document it stored, unchanged
// (its confdata TOML), and guest-components' hub gives cryptsetup whatever a `kbs://` or `kbs+<plugin>://`
// resource holds, without parsing it. So the passphrase is the whole document, here as there, and a disk one
// hub formatted opens with the other; only the `io.cryptsetup.key.text.root` value alone (what a confdata
// consumer such as systemd-cryptsetup would use) does not open it.
describe("kbs+provisioner keys are trustee's confdata document, byte for byte", () => {
  const URI = 'kbs+provisioner:///default/c007d2cc-5f14-41e5-a202-8d15f6f68607/root';
  const VALUE = 'Q7fR2kLm9XzT4vBn8HcJ1wYp6sDg3aEu';
  // The layout trustee's plugin stores for a 32-character key.
  const DOCUMENT = Buffer.from(`version = "0.1.0"\n\n[data]\n"io.cryptsetup.key.text.root" = "${VALUE}"\n`);
  const serving = (bytes: Buffer, over: Partial<BlockDeviceDeps> = {}, asked: string[] = []) =>
    deps({
      getResource: async (uri) => {
        asked.push(uri);
        if (uri === URI) return Buffer.from(bytes);
        throw new Error(`no resource ${uri}`);
      },
      ...over,
    });

  it('the whole document, unparsed, is what luksFormat and open read on stdin, and nothing logs it', async () => {
    const asked: string[] = [];
    const { logger, lines } = captureLogger();
    await new BlockDevice(serving(DOCUMENT, { logger }, asked)).mount(request({ key: URI }));
    expect(asked).toEqual([URI]);
    expect(stdinOf('luksFormat').equals(DOCUMENT)).toBe(true);
    expect(stdinOf('open').equals(DOCUMENT)).toBe(true);
    expect(log().join('\n')).not.toContain(VALUE);
    expect(lines.join('\n')).not.toContain(VALUE);
  });

  it('a resource that is not a confdata document is used as served, as upstream does; an oversized one is refused', async () => {
    for (const served of [
      Buffer.from('not TOML at all \x00\xff\n'),
      Buffer.from('version = "0.1.0"\n\n[data]\n"io.cryptsetup.key.text.other" = "x"\n'),
      Buffer.from('version = "0.1.0"\n\n[data]\n"io.cryptsetup.key.text.root" = 42\n'),
    ]) {
      writeFileSync(device, Buffer.alloc(2 * PROBE_BYTES));
      await new BlockDevice(serving(served)).mount(request({ key: URI }));
      expect(stdinOf('open').equals(served)).toBe(true);
    }
    writeFileSync(join(dir, 'log'), '');
    const huge = Buffer.concat([DOCUMENT, Buffer.alloc(64 * 1024 + 1 - DOCUMENT.length, 0x23)]);
    const e = await failure(new BlockDevice(serving(huge)).mount(request({ key: URI })));
    expect([e.code, e.message]).toEqual(['key', expect.stringMatching(/1 to 65536 bytes, got 65537/)]);
    expect(log()).toEqual([]);
  });

  it("with Debian's cryptsetup: a disk formatted with upstream's arguments and the document opens here, the bare value does not; ours opens with upstream's", async () => {
    const real = join(dir, 'real');
    execFileSync('mkdir', ['-p', real]);
    // `open` becomes `open --test-passphrase` (no device-mapper here) and close a no-op.
    writeFileSync(
      join(real, 'cryptsetup'),
      `#!/bin/sh\ncase "$1" in\n  open) shift; exec /usr/sbin/cryptsetup open --test-passphrase "$@";;\n  close) exit 0;;\n  *) exec /usr/sbin/cryptsetup "$@";;\nesac\n`,
    );
    chmodSync(join(real, 'cryptsetup'), 0o755);
    const env = { PATH: `${real}:/usr/sbin:/usr/bin:/bin` };

    // Upstream's hub formats with the passphrase file `-` (its stdin) after the device; a cheap PBKDF keeps
    // the test quick and changes nothing about which passphrase unlocks.
    writeFileSync(device, Buffer.alloc(32 * 1024 * 1024));
    execFileSync(
      '/usr/sbin/cryptsetup',
      [
        '--batch-mode',
        'luksFormat',
        '--type',
        'luks2',
        '--cipher',
        'aes-xts-plain64',
        '--sector-size',
        '4096',
        '--pbkdf',
        'pbkdf2',
        '--pbkdf-force-iterations',
        '1000',
        device,
        '-',
      ],
      { input: DOCUMENT, stdio: ['pipe', 'ignore', 'ignore'] },
    );
    await new BlockDevice(serving(DOCUMENT, { env })).mount(
      request({ key: URI, sourceType: 'encrypted', targetType: 'device' }, join(dir, 'link-1')),
    );
    expect(lstatSync(join(dir, 'link-1')).isSymbolicLink()).toBe(true);
    const bare = await failure(
      new BlockDevice(serving(Buffer.from(VALUE), { env })).mount(
        request({ key: URI, sourceType: 'encrypted', targetType: 'device' }, join(dir, 'link-2')),
      ),
    );
    expect(bare.code).toBe('open');

    // The reverse: a disk this hub formats opens with upstream's open arguments (`luksOpen -d -`).
    const ours = join(dir, 'ours.img');
    writeFileSync(ours, Buffer.alloc(32 * 1024 * 1024));
    await new BlockDevice(serving(DOCUMENT, { env })).mount(
      request({ key: URI, targetType: 'device', devicePath: ours }, join(dir, 'link-3')),
    );
    execFileSync('/usr/sbin/cryptsetup', ['luksOpen', '--test-passphrase', '-d', '-', ours], {
      input: DOCUMENT,
      stdio: ['pipe', 'ignore', 'ignore'],
    });
  }, 120_000);
});
