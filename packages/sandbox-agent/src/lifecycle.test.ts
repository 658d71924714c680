// Containers run by Debian's runc through the agent's RPCs: exec, signals, stdin, bounded output, a
// failed start. Root only (runc needs it); the Go shim's pod sequence is in interop.test.ts.
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { AGENT_METHODS } from '@broker/agent-policy';
import { Code, TtrpcClient, type TtrpcError } from '@broker/ttrpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codec, type Decoded } from './proto.js';
import { type RunningAgent, startSandboxAgent } from './server.js';
import { AGENT_SERVICE } from './service.js';
import { buildHelloRootfs, CAN_RUN_CONTAINERS, kataSpec, tempDir } from './testing/index.js';

const OUTPUT_LIMIT = 64 * 1024;

describe.skipIf(!CAN_RUN_CONTAINERS)('containers run by runc', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let running: RunningAgent;
  let client: TtrpcClient;
  let rootfs: string;

  const call = async (rpc: string, req: Decoded = {}, response = 'Empty'): Promise<Decoded> =>
    codec(response).decode(await client.call(AGENT_SERVICE, rpc, codec(AGENT_METHODS[rpc]!).encode(req)));
  const read = async (cid: string, eid = '', stream = 'ReadStdout', len = 65536): Promise<Buffer> =>
    Buffer.from((await call(stream, { container_id: cid, exec_id: eid, len }, 'ReadStreamResponse')).data);
  const readAll = async (cid: string, eid = '', stream = 'ReadStdout'): Promise<string> => {
    let out = '';
    for (;;) {
      const chunk = await read(cid, eid, stream);
      if (chunk.length === 0) return out;
      out += chunk.toString();
    }
  };
  /** Output until it matches `pattern` or the stream ends, however the process's writes were split. */
  const readUntil = async (cid: string, pattern: RegExp, eid = ''): Promise<string> => {
    let out = '';
    while (!pattern.test(out)) {
      const chunk = await read(cid, eid);
      if (chunk.length === 0) break; // ended without it: the caller's expectation says what is missing
      out += chunk.toString();
    }
    return out;
  };
  /**
   * A terminal's output with each line ending as `\r\n`. runc turns off the `\n` to `\r\n` translation
   * of the container's terminal (its own terminal translates) only once it has received it, so what the
   * process writes in its first moments may end its lines with `\r\r\n`.
   */
  const crlf = (text: string) => text.replace(/\r+\n/g, '\r\n');
  const wait = async (cid: string, eid = ''): Promise<number> =>
    (await call('WaitProcess', { container_id: cid, exec_id: eid }, 'WaitProcessResponse')).status;
  const create = (cid: string, args: string[]) =>
    call('CreateContainer', { container_id: cid, OCI: kataSpec(args, rootfs) });

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    const root = join(dir, 'kata');
    await mkdir(root, { recursive: true });
    running = await startSandboxAgent({
      listen: [{ path: join(dir, 'agent.sock') }],
      roots: [root],
      stateDir: join(dir, 'state'),
      outputLimit: OUTPUT_LIMIT,
    });
    rootfs = await buildHelloRootfs(join(running.agent.roots[0]!, 'images/hello/rootfs'));
    client = await TtrpcClient.connect({ path: join(dir, 'agent.sock') });
    await call('CreateSandbox', { sandbox_id: 'pod-1', hostname: 'pod-1' });
  }, 120_000);

  afterAll(async () => {
    client?.close();
    await running?.close();
    await cleanup?.();
  });

  it('runs an exec process beside the first one, pauses, resumes, updates and reports statistics, and stops the first with SignalProcess', async () => {
    await create('sleeper', ['/hello', 'sleeper', 'sleep']);
    await call('StartContainer', { container_id: 'sleeper' });
    expect((await read('sleeper')).toString()).toBe('hello from sleeper\n');
    await call('ExecProcess', {
      container_id: 'sleeper',
      exec_id: 'e1',
      process: { Args: ['/hello', 'exec', '3'], Env: ['PATH=/'], Cwd: '/', User: {} },
    });
    expect(await readAll('sleeper', 'e1')).toBe('hello from exec\n');
    expect(await readAll('sleeper', 'e1', 'ReadStderr')).toBe('to stderr\n');
    expect(await wait('sleeper', 'e1')).toBe(3);
    // Waited for, the exec is gone (as waitpid reaps).
    const gone = (await call('WaitProcess', { container_id: 'sleeper', exec_id: 'e1' }).catch(
      (e) => e,
    )) as TtrpcError;
    expect(gone.code).toBe(Code.NOT_FOUND);
    const runcState = async () =>
      JSON.parse(await running.agent.runc.command(['state', 'sleeper'], 'state')).status;
    await call('PauseContainer', { container_id: 'sleeper' });
    expect(await runcState()).toBe('paused');
    await call('ResumeContainer', { container_id: 'sleeper' });
    expect(await runcState()).toBe('running');
    // UpdateContainer: the pids limit lands in the container's cgroup (v1 or v2 layout).
    await call('UpdateContainer', { container_id: 'sleeper', resources: { Pids: { Limit: 42 } } });
    const pidsMax = await Promise.any(
      [
        '/sys/fs/cgroup/pids/sandbox-agent/pod-1/sleeper/pids.max',
        '/sys/fs/cgroup/sandbox-agent/pod-1/sleeper/pids.max',
      ].map((f) => readFile(f, 'utf8')),
    );
    expect(pidsMax.trim()).toBe('42');
    const stats = (await call('StatsContainer', { container_id: 'sleeper' }, 'StatsContainerResponse'))
      .cgroup_stats;
    expect(stats.pids_stats.current).toBe(1n); // the sleeper itself; the exec has gone
    expect(stats.pids_stats.limit).toBe(42n);
    expect(stats.memory_stats.usage.usage).toBeGreaterThan(0n);
    expect(stats.cpu_stats.cpu_usage.total_usage).toBeGreaterThan(0n);
    // SIGKILL: the process is PID 1 of its namespace, where signals it does not handle are ignored.
    await call('SignalProcess', { container_id: 'sleeper', signal: 9 });
    expect(await wait('sleeper')).toBe(128 + 9);
    const again = (await call('StartContainer', { container_id: 'sleeper' }).catch((e) => e)) as TtrpcError;
    expect(again.code).toBe(Code.FAILED_PRECONDITION);
    await call('RemoveContainer', { container_id: 'sleeper' });
  });

  it('feeds WriteStdin to the process and ends its input at CloseStdin', async () => {
    // As kata's runtime does, the container's own process is named by the container id as exec id.
    await call('CreateContainer', {
      container_id: 'cat',
      exec_id: 'cat',
      OCI: kataSpec(['/hello', 'cat', 'cat'], rootfs),
    });
    await call('StartContainer', { container_id: 'cat' });
    const clash = (await call('ExecProcess', {
      container_id: 'cat',
      exec_id: 'cat',
      process: { Args: ['/hello'], Cwd: '/' },
    }).catch((e) => e)) as TtrpcError;
    expect(clash.code).toBe(Code.ALREADY_EXISTS);
    const written = await call(
      'WriteStdin',
      { container_id: 'cat', exec_id: 'cat', data: Buffer.from('typed in\n') },
      'WriteStreamResponse',
    );
    expect(written.len).toBe(9);
    await call('CloseStdin', { container_id: 'cat', exec_id: 'cat' });
    expect(await readAll('cat', 'cat')).toBe('hello from cat\ntyped in\n');
    expect(await wait('cat', 'cat')).toBe(0);
    expect(await wait('cat')).toBe(0); // still there: the container's process is not reaped by a wait
    await call('RemoveContainer', { container_id: 'cat' });
  });

  it('keeps at most the output limit of unread output, holding the process back until it is read', async () => {
    await create('flood', ['/hello', 'flood', 'flood']);
    await call('StartContainer', { container_id: 'flood' });
    await new Promise((r) => setTimeout(r, 300));
    // 4 MiB written, nothing read: the process is blocked on a full pipe, not exited.
    const early = await Promise.race([
      wait('flood').then(() => 'exited'),
      new Promise((r) => setTimeout(() => r('blocked'), 200)),
    ]);
    expect(early).toBe('blocked');
    let total = 0;
    let largest = 0;
    for (;;) {
      const chunk = await read('flood', '', 'ReadStdout', 1 << 20);
      if (chunk.length === 0) break;
      largest = Math.max(largest, chunk.length);
      total += chunk.length;
    }
    expect(total).toBe('hello from flood\n'.length + 64 * 65536);
    // No read ever got more than the buffer held: the limit plus the pipe read that crossed it.
    expect(largest).toBeLessThanOrEqual(OUTPUT_LIMIT + 65536);
    expect(await wait('flood')).toBe(0);
    await call('RemoveContainer', { container_id: 'flood' });
  });

  it('survives a container that crashes and one that floods its output forever, nobody reading', async () => {
    await create('crasher', ['/hello', 'crasher', 'crash']);
    await call('StartContainer', { container_id: 'crasher' });
    expect(await wait('crasher')).toBe(128 + 11); // SIGSEGV
    expect(await readAll('crasher')).toBe('hello from crasher\n');
    await call('RemoveContainer', { container_id: 'crasher' });

    await create('firehose', ['/hello', 'firehose', 'flood-forever']);
    await call('StartContainer', { container_id: 'firehose' });
    const rssBefore = process.memoryUsage().rss;
    for (let i = 0; i < 5; i++) {
      await new Promise((r) => setTimeout(r, 200));
      // Whatever piled up since the last read is at most the buffer plus the pipe read that crossed it.
      const chunk = await read('firehose', '', 'ReadStdout', 64 << 20);
      expect(chunk.length).toBeGreaterThan(0);
      expect(chunk.length).toBeLessThanOrEqual(OUTPUT_LIMIT + 65536);
    }
    // The agent answers everything else meanwhile, and ends the flood at RemoveContainer.
    await call('CreateContainer', {
      container_id: 'bystander',
      OCI: kataSpec(['/hello', 'bystander'], rootfs),
    });
    await call('StartContainer', { container_id: 'bystander' });
    expect(await readAll('bystander')).toBe('hello from bystander\n');
    expect(await wait('bystander')).toBe(0);
    const flooding = wait('firehose');
    await call('RemoveContainer', { container_id: 'firehose' });
    expect(await flooding).toBe(128 + 9);
    await call('RemoveContainer', { container_id: 'bystander' });
    // Not a threshold on time: the agent held at most a few buffers of the flood, far from its size.
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(64 << 20);
  });

  it('gives a terminal process a terminal, and TtyWinResize resizes it; an exec gets one too', async () => {
    const spec = kataSpec(['/hello', 'tty', 'winsize', '41', '132'], rootfs) as {
      Process: Record<string, unknown>;
    };
    spec.Process.Terminal = true;
    await call('CreateContainer', { container_id: 'tty', OCI: spec });
    await call('StartContainer', { container_id: 'tty' });
    // A terminal turns \n into \r\n, and stderr goes to it as well.
    let seen = crlf(await readUntil('tty', /tty=1\r*\n/));
    expect(seen).toBe('hello from tty\r\nto stderr\r\ntty=1\r\n');
    await call('TtyWinResize', { container_id: 'tty', row: 41, column: 132 });
    // stty sets the rows, then the columns: the process may see the rows first.
    expect(crlf(await readAll('tty'))).toMatch(/^(rows=41 cols=0\r\n)?rows=41 cols=132\r\n$/);
    expect(await wait('tty')).toBe(4);
    const none = await call('TtyWinResize', { container_id: 'tty', row: 1, column: 1 }).catch((e) => e);
    expect((none as TtrpcError).code).toBe(Code.FAILED_PRECONDITION);
    await call('RemoveContainer', { container_id: 'tty' });

    // Input through the terminal, and its end at CloseStdin.
    const catSpec = kataSpec(['/hello', 'ttycat', 'cat', '3'], rootfs) as {
      Process: Record<string, unknown>;
    };
    catSpec.Process.Terminal = true;
    await call('CreateContainer', { container_id: 'ttycat', OCI: catSpec });
    await call('StartContainer', { container_id: 'ttycat' });
    seen = crlf(await readUntil('ttycat', /to stderr\r*\n/));
    expect(seen).toBe('hello from ttycat\r\nto stderr\r\n');
    await call('WriteStdin', { container_id: 'ttycat', data: Buffer.from('typed\n') }, 'WriteStreamResponse');
    await call('CloseStdin', { container_id: 'ttycat' });
    // The terminal echoes the line, then the program copies it.
    expect(crlf(await readAll('ttycat'))).toBe('typed\r\ntyped\r\n');
    expect(await wait('ttycat')).toBe(3);
    await call('RemoveContainer', { container_id: 'ttycat' });

    await create('plain', ['/hello', 'plain', 'sleep']);
    await call('StartContainer', { container_id: 'plain' });
    const notty = await call('TtyWinResize', { container_id: 'plain', row: 1, column: 1 }).catch((e) => e);
    expect([(notty as TtrpcError).code, (notty as TtrpcError).message]).toEqual([
      Code.FAILED_PRECONDITION,
      'the process has no terminal',
    ]);
    await call('ExecProcess', {
      container_id: 'plain',
      exec_id: 'shell',
      process: {
        Args: ['/hello', 'exec', 'winsize', '24', '80'],
        Env: ['PATH=/'],
        Cwd: '/',
        User: {},
        Terminal: true,
      },
    });
    expect(crlf(await readUntil('plain', /tty=1\r*\n/, 'shell'))).toBe(
      'hello from exec\r\nto stderr\r\ntty=1\r\n',
    );
    await call('TtyWinResize', { container_id: 'plain', exec_id: 'shell', row: 24, column: 80 });
    expect(crlf(await readAll('plain', 'shell'))).toMatch(/^(rows=24 cols=0\r\n)?rows=24 cols=80\r\n$/);
    expect(await wait('plain', 'shell')).toBe(4);
    await call('RemoveContainer', { container_id: 'plain' });
  }, 180_000); // three containers and an exec, each under script(1) and runc: slow on a loaded 2-core machine

  it("fails StartContainer with runc's reason when the process cannot start, and removes the container", async () => {
    await create('broken', ['/no-such-program']);
    const e = (await call('StartContainer', { container_id: 'broken' }).catch((err) => err)) as TtrpcError;
    expect(e.code).toBe(Code.INTERNAL);
    expect(e.message).toMatch(/starting container broken failed.*no-such-program/s);
    await call('RemoveContainer', { container_id: 'broken' });
  });

  it("puts every container in the pod's IPC and UTS namespaces, with the sandbox's hostname", async () => {
    const ns = async (cid: string, type: string) => {
      const pid = running.agent.pidOf(cid);
      return readlink(`/proc/${pid}/ns/${type}`);
    };
    await create('one', ['/hello', 'one', 'sleep']);
    await create('two', ['/hello', 'two', 'sleep']);
    await call('StartContainer', { container_id: 'one' });
    await call('StartContainer', { container_id: 'two' });
    for (const type of ['ipc', 'uts']) {
      expect(await ns('one', type)).toBe(await ns('two', type));
      expect(await ns('one', type)).not.toBe(await readlink(`/proc/self/ns/${type}`));
    }
    // PID and mount namespaces stay the container's own.
    expect(await ns('one', 'pid')).not.toBe(await ns('two', 'pid'));
    const hostname = execFileSync(
      'nsenter',
      [`--uts=/proc/${running.agent.pidOf('two')}/ns/uts`, 'hostname'],
      { encoding: 'utf8' },
    );
    expect(hostname).toBe('pod-1\n');
    await call('RemoveContainer', { container_id: 'one' });
    await call('RemoveContainer', { container_id: 'two' });
  });

  it('reports a container killed for lack of memory through GetOOMEvent', async () => {
    await call('CreateContainer', {
      container_id: 'eater',
      OCI: kataSpec(['/hello', 'eater', 'eat'], rootfs, { memoryLimit: 16 * 1024 * 1024 }),
    });
    const oom = call('GetOOMEvent', {}, 'OOMEvent');
    await call('StartContainer', { container_id: 'eater' });
    expect(await wait('eater')).toBe(128 + 9);
    expect((await oom).container_id).toBe('eater');
    await call('RemoveContainer', { container_id: 'eater' });
  });

  it('shares one PID namespace across the pod when the sandbox asks for it (the first container holds it)', async () => {
    await call('DestroySandbox');
    await call('CreateSandbox', { sandbox_id: 'pod-2', hostname: 'pod-2', sandbox_pidns: true });
    await create('holder', ['/hello', 'holder', 'sleep']);
    await create('joiner', ['/hello', 'joiner', 'sleep']);
    // The joiner cannot start before the holder runs.
    const early = (await call('StartContainer', { container_id: 'joiner' }).catch((e) => e)) as TtrpcError;
    expect([early.code, early.message]).toEqual([
      Code.FAILED_PRECONDITION,
      "the pod's PID namespace is held by container holder, which is not running",
    ]);
    await call('StartContainer', { container_id: 'holder' });
    await call('StartContainer', { container_id: 'joiner' });
    const pidns = (cid: string) => readlink(`/proc/${running.agent.pidOf(cid)}/ns/pid`);
    expect(await pidns('joiner')).toBe(await pidns('holder'));
    expect(await pidns('holder')).not.toBe(await readlink('/proc/self/ns/pid'));
    await call('RemoveContainer', { container_id: 'joiner' });
    await call('RemoveContainer', { container_id: 'holder' });
  });

  it('serves stdout, stderr and the wait concurrently, as the shim asks for them', async () => {
    await call('CreateContainer', {
      container_id: 'together',
      exec_id: 'together',
      OCI: kataSpec(['/hello', 'together', '5'], rootfs),
    });
    // All three are asked before the process starts.
    const results = Promise.all([
      readAll('together', 'together'),
      readAll('together', 'together', 'ReadStderr'),
      wait('together', 'together'),
    ]);
    await call('StartContainer', { container_id: 'together' });
    expect(await results).toEqual(['hello from together\n', 'to stderr\n', 5]);
    await call('RemoveContainer', { container_id: 'together' });
  });

  it('kills running processes at RemoveContainer', async () => {
    await create('busy', ['/hello', 'busy', 'sleep']);
    await call('StartContainer', { container_id: 'busy' });
    const waiting = wait('busy');
    await call('RemoveContainer', { container_id: 'busy' });
    expect(await waiting).toBe(128 + 9);
  });
});
