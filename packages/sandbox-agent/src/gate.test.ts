// The agent-policy gate in front of this agent, as in the pod VM: the Go shim's calls go through the gate
// with the built-in default policy, which lets the pod run but allows no exec. Root, runc and Go only.
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AgentPolicy, AgentPolicyGate, DEFAULT_POLICY_REGO } from '@broker/agent-policy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningAgent, startSandboxAgent } from './server.js';
import {
  buildGoShim,
  buildHelloRootfs,
  CAN_RUN_CONTAINERS,
  runGoShim,
  SKIP_GO,
  tempDir,
} from './testing/index.js';

describe.skipIf(!CAN_RUN_CONTAINERS || SKIP_GO)('behind the agent-policy gate', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let running: RunningAgent;
  let gate: AgentPolicyGate;
  let shim: string;

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    shim = await buildGoShim();
    const root = join(dir, 'kata');
    await mkdir(root, { recursive: true });
    // runc as the agent runs it, recording every call.
    const runc = execFileSync('sh', ['-c', 'command -v runc'], { encoding: 'utf8' }).trim();
    await writeFile(
      join(dir, 'runc'),
      `#!/bin/sh\nprintf '%s\\n' "$*" >> '${join(dir, 'runc-calls.log')}'\nexec '${runc}' "$@"\n`,
      { mode: 0o755 },
    );
    running = await startSandboxAgent({
      listen: [{ path: join(dir, 'agent.sock') }],
      roots: [root],
      stateDir: join(dir, 'state'),
      runc: join(dir, 'runc'),
    });
    await buildHelloRootfs(join(running.agent.roots[0]!, 'images/hello/rootfs'));
    const policy = new AgentPolicy();
    policy.load(DEFAULT_POLICY_REGO);
    gate = new AgentPolicyGate({ policy, agent: { path: join(dir, 'agent.sock') } });
    await gate.listen({ path: join(dir, 'gate.sock') });
  }, 600_000);

  afterAll(async () => {
    await gate?.close({ graceMs: 0 });
    await running?.close();
    await cleanup?.();
  });

  it('runs the pod through the gate, and the exec the default policy forbids never reaches the agent', async () => {
    const root = running.agent.roots[0]!;
    const report = await runGoShim(shim, join(dir, 'gate.sock'), {
      sandbox_id: 'pod-g',
      container_id: 'web',
      rootfs_source: join(root, 'images/hello/rootfs'),
      rootfs_mount_point: join(root, 'shared/containers/web/rootfs'),
      empty_dir: join(root, 'sandbox/local/scratch'),
      hosts_file: join(root, 'shared/containers/web-hosts'),
      hosts: '127.0.0.1 localhost\n',
      args: ['/hello', 'behind the gate', 'cat'],
      exec_args: ['/hello', 'exec'],
    });
    expect(report.steps.map((s) => [s.name, s.error ?? 'ok'])).toEqual([
      ['Check', 'ok'],
      ['GetGuestDetails', 'ok'],
      ['CreateSandbox', 'ok'],
      ['CopyFile', 'ok'],
      ['CreateContainer', 'ok'],
      ['StartContainer', 'ok'],
      ['ReadStdout', 'ok'],
      [
        'ExecProcess',
        'rpc error: code = PermissionDenied desc = "ExecProcessRequest is blocked by policy: "',
      ],
    ]);
    expect(report.stdout).toBe('hello from behind the gate\n');
    // The container ran under runc; the refused exec never reached it.
    const calls = await readFile(join(dir, 'runc-calls.log'), 'utf8');
    expect(calls).toMatch(/ run --bundle \S+ --pid-file \S+ web$/m);
    expect(calls).not.toMatch(/(^| )exec /m);
    expect(running.agent.sandboxId).toBe('pod-g');
  });
});
