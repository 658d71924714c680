// The pod VM's systemd units: `systemd-analyze verify` in a scratch root that holds the units, the
// distribution's own units and stand-ins for the executables, plus the wiring between them (each path
// unit waits for the file the previous service creates).
import { execFile } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const HERE = import.meta.dirname;
const UNITS = join(HERE, 'rootfs/etc/systemd/system');
const SYSTEM_UNITS = '/usr/lib/systemd/system';
const INSTALL_HINT = 'run scripts/install-deps.sh (Debian package systemd)';

/** The guest commands build.sh links to broker-guest. */
function guestCommands(): string[] {
  const m = /^COMMANDS=\(([^)]*)\)/m.exec(readFileSync(join(HERE, 'build.sh'), 'utf8'));
  if (m === null) throw new Error('build.sh has no COMMANDS=(...) line');
  return (m[1] ?? '').trim().split(/\s+/);
}

type Unit = Map<string, Map<string, string[]>>;

function parseUnit(text: string): Unit {
  const unit: Unit = new Map();
  let section = '';
  // systemd joins a line that ends in a backslash with the next.
  for (const raw of text.replace(/\\\n/g, ' ').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const s = /^\[(.+)\]$/.exec(line);
    if (s) {
      section = s[1] ?? '';
      if (!unit.has(section)) unit.set(section, new Map());
      continue;
    }
    const eq = line.indexOf('=');
    const key = line.slice(0, eq);
    const values = unit.get(section)?.get(key) ?? [];
    values.push(line.slice(eq + 1));
    unit.get(section)?.set(key, values);
  }
  return unit;
}

const unitFiles = readdirSync(UNITS).sort();
const units = new Map(unitFiles.map((f) => [f, parseUnit(readFileSync(join(UNITS, f), 'utf8'))]));
const get = (file: string, section: string, key: string) => units.get(file)?.get(section)?.get(key) ?? [];
/** Names given to systemd-analyze: templates as the instance the units use. */
const verifyNames = unitFiles.map((f) => (f === 'netns@.service' ? 'netns@podns.service' : f));

let root: string;

async function verify(names: string[]): Promise<{ code: number; stderr: string }> {
  try {
    const { stderr } = await run('systemd-analyze', ['verify', `--root=${root}`, ...names], {
      cwd: join(root, 'etc/systemd/system'),
      env: { ...process.env, SYSTEMD_LOG_COLOR: '0' },
    });
    return { code: 0, stderr };
  } catch (e) {
    const err = e as { code?: number; stderr?: string };
    return { code: typeof err.code === 'number' ? err.code : 1, stderr: err.stderr ?? String(e) };
  }
}

beforeAll(async () => {
  try {
    await run('sh', ['-c', 'command -v systemd-analyze']);
  } catch {
    throw new Error(`systemd-analyze not found on PATH: ${INSTALL_HINT}`);
  }
  if (!existsSync(join(SYSTEM_UNITS, 'sysinit.target'))) {
    throw new Error(`${SYSTEM_UNITS}/sysinit.target is missing: ${INSTALL_HINT}`);
  }
  root = mkdtempSync(join(tmpdir(), 'guest-units-'));
  mkdirSync(join(root, 'usr/lib/systemd'), { recursive: true });
  cpSync(SYSTEM_UNITS, join(root, 'usr/lib/systemd/system'), { recursive: true, verbatimSymlinks: true });
  cpSync(UNITS, join(root, 'etc/systemd/system'), { recursive: true, verbatimSymlinks: true });
  cpSync(join(HERE, 'rootfs/etc/default'), join(root, 'etc/default'), { recursive: true });
  mkdirSync(join(root, 'usr/local/bin'), { recursive: true });
  for (const cmd of ['broker-guest', ...guestCommands()]) {
    writeFileSync(join(root, 'usr/local/bin', cmd), '#!/bin/sh\n');
    chmodSync(join(root, 'usr/local/bin', cmd), 0o755);
  }
  // Other programs the units run come from the image's Debian packages (coreutils, iproute2).
  for (const program of ['/bin/mkdir', '/usr/sbin/ip']) {
    mkdirSync(join(root, program, '..'), { recursive: true });
    writeFileSync(join(root, program), '#!/bin/sh\n');
    chmodSync(join(root, program), 0o755);
  }
});

afterAll(() => {
  if (root !== undefined) rmSync(root, { recursive: true, force: true });
});

describe('guest image units', () => {
  it('pass systemd-analyze verify with no warning', async () => {
    const r = await verify(verifyNames);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });

  it('are refused by systemd-analyze verify when broken (the check can fail)', async () => {
    const dir = join(root, 'etc/systemd/system');
    const good = readFileSync(join(dir, 'api-server-rest.service'), 'utf8');
    writeFileSync(
      join(dir, 'broken-exec.service'),
      good.replace('ExecStart=/usr/local/bin/api-server-rest', 'ExecStart=/usr/local/bin/no-such-command'),
    );
    writeFileSync(join(dir, 'broken-key.service'), good.replace('Type=simple', 'Type=simpel'));
    try {
      const exec = await verify(['broken-exec.service']);
      expect(exec.code).not.toBe(0);
      expect(exec.stderr).toMatch(/no-such-command is not executable/);
      // A bad value is only a warning for systemd-analyze, which is why the first test wants no output.
      const key = await verify(['broken-key.service']);
      expect(key.stderr).toMatch(/Failed to parse service type/);
    } finally {
      rmSync(join(dir, 'broken-exec.service'));
      rmSync(join(dir, 'broken-key.service'));
    }
  });

  it('run only the guest executable commands (and coreutils/iproute2)', () => {
    const commands = guestCommands();
    for (const [file] of units) {
      for (const key of ['ExecStart', 'ExecStartPre', 'ExecStop']) {
        for (const line of get(file, 'Service', key)) {
          const [program = '', ...args] = line.replace(/^[-@:+!]+/, '').split(/\s+/);
          if (program === '/usr/local/bin/broker-guest') {
            // The executable by its own name runs commands together: each one a guest command.
            expect(args[0], `${file} ${key}`).toBe('--together');
            const together = args.filter((_, i) => args[i - 1] === '--together' || args[i - 1] === '--and');
            for (const c of together) expect(commands, `${file} ${key}`).toContain(c);
          } else if (program.startsWith('/usr/local/bin/')) {
            expect(commands, `${file} ${key}`).toContain(program.slice('/usr/local/bin/'.length));
          } else {
            expect(['/bin/mkdir', '/usr/sbin/ip'], `${file} ${key}`).toContain(program);
          }
        }
      }
    }
    expect(commands).toEqual(
      expect.arrayContaining([
        'process-user-data',
        'attestation-agent',
        'confidential-data-hub',
        'api-server-rest',
        'agent-policy-gate',
        'sealed-secret-init',
        'encrypted-disk',
        'sandbox-agent',
      ]),
    );
  });

  it('chain provisioning → one process for the AA, the hub, unsealing and the gate → api-server-rest', () => {
    // Every path unit starts an existing service.
    for (const [file] of units) {
      if (!file.endsWith('.path')) continue;
      const [target] = get(file, 'Path', 'Unit');
      expect(units.has(target ?? ''), `${file} → ${target}`).toBe(true);
    }
    const waitsFor = (path: string) => get(path, 'Path', 'PathExists')[0];
    // process-user-data writes aa.toml last; the AA starts on it and reads it.
    expect(waitsFor('attestation-agent.path')).toBe('/run/peerpod/aa.toml');
    // One process runs, in this order, the AA, the hub (which asks the AA for tokens from its start),
    // the unsealing of /sealed once the hub serves, the encrypted disk the initdata asks for, and the
    // gate, which lets the host create containers only once the volumes are unsealed and the disk open.
    const line = (get('attestation-agent.service', 'Service', 'ExecStart')[0] ?? '').replace(/\s+/g, ' ');
    const [aa = '', cdh = '', unseal = '', disk = '', gate = '', ...more] = line.split(' --and ');
    expect(more).toEqual([]);
    expect(aa).toMatch(/^\/usr\/local\/bin\/broker-guest --together attestation-agent /);
    expect(aa).toContain('-c /run/peerpod/aa.toml');
    // The AA sends the initdata process-user-data wrote (and bound to PCR8, which the TPM attester
    // then leaves as it is); never a digest of its own.
    expect(aa).toContain('--initdata-toml /run/confidential-containers/initdata/initdata.toml');
    expect(aa).not.toMatch(/--initdata-digest|-t |-i /);
    expect(cdh).toBe('confidential-data-hub -c /run/peerpod/cdh.toml');
    const cdhSock = 'unix:///run/confidential-containers/cdh.sock';
    expect(unseal).toBe(`sealed-secret-init --root /sealed --cdh-socket ${cdhSock}`);
    // The disk step reads the initdata process-user-data wrote; the operator's options come last.
    expect(disk).toBe(
      `encrypted-disk --initdata /run/confidential-containers/initdata/initdata.toml --cdh-socket ${cdhSock} $BROKER_ENCRYPTED_DISK_OPTIONS`,
    );
    // Its log lines reach the console, and its mounts the kata agent: no mount namespace of its own.
    expect(get('attestation-agent.service', 'Service', 'StandardError')).toEqual(['journal+console']);
    for (const k of ['PrivateTmp', 'ProtectHome', 'PrivateMounts', 'ProtectSystem']) {
      expect(get('attestation-agent.service', 'Service', k), k).toEqual([]);
    }
    expect(gate).toBe(
      'agent-policy-gate serve --listen tcp://0.0.0.0:15150 --agent unix:///run/kata-containers/agent.sock --initdata /run/confidential-containers/initdata/initdata.toml',
    );
    // The hub's unit name stays, as another name of the same unit; the others' units are gone.
    expect(lstatSync(join(UNITS, 'confidential-data-hub.service')).isSymbolicLink()).toBe(true);
    expect(readlinkSync(join(UNITS, 'confidential-data-hub.service'))).toBe('attestation-agent.service');
    for (const gone of ['confidential-data-hub.path', 'sealed-secret-init', 'agent-policy-gate']) {
      expect(unitFiles.filter((f) => f.startsWith(gone))).toEqual([]);
    }
    // api-server-rest waits for the hub's socket and reaches the AA at its socket.
    const aaSock = /-a (unix:\/\/\S+)/.exec(aa)?.[1];
    expect(waitsFor('api-server-rest.path')).toBe(cdhSock.slice('unix://'.length));
    const rest = get('api-server-rest.service', 'Service', 'ExecStart')[0] ?? '';
    expect(rest).toContain(`--aa_addr ${aaSock}`);
    expect(rest).toContain(`--cdh_addr ${cdhSock}`);
    expect(get('api-server-rest.service', 'Unit', 'Requires')).toEqual(['confidential-data-hub.service']);
    // Only process-user-data, the sandbox agent and the path units are enabled; the other services
    // start through the path units.
    expect(get('process-user-data.service', 'Install', 'WantedBy')).toEqual(['multi-user.target']);
    const enabledServices = ['process-user-data.service', 'sandbox-agent.service'];
    for (const f of unitFiles.filter((f) => f.endsWith('.service') && !enabledServices.includes(f))) {
      expect(units.get(f)?.has('Install'), f).toBe(false);
    }
  });

  it('start the sandbox agent on its own, where the gate forwards to', () => {
    const file = 'sandbox-agent.service';
    const [line = ''] = get(file, 'Service', 'ExecStart');
    const [program, ...args] = line.split(/\s+/);
    expect(program).toBe('/usr/local/bin/sandbox-agent');
    const option = (name: string) => args.filter((_, i) => args[i - 1] === name);
    // The gate (the shared process's last command) forwards to the agent's one socket.
    const chain = (get('attestation-agent.service', 'Service', 'ExecStart')[0] ?? '').replace(/\s+/g, ' ');
    const gateAgent = /agent-policy-gate serve .*--agent (\S+)/.exec(chain)?.[1];
    expect(gateAgent).toBe('unix:///run/kata-containers/agent.sock');
    expect(option('--listen')).toEqual([gateAgent]);
    // Its roots and state live under /run: nothing of a pod survives the power-off, and the read-only
    // verity root is never written.
    const dirs = [...option('--root'), ...option('--state-dir')];
    expect(dirs).toEqual(['/run/kata-containers', '/run/sandbox-agent']);
    expect(option('--data-hub')).toEqual(['unix:///run/confidential-containers/cdh.sock']);
    // Started at boot as kata's agent is, not through the attestation chain: no ordering on it, so a
    // restart of the chain (or its failure) neither stops nor restarts the pod's containers.
    for (const k of ['After', 'Requires', 'BindsTo', 'PartOf', 'Wants'])
      expect(get(file, 'Unit', k), k).toEqual([]);
    expect(get(file, 'Install', 'WantedBy')).toEqual(['multi-user.target']);
    const enabled = /^ENABLE=\(([^)]*)\)/m
      .exec(readFileSync(join(HERE, 'build.sh'), 'utf8'))?.[1]
      ?.split(/\s+/);
    expect(enabled).toContain(file);
    // runc sets up namespaces, cgroups and mounts for the containers: no sandboxing of the agent that
    // would hide its mounts from runc or stop setuid programs in containers.
    for (const k of ['NoNewPrivileges', 'PrivateTmp', 'ProtectHome', 'PrivateMounts', 'ProtectSystem']) {
      expect(get(file, 'Service', k), k).toEqual([]);
    }
    // Its log lines (container ids, exit statuses, first-output timing) reach the console.
    expect(get(file, 'Service', 'StandardOutput')).toEqual(['journal+console']);
  });
});
