// The container's root and its bind-mount sources against a container that shares a directory with it
// (an emptyDir): a component swapped for a link to a directory outside the roots after CreateContainer
// checked the paths, before runc uses them at StartContainer, must not change what the container sees.
// Nothing the agent mounts for a container may outlive it: RemoveContainer, DestroySandbox, a failed
// CreateContainer and an agent started again over a left-over bundle each leave nothing mounted.
// Root and runc only (real mounts and containers).
import { mkdir, readdir, readFile, rename, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AGENT_METHODS } from '@broker/agent-policy';
import { Code, TtrpcClient, type TtrpcError } from '@broker/ttrpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxAgent } from './agent.js';
import { codec, type Decoded } from './proto.js';
import { type RunningAgent, startSandboxAgent } from './server.js';
import { AGENT_SERVICE } from './service.js';
import { buildHelloRootfs, CAN_RUN_CONTAINERS, kataSpec, tempDir } from './testing/index.js';

/** Mount points (as /proc/self/mountinfo spells them) at or below `dir`. */
async function mountsBelow(dir: string): Promise<string[]> {
  const decode = (s: string) =>
    s.replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(Number.parseInt(o, 8)));
  return (await readFile('/proc/self/mountinfo', 'utf8'))
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => decode(l.split(' ')[4]!))
    .filter((at) => at === dir || at.startsWith(`${dir}/`));
}

/** What a container sharing `path`'s parent can do: move the directory or file away and leave a link. */
async function swap(path: string, to: string): Promise<void> {
  await rename(path, `${path}.moved`);
  await symlink(to, path);
}

const bind = (destination: string, source: string) => ({
  destination,
  source,
  type: 'bind',
  options: ['rbind', 'ro'],
});

describe.skipIf(!CAN_RUN_CONTAINERS)(
  'container paths raced by a link between CreateContainer and runc',
  () => {
    let dir: string;
    let cleanup: () => Promise<void>;
    let running: RunningAgent;
    let client: TtrpcClient;
    let root: string;
    let stateDir: string;
    /** The pod's emptyDir: every container of the pod may write into it. */
    let shared: string;
    let outside: string;
    let image: string;
    /** Run by the agent once CreateContainer holds the paths, before it mounts them. */
    let afterHold: (() => Promise<void>) | undefined;

    const call = async (rpc: string, req: Decoded = {}, response = 'Empty'): Promise<Decoded> =>
      codec(response).decode(await client.call(AGENT_SERVICE, rpc, codec(AGENT_METHODS[rpc]!).encode(req)));
    const readAll = async (cid: string, eid = ''): Promise<string> => {
      let out = '';
      for (;;) {
        const r = await call(
          'ReadStdout',
          { container_id: cid, exec_id: eid, len: 65536 },
          'ReadStreamResponse',
        );
        if (r.data.length === 0) return out;
        out += Buffer.from(r.data).toString();
      }
    };
    const wait = async (cid: string, eid = ''): Promise<number> =>
      (await call('WaitProcess', { container_id: cid, exec_id: eid }, 'WaitProcessResponse')).status;
    const exec = async (cid: string, eid: string, args: string[]): Promise<string> => {
      await call('ExecProcess', {
        container_id: cid,
        exec_id: eid,
        process: { Args: args, Env: ['PATH=/'], Cwd: '/', User: {} },
      });
      const out = await readAll(cid, eid);
      expect(await wait(cid, eid)).toBe(0);
      return out;
    };
    const containers = () => join(stateDir, 'containers');

    beforeAll(async () => {
      ({ dir, cleanup } = await tempDir());
      root = join(dir, 'kata');
      stateDir = join(dir, 'state');
      await mkdir(root, { recursive: true });
      running = await startSandboxAgent({
        listen: [{ path: join(dir, 'agent.sock') }],
        roots: [root],
        stateDir,
        afterContainerHold: () => afterHold?.(),
      });
      root = running.agent.roots[0]!;
      image = await buildHelloRootfs(join(root, 'images/hello/rootfs'));
      client = await TtrpcClient.connect({ path: join(dir, 'agent.sock') });
      shared = join(root, 'sandbox/local/cache');
      await call('CreateSandbox', {
        sandbox_id: 'pod-m',
        hostname: 'pod-m',
        storages: [{ driver: 'local', source: 'local', fstype: 'local', mount_point: shared }],
      });
      // What a link swapped in would point at: the same layout, outside the roots.
      outside = join(dir, 'outside');
      await buildHelloRootfs(join(outside, 'app/rootfs'));
      await writeFile(join(outside, 'app/rootfs/marker'), 'outside');
      await mkdir(join(outside, 'data'));
      await writeFile(join(outside, 'data/marker'), 'outside');
      await mkdir(join(outside, 'conf'));
      await writeFile(join(outside, 'conf/hosts'), 'outside hosts');
    }, 120_000);

    afterAll(async () => {
      client?.close();
      await running?.close();
      expect(await mountsBelow(dir)).toEqual([]);
      await cleanup?.();
    });

    it('runs the container from the root that was checked when a component is swapped before StartContainer', async () => {
      const rootfs = await buildHelloRootfs(join(shared, 'app1/rootfs'));
      await writeFile(join(rootfs, 'marker'), 'inside');
      await call('CreateContainer', {
        container_id: 'root-swap',
        OCI: kataSpec(['/hello', 'root-swap', 'show', '/marker'], rootfs),
      });
      await swap(join(shared, 'app1'), join(outside, 'app'));
      await call('StartContainer', { container_id: 'root-swap' });
      expect(await readAll('root-swap')).toBe('hello from root-swap\ninside');
      expect(await wait('root-swap')).toBe(0);
      await call('RemoveContainer', { container_id: 'root-swap' });
      expect(await mountsBelow(containers())).toEqual([]);
      expect(await readdir(containers())).toEqual([]);
    });

    it('mounts the bind sources that were checked when they are swapped before StartContainer', async () => {
      await mkdir(join(shared, 'data2'));
      await writeFile(join(shared, 'data2/marker'), 'inside');
      await mkdir(join(shared, 'conf2'));
      await writeFile(join(shared, 'conf2/hosts'), 'inside hosts');
      await call('CreateContainer', {
        container_id: 'bind-swap',
        OCI: kataSpec(['/hello', 'bind-swap', 'sleep'], image, {
          mounts: [bind('/scratch', join(shared, 'data2')), bind('/etc/hosts', join(shared, 'conf2/hosts'))],
        }),
      });
      // The directory source itself, and the directory holding the file source.
      await swap(join(shared, 'data2'), join(outside, 'data'));
      await swap(join(shared, 'conf2'), join(outside, 'conf'));
      await call('StartContainer', { container_id: 'bind-swap' });
      expect(await exec('bind-swap', 'dir', ['/hello', 'dir', 'show', '/scratch/marker'])).toBe(
        'hello from dir\ninside',
      );
      expect(await exec('bind-swap', 'file', ['/hello', 'file', 'show', '/etc/hosts'])).toBe(
        'hello from file\ninside hosts',
      );
      await call('RemoveContainer', { container_id: 'bind-swap' });
      expect(await mountsBelow(containers())).toEqual([]);
      expect(await readdir(containers())).toEqual([]);
      // The sources are untouched by the removal.
      expect(await readFile(join(shared, 'data2.moved/marker'), 'utf8')).toBe('inside');
      expect(await readFile(join(shared, 'conf2.moved/hosts'), 'utf8')).toBe('inside hosts');
    });

    it('mounts what it held when the root and a source are swapped inside CreateContainer', async () => {
      const rootfs = await buildHelloRootfs(join(shared, 'app3/rootfs'));
      await writeFile(join(rootfs, 'marker'), 'inside');
      await mkdir(join(shared, 'data3'));
      await writeFile(join(shared, 'data3/marker'), 'inside');
      let swapped = false;
      afterHold = async () => {
        await swap(join(shared, 'app3'), join(outside, 'app'));
        await swap(join(shared, 'data3'), join(outside, 'data'));
        swapped = true;
      };
      try {
        await call('CreateContainer', {
          container_id: 'held-swap',
          OCI: kataSpec(['/hello', 'held-swap', 'sleep'], rootfs, {
            mounts: [bind('/scratch', join(shared, 'data3'))],
          }),
        });
      } finally {
        afterHold = undefined;
      }
      expect(swapped).toBe(true);
      await call('StartContainer', { container_id: 'held-swap' });
      expect(await exec('held-swap', 'root', ['/hello', 'root', 'show', '/marker'])).toBe(
        'hello from root\ninside',
      );
      expect(await exec('held-swap', 'dir', ['/hello', 'dir', 'show', '/scratch/marker'])).toBe(
        'hello from dir\ninside',
      );
      await call('RemoveContainer', { container_id: 'held-swap' });
      expect(await mountsBelow(containers())).toEqual([]);
    });

    it('leaves nothing mounted or behind when CreateContainer fails, before or after it mounted', async () => {
      await mkdir(join(shared, 'data4'));
      await symlink(outside, join(shared, 'link4'));
      // A source through a link: refused when held.
      const refused = (await call('CreateContainer', {
        container_id: 'refused',
        OCI: kataSpec(['/hello'], image, {
          mounts: [
            bind('/scratch', join(shared, 'data4')),
            bind('/etc/hosts', join(shared, 'link4/conf/hosts')),
          ],
        }),
      }).catch((e) => e)) as TtrpcError;
      expect(refused.code).toBe(Code.INVALID_ARGUMENT);
      expect(refused.message).toMatch(/symbolic link/);
      expect(await mountsBelow(containers())).toEqual([]);
      expect(await readdir(containers())).toEqual([]);

      // A failure once the root is mounted: the place for the sources in the bundle is taken.
      afterHold = () => writeFile(join(containers(), 'late', 'mounts'), '');
      let failed: TtrpcError;
      try {
        failed = (await call('CreateContainer', {
          container_id: 'late',
          OCI: kataSpec(['/hello'], image, { mounts: [bind('/scratch', join(shared, 'data4'))] }),
        }).catch((e) => e)) as TtrpcError;
      } finally {
        afterHold = undefined;
      }
      expect(failed.code).toBe(Code.INVALID_ARGUMENT);
      expect(failed.message).toMatch(/not a directory/);
      expect(await mountsBelow(containers())).toEqual([]);
      expect(await readdir(containers())).toEqual([]);
    });

    it('leaves nothing mounted after RemoveContainer of a container never started, and after DestroySandbox', async () => {
      await mkdir(join(shared, 'data5'));
      await writeFile(join(shared, 'data5/marker'), 'inside');
      const spec = (cid: string) =>
        kataSpec(['/hello', cid, 'sleep'], image, { mounts: [bind('/scratch', join(shared, 'data5'))] });
      await call('CreateContainer', { container_id: 'never', OCI: spec('never') });
      expect((await mountsBelow(join(containers(), 'never'))).length).toBe(2);
      await call('RemoveContainer', { container_id: 'never' });
      expect(await mountsBelow(containers())).toEqual([]);

      await call('CreateContainer', { container_id: 'left1', OCI: spec('left1') });
      await call('CreateContainer', { container_id: 'left2', OCI: spec('left2') });
      await call('StartContainer', { container_id: 'left2' });
      await call('DestroySandbox');
      expect(await mountsBelow(containers())).toEqual([]);
      expect(await readdir(containers())).toEqual([]);
      await call('CreateSandbox', {
        sandbox_id: 'pod-m2',
        storages: [{ driver: 'local', source: 'local', fstype: 'local', mount_point: shared }],
      });
    });

    it('unmounts a bundle left by an earlier run before removing it, never emptying what it showed', async () => {
      await mkdir(join(shared, 'data6'));
      await writeFile(join(shared, 'data6/keep'), 'keep me');
      await call('CreateContainer', {
        container_id: 'stale',
        OCI: kataSpec(['/hello'], image, { mounts: [bind('/scratch', join(shared, 'data6'))] }),
      });
      expect((await mountsBelow(join(containers(), 'stale'))).length).toBe(2);
      // The agent starts again on the same state directory (as after a crash): the bundle is stale.
      const again = new SandboxAgent({ roots: [root], stateDir });
      await again.init();
      expect(await mountsBelow(containers())).toEqual([]);
      expect(await readdir(containers())).toEqual([]);
      expect(await readFile(join(shared, 'data6/keep'), 'utf8')).toBe('keep me');
      expect((await stat(join(image, 'hello'))).isFile()).toBe(true);
      // The first agent's own removal finds its mounts already gone.
      await call('RemoveContainer', { container_id: 'stale' });
      expect(await mountsBelow(containers())).toEqual([]);
    });
  },
);
