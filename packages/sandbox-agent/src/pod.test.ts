// One pod as kata's runtime drives it, from the Go shim (containerd/ttrpc, gogo types generated from the
// agent's .proto text): the sandbox, its pause container from the guest's pause bundle, an init
// container and a main container whose images are pulled through a data hub on ttrpc, and an emptyDir
// (`local` storage) both containers name. The init container writes a key file into the emptyDir and
// exits; the init container is removed while the main one still holds the emptyDir; the main container
// reads the key. From inside the main container, the agent's socket and the data hub's cannot be
// reached. Root, runc and Go only.
import { cp, mkdir, readdir, stat, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { registerDataHubServices } from '@broker/guest-api';
import { TtrpcServer } from '@broker/ttrpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dataHubPuller, type RunningAgent, startSandboxAgent } from './server.js';
import {
  agentCall,
  buildGoShim,
  buildHelloRootfs,
  CAN_RUN_CONTAINERS,
  type CallResult,
  kataSpec,
  runGoScript,
  type ScriptCall,
  SKIP_GO,
  tempDir,
} from './testing/index.js';

const KEY = 'k3y-from-the-init-container';

/** The `image_guest_pull` storage kata's runtime sends for a container's image. */
function imageStorage(root: string, cid: string, image: string, type: 'sandbox' | 'container'): object {
  const volume = {
    metadata: { 'io.kubernetes.cri.container-type': type, 'io.kubernetes.cri.image-name': image },
  };
  return {
    driver: 'image_guest_pull',
    driver_options: [`image_guest_pull=${JSON.stringify(volume)}`],
    source: image,
    fstype: 'overlay',
    mount_point: join(root, cid, 'rootfs'),
  };
}

/** The emptyDir as kata's runtime sends it to each container that mounts it. */
function emptyDir(root: string): object {
  return {
    driver: 'local',
    source: 'local',
    fstype: 'local',
    options: ['mode=0777'],
    mount_point: join(root, 'sandbox/local/cache'),
  };
}

function failed(results: CallResult[]): [string, string][] {
  return results.filter((r) => r.error !== undefined).map((r) => [r.rpc, r.error!]);
}

describe.skipIf(!CAN_RUN_CONTAINERS || SKIP_GO)('a pod with an init container and an emptyDir', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let running: RunningAgent;
  let hub: TtrpcServer;
  let shim: string;
  let root: string;
  let socket: string;
  const hubSocket = () => join(dir, 'cdh.sock');
  const pulls: string[] = [];

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    shim = await buildGoShim();
    const images = join(dir, 'images/hello/rootfs');
    await buildHelloRootfs(images);
    await mkdir(join(images, 'cache'));
    // A data hub standing in for the CDH: a "pull" copies the hello rootfs into the bundle.
    hub = new TtrpcServer();
    registerDataHubServices(hub, {
      async pullImage(image, bundlePath) {
        pulls.push(image);
        await cp(images, join(bundlePath, 'rootfs'), { recursive: true });
        return 'sha256:00';
      },
    });
    await hub.listen({ path: hubSocket() });
    // The guest's pause bundle: the same static program, told to sleep.
    const pause = join(dir, 'pause_bundle');
    await buildHelloRootfs(join(pause, 'rootfs'));
    await writeFile(
      join(pause, 'config.json'),
      JSON.stringify({ process: { args: ['/hello', 'pause', 'sleep'] } }),
    );
    // As in the pod VM: the agent's socket is at the top of its root.
    const kata = join(dir, 'kata');
    await mkdir(kata, { recursive: true });
    socket = join(kata, 'agent.sock');
    running = await startSandboxAgent({
      listen: [{ path: socket }],
      roots: [kata],
      stateDir: join(dir, 'state'),
      pullImage: dataHubPuller(`unix://${hubSocket()}`),
      pauseBundle: pause,
      protectedPaths: [hubSocket()],
    });
    root = running.agent.roots[0]!;
  }, 600_000);

  afterAll(async () => {
    await running?.close();
    await hub?.close({ graceMs: 0 });
    await cleanup?.();
  });

  it("plays the runtime's calls: the init container's key file is read by the main container", async () => {
    const cache = {
      destination: '/cache',
      source: join(root, 'sandbox/local/cache'),
      type: 'bind',
      options: ['rbind', 'rw'],
    };
    const spec = (cid: string, args: string[], mounts: object[] = [cache]) => ({
      ...kataSpec(args, join(root, cid, 'rootfs'), { mounts }),
      Annotations: { 'io.kubernetes.cri.container-type': cid === 'pause' ? 'sandbox' : 'container' },
    });
    const container = (cid: string, image: string, args: string[], storages: object[]) =>
      agentCall('CreateContainer', {
        container_id: cid,
        exec_id: cid,
        storages: [imageStorage(root, cid, image, cid === 'pause' ? 'sandbox' : 'container'), ...storages],
        OCI: spec(cid, args, cid === 'pause' ? [] : [cache]),
      });
    const io = (cid: string) => ({ container_id: cid, exec_id: cid });
    const calls: ScriptCall[] = [
      {
        service: 'grpc.Health',
        rpc: 'Check',
        request_type: 'grpc.CheckRequest',
        response_type: 'grpc.HealthCheckResponse',
      },
      agentCall('GetGuestDetails', { mem_block_size: true, mem_hotplug_probe: true }),
      agentCall('CreateSandbox', { hostname: 'pod-1', sandbox_id: 'pod-1' }),
      container('pause', 'registry.k8s.io/pause:3.9', ['/hello', 'pause', 'sleep'], []),
      agentCall('StartContainer', { container_id: 'pause' }),
      // The init container: writes the key into the emptyDir, then exits.
      container(
        'init',
        'example.test/keygen:v1',
        ['/hello', 'init', 'write', '/cache/key', KEY],
        [emptyDir(root)],
      ),
      agentCall('StartContainer', { container_id: 'init' }),
      agentCall('ReadStdout', { ...io('init'), len: 4096 }, { read_to_end: true }),
      agentCall('WaitProcess', io('init')),
      // A container can leave a link to anywhere in the emptyDir: the host cannot mount through it.
      container(
        'linker',
        'example.test/keygen:v1',
        ['/hello', 'linker', 'symlink', '/', '/cache/escape'],
        [emptyDir(root)],
      ),
      agentCall('StartContainer', { container_id: 'linker' }),
      agentCall('WaitProcess', io('linker')),
      agentCall('RemoveContainer', { container_id: 'linker' }),
      agentCall('CreateContainer', {
        container_id: 'escaper',
        exec_id: 'escaper',
        storages: [imageStorage(root, 'escaper', 'example.test/app:v1', 'container')],
        OCI: spec(
          'escaper',
          ['/hello', 'escaper', 'show', '/host/etc/hostname'],
          [
            {
              destination: '/host',
              source: join(root, 'sandbox/local/cache/escape/etc'),
              type: 'bind',
              options: ['rbind'],
            },
          ],
        ),
      }),
      // The main container names the same emptyDir; the init container goes before it starts.
      container('app', 'example.test/app:v1', ['/hello', 'app', 'show', '/cache/key'], [emptyDir(root)]),
      agentCall('RemoveContainer', { container_id: 'init' }),
      agentCall('StartContainer', { container_id: 'app' }),
      agentCall('ReadStdout', { ...io('app'), len: 4096 }, { read_to_end: true }),
      agentCall('WaitProcess', io('app')),
      // A second process of the main container tries the agent's socket and the data hub's.
      agentCall('CreateContainer', {
        container_id: 'probe',
        exec_id: 'probe',
        storages: [imageStorage(root, 'probe', 'example.test/app:v1', 'container'), emptyDir(root)],
        OCI: spec('probe', ['/hello', 'probe', 'connect', socket, hubSocket()]),
      }),
      agentCall('StartContainer', { container_id: 'probe' }),
      agentCall('ReadStdout', { ...io('probe'), len: 4096 }, { read_to_end: true }),
      agentCall('WaitProcess', io('probe')),
      agentCall('RemoveContainer', { container_id: 'probe' }),
      agentCall('RemoveContainer', { container_id: 'app' }),
      agentCall('SignalProcess', { ...io('pause'), signal: 9 }),
      agentCall('WaitProcess', io('pause')),
      agentCall('RemoveContainer', { container_id: 'pause' }),
      agentCall('DestroySandbox'),
    ];
    const results = await runGoScript(shim, socket, calls);
    // Only the mount through the container's link was refused, and it left nothing behind.
    expect(failed(results)).toEqual([
      [
        'CreateContainer',
        expect.stringMatching(/InvalidArgument.*source of mount "\/host" .* goes through a symbolic link/),
      ],
    ]);
    const at = (rpc: string, n = 0) => results.filter((r) => r.rpc === rpc)[n]!;
    expect(at('Check').response).toEqual({ status: 'SERVING' });
    expect(at('ReadStdout', 0).data).toBe('hello from init\n');
    expect(at('WaitProcess', 0).response).toEqual({ status: 0 });
    // The key the init container wrote, read by the main container after the init container was removed.
    expect(at('ReadStdout', 1).data).toBe(`hello from app\n${KEY}`);
    expect(at('WaitProcess', 1).response).toEqual({ status: 0 });
    expect(at('WaitProcess', 2).response).toEqual({ status: 0 });
    // Neither socket exists in a container's view.
    expect(at('ReadStdout', 2).data).toBe(`hello from probe\n${socket}: ENOENT\n${hubSocket()}: ENOENT\n`);
    expect(at('WaitProcess', 4).response).toEqual({ status: 137 });
    expect(pulls).toEqual([
      'example.test/keygen:v1',
      'example.test/keygen:v1',
      'example.test/app:v1',
      'example.test/app:v1',
      'example.test/app:v1',
    ]);
    // Both sockets answer outside the containers.
    for (const path of [socket, hubSocket()]) {
      await new Promise<void>((resolve, reject) => {
        const s = connect(path, () => {
          s.end();
          resolve();
        });
        s.on('error', reject);
      });
    }
    // Everything is gone: the emptyDir, the bundles, the pulled images.
    expect(running.agent.storagesInUse.size).toBe(0);
    await expect(stat(join(root, 'sandbox/local/cache'))).rejects.toThrow(/ENOENT/);
    await expect(readdir(join(running.agent.stateDir, 'containers'))).resolves.toEqual([]);
    expect((await readdir(root)).sort()).toEqual(['agent.sock', 'sandbox']);
  }, 300_000);
});
