// The service as a ttrpc peer sees it, without running containers: the RPC table, UNIMPLEMENTED by name,
// refused requests (paths, ids, drivers, hooks) and the bundle CreateContainer writes. Root only:
// CreateContainer mounts the container's root into the bundle.
import { mkdir, readFile, realpath, stat, statfs, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AGENT_METHODS } from '@broker/agent-policy';
import { registerDataHubServices } from '@broker/guest-api';
import { Code, TtrpcClient, TtrpcError, TtrpcServer } from '@broker/ttrpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codec, type Decoded } from './proto.js';
import { dataHubPuller, parseListenAddress, type RunningAgent, startSandboxAgent } from './server.js';
import { AGENT_SERVICE, IMPLEMENTED_RPCS, UNIMPLEMENTED_RPCS } from './service.js';
import { kataSpec, tempDir } from './testing/index.js';

describe.skipIf(process.getuid?.() !== 0)('the sandbox agent service', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let running: RunningAgent;
  let client: TtrpcClient;
  let root: string;
  let hub: TtrpcServer;
  const pulls: [string, string][] = [];

  const call = async (rpc: string, req: Decoded = {}, response = 'Empty'): Promise<Decoded> => {
    const bytes = codec(AGENT_METHODS[rpc]!).encode(req);
    return codec(response).decode(await client.call(AGENT_SERVICE, rpc, bytes));
  };
  const failure = async (rpc: string, req: Decoded = {}): Promise<TtrpcError> => {
    const e = await call(rpc, req).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(TtrpcError);
    return e as TtrpcError;
  };

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    root = join(dir, 'kata');
    // A data hub standing in for the CDH: "pulls" by making the rootfs directory.
    hub = new TtrpcServer();
    registerDataHubServices(hub, {
      async pullImage(image, bundlePath) {
        pulls.push([image, bundlePath]);
        await mkdir(join(bundlePath, 'rootfs'), { recursive: true });
        return 'sha256:00';
      },
    });
    await hub.listen({ path: join(dir, 'cdh.sock') });
    running = await startSandboxAgent({
      // The second socket sits in the root, where the pod VM's agent socket is.
      listen: [{ path: join(dir, 'agent.sock') }, { path: join(root, 'agent.sock') }],
      roots: [root],
      stateDir: join(dir, 'state'),
      pullImage: dataHubPuller(`unix://${join(dir, 'cdh.sock')}`),
      sharedNamespaces: false, // needs root; lifecycle.test.ts covers them
      pauseBundle: join(dir, 'pause_bundle'),
    });
    await mkdir(join(dir, 'pause_bundle/rootfs'), { recursive: true });
    await writeFile(join(dir, 'pause_bundle/config.json'), JSON.stringify({ process: { args: ['/pause'] } }));
    await writeFile(join(dir, 'pause_bundle/rootfs/pause'), 'the pause program');
    root = running.agent.roots[0]!;
    client = await TtrpcClient.connect({ path: join(dir, 'agent.sock') });
    await mkdir(join(dir, 'outside'), { recursive: true });
    await mkdir(join(root, 'images/app/rootfs'), { recursive: true });
    await symlink(join(dir, 'outside'), join(root, 'link'));
  });
  afterAll(async () => {
    client?.close();
    await running?.close();
    await hub?.close({ graceMs: 0 });
    await cleanup?.();
  });

  it('registers all 42 RPCs of agent.proto: 28 implemented, the rest UNIMPLEMENTED by name', async () => {
    expect(Object.keys(AGENT_METHODS)).toHaveLength(42);
    expect(IMPLEMENTED_RPCS).toHaveLength(28);
    expect([...IMPLEMENTED_RPCS, ...UNIMPLEMENTED_RPCS].sort()).toEqual(Object.keys(AGENT_METHODS).sort());
    for (const rpc of UNIMPLEMENTED_RPCS) {
      const e = await client.call(AGENT_SERVICE, rpc, new Uint8Array(0)).catch((err: TtrpcError) => err);
      expect([rpc, (e as TtrpcError).code, (e as TtrpcError).message]).toEqual([
        rpc,
        Code.UNIMPLEMENTED,
        `${rpc} is not implemented by sandbox-agent`,
      ]);
    }
  });

  it('is described by the README: the same RPCs implemented and UNIMPLEMENTED', async () => {
    const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8');
    const section = (from: string, to: string) =>
      readme.slice(readme.indexOf(from), readme.indexOf(to, readme.indexOf(from)));
    const names = (text: string) => [...text.matchAll(/`([A-Z][A-Za-z]+)`/g)].map((m) => m[1]!);
    const implemented = section('**Implemented (', '\n\nIds ');
    expect(implemented).toContain(`(${IMPLEMENTED_RPCS.length}):`);
    expect(
      [
        ...new Set(
          names(
            implemented
              .split('\n')
              .map((l) => l.split('|')[1] ?? '')
              .join(' '),
          ),
        ),
      ].sort(),
    ).toEqual(IMPLEMENTED_RPCS);
    const unimplemented = section('**Answering UNIMPLEMENTED', ' belongs to the agent-policy gate');
    expect(unimplemented).toContain(`(${UNIMPLEMENTED_RPCS.length}):`);
    expect([...new Set(names(unimplemented))].sort()).toEqual(UNIMPLEMENTED_RPCS);
  });

  it('answers GetGuestDetails from sysfs and with what this agent supports', async () => {
    const details = await call(
      'GetGuestDetails',
      { mem_block_size: true, mem_hotplug_probe: true },
      'GuestDetailsResponse',
    );
    const sysfs = await readFile('/sys/devices/system/memory/block_size_bytes', 'utf8').catch(() => '');
    expect(details.mem_block_size_bytes).toBe(sysfs.trim() === '' ? 0n : BigInt(`0x${sysfs.trim()}`));
    expect(details.agent_details).toMatchObject({
      version: '0.1.0',
      storage_handlers: ['bind', 'image_guest_pull', 'local'],
      device_handlers: [],
    });
    const none = await call('GetGuestDetails', {}, 'GuestDetailsResponse');
    expect(none.mem_block_size_bytes).toBe(0n);
  });

  it('answers GetVolumeStats with statfs of a volume below the roots, and refuses others', async () => {
    const stats = await call(
      'GetVolumeStats',
      { volume_guest_path: join(root, 'images') },
      'VolumeStatsResponse',
    );
    const fs = await statfs(join(root, 'images'), { bigint: true });
    expect(stats.usage).toEqual([
      expect.objectContaining({ total: fs.blocks * fs.bsize, unit: 1 }),
      expect.objectContaining({ total: fs.files, unit: 2 }),
    ]);
    for (const u of stats.usage) expect(u.used + u.available).toBe(u.total);
    expect(stats.volume_condition).toEqual({ abnormal: false, message: 'OK' });
    const outside = await failure('GetVolumeStats', { volume_guest_path: '/etc' });
    expect(outside.code).toBe(Code.INVALID_ARGUMENT);
  });

  it('writes CopyFile only below <root>/shared/containers', async () => {
    const file = {
      file_size: 2,
      file_mode: 0o100644,
      dir_mode: 0o755,
      uid: process.getuid?.() ?? 0,
      gid: process.getgid?.() ?? 0,
      data: Buffer.from('ok'),
    };
    await call('CopyFile', { ...file, path: join(root, 'shared/containers/c1-resolv.conf') });
    expect(await readFile(join(root, 'shared/containers/c1-resolv.conf'), 'utf8')).toBe('ok');
    const e = await failure('CopyFile', { ...file, path: join(root, 'images/app/rootfs/bin/sh') });
    expect(e.code).toBe(Code.INVALID_ARGUMENT);
    expect(e.message).toMatch(/is not below the agent's roots/);
    await expect(stat(join(root, 'images/app/rootfs/bin'))).rejects.toThrow(/ENOENT/);
  });

  it('answers grpc.Health', async () => {
    const out = await client.call('grpc.Health', 'Check', new Uint8Array(0));
    expect(codec('HealthCheckResponse').decode(out).status).toBe(1);
  });

  it('refuses containers before CreateSandbox, and bad sandbox requests', async () => {
    expect((await failure('CreateContainer', { container_id: 'c' })).code).toBe(Code.FAILED_PRECONDITION);
    expect((await failure('CreateSandbox', { sandbox_id: '../x' })).code).toBe(Code.INVALID_ARGUMENT);
    const nfs = await failure('CreateSandbox', {
      sandbox_id: 'p',
      storages: [{ driver: 'nfs', mount_point: join(root, 'x') }],
    });
    expect([nfs.code, nfs.message]).toEqual([
      Code.UNIMPLEMENTED,
      'storage driver "nfs" is not supported by sandbox-agent',
    ]);
    for (const mountPoint of ['/etc/x', `${root}/../x`, `${root}/link/x`, 'relative']) {
      const e = await failure('CreateSandbox', {
        sandbox_id: 'p',
        storages: [{ driver: 'local', mount_point: mountPoint }],
      });
      expect([mountPoint, e.code]).toEqual([mountPoint, Code.INVALID_ARGUMENT]);
    }
  });

  it('creates the sandbox with its emptyDir', async () => {
    await call('CreateSandbox', {
      sandbox_id: 'pod-0',
      hostname: 'pod-0',
      storages: [{ driver: 'local', mount_point: join(root, 'sandbox/local/cache'), options: ['mode=0750'] }],
    });
    expect((await stat(join(root, 'sandbox/local/cache'))).mode & 0o7777).toBe(0o750);
    expect((await failure('CreateSandbox', { sandbox_id: 'pod-1' })).code).toBe(Code.ALREADY_EXISTS);
  });

  it('refuses container requests that escape the roots or that it does not support, and leaves nothing behind', async () => {
    const good = kataSpec(['/app'], join(root, 'images/app/rootfs'));
    const cases: [string, Decoded, number, RegExp][] = [
      ['bad id', { container_id: '../../etc', OCI: good }, Code.INVALID_ARGUMENT, /invalid container id/],
      ['no spec', { container_id: 'c' }, Code.INVALID_ARGUMENT, /without an OCI spec/],
      [
        'root outside',
        { container_id: 'c', OCI: { ...good, Root: { Path: '/' } } },
        Code.INVALID_ARGUMENT,
        /container root "\/" is not below/,
      ],
      [
        'root through a link',
        { container_id: 'c', OCI: { ...good, Root: { Path: `${root}/link` } } },
        Code.INVALID_ARGUMENT,
        /symbolic link/,
      ],
      [
        'bind mount source outside',
        {
          container_id: 'c',
          OCI: kataSpec(['/app'], join(root, 'images/app/rootfs'), {
            mounts: [{ destination: '/host', source: '/etc', type: 'bind', options: ['rbind'] }],
          }),
        },
        Code.INVALID_ARGUMENT,
        /source of mount "\/host"/,
      ],
      [
        'a guest device mounted',
        {
          container_id: 'c',
          OCI: kataSpec(['/app'], join(root, 'images/app/rootfs'), {
            mounts: [{ destination: '/disk', source: '/dev/vda1', type: 'ext4', options: [] }],
          }),
        },
        Code.INVALID_ARGUMENT,
        /mount "\/disk" of type "ext4" names the guest path "\/dev\/vda1"/,
      ],
      [
        'hooks',
        { container_id: 'c', OCI: { ...good, Hooks: { Prestart: [{ Path: '/bin/sh' }] } } },
        Code.INVALID_ARGUMENT,
        /hooks are not accepted/,
      ],
      [
        'virtio-fs storage',
        { container_id: 'c', OCI: good, storages: [{ driver: 'virtio-fs', mount_point: join(root, 'c') }] },
        Code.UNIMPLEMENTED,
        /storage driver "virtio-fs"/,
      ],
      [
        'bind storage from outside',
        {
          container_id: 'c',
          OCI: good,
          storages: [{ driver: 'bind', source: '/etc', mount_point: join(root, 'c/rootfs') }],
        },
        Code.INVALID_ARGUMENT,
        /storage source "\/etc" is not below/,
      ],
    ];
    for (const [what, req, code, message] of cases) {
      const e = await failure('CreateContainer', req);
      expect([what, e.code]).toEqual([what, code]);
      expect(e.message).toMatch(message);
    }
    // A refused request left no bundle: the same id is still free.
    await call('CreateContainer', {
      container_id: 'c',
      OCI: good,
      storages: [{ driver: 'local', mount_point: join(root, 'sandbox/local/c-tmp') }],
    });
    const config = JSON.parse(
      await readFile(join(running.agent.stateDir, 'containers/c/config.json'), 'utf8'),
    );
    // The checked root, bound into the bundle: runc never gets the path the host named.
    const bundle = join(await realpath(join(running.agent.stateDir, 'containers')), 'c');
    expect(config.root).toEqual({ path: join(bundle, 'rootfs'), readonly: true });
    expect(config.process.args).toEqual(['/app']);
    expect(config.linux.namespaces).toEqual([
      { type: 'pid' },
      { type: 'ipc' },
      { type: 'uts' },
      { type: 'mount' },
    ]);
    expect(config.linux.cgroupsPath).toBe('/sandbox-agent/pod-0/c');
    expect((await failure('CreateContainer', { container_id: 'c', OCI: good })).code).toBe(
      Code.ALREADY_EXISTS,
    );
  });

  it("never mounts, replaces or removes the agent's own socket, even below its root", async () => {
    const sock = join(root, 'agent.sock');
    const good = kataSpec(['/app'], join(root, 'images/app/rootfs'));
    const cases: [string, Decoded][] = [
      [
        'bind mount of the socket',
        {
          container_id: 'c2',
          OCI: kataSpec(['/app'], join(root, 'images/app/rootfs'), {
            mounts: [{ destination: '/agent.sock', source: sock, type: 'bind', options: ['rbind'] }],
          }),
        },
      ],
      [
        'bind storage of the socket',
        {
          container_id: 'c2',
          OCI: good,
          storages: [{ driver: 'bind', source: sock, mount_point: join(root, 'c2/agent.sock') }],
        },
      ],
      [
        'emptyDir on the socket',
        { container_id: 'c2', OCI: good, storages: [{ driver: 'local', mount_point: sock }] },
      ],
      [
        'image bundle on the socket',
        {
          container_id: 'agent.sock',
          OCI: kataSpec(['/app'], join(root, 'agent.sock/rootfs')),
          storages: [
            {
              driver: 'image_guest_pull',
              source: 'registry.example/app:1',
              mount_point: join(root, 'c2/rootfs'),
              driver_options: ['image_guest_pull={"metadata":{}}'],
            },
          ],
        },
      ],
    ];
    for (const [what, req] of cases) {
      const e = await failure('CreateContainer', req);
      expect([what, e.code, e.message]).toEqual([
        what,
        Code.INVALID_ARGUMENT,
        expect.stringMatching(/is or holds the agent's own/),
      ]);
    }
    // Still there, still answering.
    expect((await stat(sock)).isSocket()).toBe(true);
    const other = await TtrpcClient.connect({ path: sock });
    try {
      expect(
        codec('HealthCheckResponse').decode(await other.call('grpc.Health', 'Check', new Uint8Array(0)))
          .status,
      ).toBe(1);
    } finally {
      other.close();
    }
  });

  it('shares a storage two containers name, and refuses the same mount point under another driver', async () => {
    const spec = kataSpec(['/app'], join(root, 'images/app/rootfs'));
    const shared = {
      driver: 'local',
      mount_point: join(root, 'sandbox/local/shared'),
      options: ['mode=0700'],
    };
    await call('CreateContainer', { container_id: 's1', OCI: spec, storages: [shared] });
    await writeFile(join(root, 'sandbox/local/shared/kept'), 'written by s1');
    await call('CreateContainer', { container_id: 's2', OCI: spec, storages: [shared] });
    expect(running.agent.storagesInUse.get(join(root, 'sandbox/local/shared'))).toBe(2);
    const clash = await failure('CreateContainer', {
      container_id: 's3',
      OCI: spec,
      storages: [
        { driver: 'bind', source: join(root, 'images/app/rootfs'), mount_point: shared.mount_point },
      ],
    });
    expect([clash.code, clash.message]).toEqual([
      Code.INVALID_ARGUMENT,
      `storage mount point ${JSON.stringify(shared.mount_point)} is already set up by the "local" driver`,
    ]);
    await call('RemoveContainer', { container_id: 's1' });
    expect(await readFile(join(root, 'sandbox/local/shared/kept'), 'utf8')).toBe('written by s1');
    await call('RemoveContainer', { container_id: 's2' });
    await expect(stat(join(root, 'sandbox/local/shared'))).rejects.toThrow(/ENOENT/);
    expect(running.agent.storagesInUse.has(join(root, 'sandbox/local/shared'))).toBe(false);
  });

  it('pulls an image_guest_pull rootfs through the data hub into <root>/<container id>', async () => {
    await call('CreateContainer', {
      container_id: 'pulled',
      OCI: kataSpec(['/app'], join(root, 'pulled/rootfs')),
      storages: [
        {
          driver: 'image_guest_pull',
          source: 'registry.example/app:1',
          mount_point: join(root, 'pulled/rootfs'),
          driver_options: ['image_guest_pull={"metadata":{}}'],
        },
      ],
    });
    expect(pulls).toEqual([['registry.example/app:1', join(root, 'pulled')]]);
    await call('RemoveContainer', { container_id: 'pulled' });
    await expect(stat(join(root, 'pulled'))).rejects.toThrow(/ENOENT/);
  });

  it("takes the sandbox container's rootfs from the guest's pause bundle, not from a pull", async () => {
    const before = pulls.length;
    await call('CreateContainer', {
      container_id: 'pause',
      OCI: kataSpec(['/pause'], join(root, 'pause/rootfs')),
      storages: [
        {
          driver: 'image_guest_pull',
          source: 'registry.k8s.io/pause:3.10',
          mount_point: join(root, 'pause/rootfs'),
          driver_options: ['image_guest_pull={"metadata":{"io.kubernetes.cri.container-type":"sandbox"}}'],
        },
      ],
    });
    expect(pulls.length).toBe(before);
    expect(await readFile(join(root, 'pause/rootfs/pause'), 'utf8')).toBe('the pause program');
    await call('RemoveContainer', { container_id: 'pause' });
    await expect(stat(join(root, 'pause'))).rejects.toThrow(/ENOENT/);
  });

  it('answers for unknown containers and processes as kata does', async () => {
    const unknown = await failure('ReadStdout', { container_id: 'nope', len: 10 });
    expect([unknown.code, unknown.message]).toEqual([Code.INVALID_ARGUMENT, 'Invalid container id "nope"']);
    const exec = await failure('WaitProcess', { container_id: 'c', exec_id: 'e1' });
    expect(exec.code).toBe(Code.NOT_FOUND);
    expect((await failure('StartContainer', { container_id: 'nope' })).code).toBe(Code.INVALID_ARGUMENT);
  });

  it('ends a container that was never started at SIGKILL or SIGTERM, as if its waiting process were killed', async () => {
    await call('CreateContainer', {
      container_id: 'never',
      OCI: kataSpec(['/app'], join(root, 'images/app/rootfs')),
    });
    const hup = await failure('SignalProcess', { container_id: 'never', signal: 1 });
    expect([hup.code, hup.message]).toEqual([
      Code.FAILED_PRECONDITION,
      'process init of never has not started',
    ]);
    const waited = call('WaitProcess', { container_id: 'never' }, 'WaitProcessResponse');
    await call('SignalProcess', { container_id: 'never', signal: 9 });
    expect((await waited).status).toBe(137);
    expect(
      (await call('ReadStdout', { container_id: 'never', len: 10 }, 'ReadStreamResponse')).data.length,
    ).toBe(0);
    expect((await failure('StartContainer', { container_id: 'never' })).code).toBe(Code.FAILED_PRECONDITION);
    await call('RemoveContainer', { container_id: 'never' });
  });

  it('removes what it made at RemoveContainer and DestroySandbox', async () => {
    await call('RemoveContainer', { container_id: 'c' });
    await expect(stat(join(running.agent.stateDir, 'containers/c'))).rejects.toThrow(/ENOENT/);
    await expect(stat(join(root, 'sandbox/local/c-tmp'))).rejects.toThrow(/ENOENT/);
    await call('DestroySandbox');
    await expect(stat(join(root, 'sandbox/local/cache'))).rejects.toThrow(/ENOENT/);
    expect(running.agent.sandboxId).toBeUndefined();
  });
});

describe('listen addresses', () => {
  it("recognises kata's vsock address and says why it cannot be used", () => {
    expect(() => parseListenAddress('vsock://-1:1024')).toThrow(/Node\.js has no AF_VSOCK sockets/);
    expect(() => parseListenAddress('vsock://x')).toThrow(/expected vsock:\/\/CID:PORT/);
  });
  it('takes unix and tcp addresses', () => {
    expect(parseListenAddress('unix:///run/kata-containers/agent.sock')).toEqual({
      path: '/run/kata-containers/agent.sock',
    });
    expect(parseListenAddress('tcp://127.0.0.1:1024')).toEqual({ host: '127.0.0.1', port: 1024 });
  });
});

describe('a restarted agent', () => {
  it('removes the containers an earlier run left in its state directory', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      await mkdir(join(dir, 'state/containers/old'), { recursive: true });
      await writeFile(join(dir, 'state/containers/old/config.json'), '{}');
      const warnings: string[] = [];
      const agent = await startSandboxAgent({
        listen: [],
        roots: [join(dir, 'kata')],
        stateDir: join(dir, 'state'),
        logger: { info() {}, warn: (_o, msg) => void warnings.push(msg) },
      });
      await expect(stat(join(dir, 'state/containers/old'))).rejects.toThrow(/ENOENT/);
      expect(warnings).toContain('removed a container left by an earlier run');
      await agent.close();
    } finally {
      await cleanup();
    }
  });
});
