import { readFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import {
  type CallOptions,
  Code,
  defineProto,
  encodeFrame,
  FrameDecoder,
  MessageType,
  messageCodec,
  TtrpcClient,
  TtrpcError,
} from '@broker/ttrpc';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_POLICY_REGO } from './default-policy.js';
import { AgentPolicyGate, type UnknownMethodMode } from './gate.js';
import { AgentPolicy } from './policy.js';
import { captureLogger, KATA_POLICIES, STAND_IN_OUTPUT, TsStandInAgent, tempDir } from './testing/helpers.js';
import { encodeRequest } from './wire.js';

const SERVICE = 'grpc.AgentService';
const bytesOf = (b: Uint8Array): number[] => [...b];
const kataPolicy = (name: string) => readFileSync(join(KATA_POLICIES, name), 'utf8');

interface Harness {
  gate: AgentPolicyGate;
  agent: TsStandInAgent;
  policy: AgentPolicy;
  client: TtrpcClient;
  logs: ReturnType<typeof captureLogger>;
  gateSocket: string;
  agentSocket: string;
  call(
    method: string,
    type: string,
    input: Record<string, unknown>,
    options?: CallOptions,
  ): Promise<Uint8Array>;
  close(): Promise<void>;
}

async function harness(
  policyText: string,
  options: { unknownMethods?: UnknownMethodMode; startAgent?: boolean } = {},
): Promise<Harness> {
  const { dir, cleanup } = await tempDir();
  const agent = new TsStandInAgent();
  const agentSocket = join(dir, 'agent.sock');
  const gateSocket = join(dir, 'gate.sock');
  if (options.startAgent !== false) await agent.server.listen({ path: agentSocket });
  const policy = new AgentPolicy();
  policy.load(policyText);
  const logs = captureLogger();
  const gate = new AgentPolicyGate({
    policy,
    agent: { path: agentSocket },
    logger: logs,
    ...(options.unknownMethods !== undefined && { unknownMethods: options.unknownMethods }),
  });
  await gate.listen({ path: gateSocket });
  const client = await TtrpcClient.connect({ path: gateSocket });
  return {
    gate,
    agent,
    policy,
    client,
    logs,
    gateSocket,
    agentSocket,
    call: (method, type, input, callOptions) =>
      client.call(SERVICE, method, encodeRequest(type, input).bytes, callOptions),
    close: async () => {
      client.close();
      await gate.close({ graceMs: 0 });
      await agent.server.close({ graceMs: 0 });
      await cleanup();
    },
  };
}

async function failure(p: Promise<unknown>): Promise<TtrpcError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(TtrpcError);
    return e as TtrpcError;
  }
  throw new Error('the call succeeded');
}

const CREATE = {
  container_id: 'c1',
  exec_id: 'c1',
  OCI: {
    Version: '1.1.0',
    Process: { Args: ['/pause'] },
    Annotations: { 'io.kubernetes.cri.sandbox-name': 'web-0' },
  },
};

describe("gate with the spec's default policy", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness(DEFAULT_POLICY_REGO);
  });
  afterAll(async () => {
    await h.close();
  });

  it('forwards allowed requests byte for byte and relays the answer', async () => {
    const bytes = encodeRequest('CreateContainerRequest', CREATE).bytes;
    const answer = await h.client.call(SERVICE, 'CreateContainer', bytes);
    expect(bytesOf(answer)).toEqual([]);
    const got = h.agent.callsOf('CreateContainer').at(-1)!;
    expect(Buffer.from(got.payload).equals(Buffer.from(bytes))).toBe(true);
    expect(
      bytesOf(
        await h.call('ReadStdout', 'ReadStreamRequest', { container_id: 'c1', exec_id: 'c1', len: 100 }),
      ),
    ).toEqual(bytesOf(STAND_IN_OUTPUT));
  });

  it('blocks exec with kata\'s error: PERMISSION_DENIED "ExecProcessRequest is blocked by policy: "', async () => {
    const before = h.agent.callsOf('ExecProcess').length;
    const err = await failure(
      h.call('ExecProcess', 'ExecProcessRequest', {
        container_id: 'c1',
        exec_id: 'e1',
        process: { Args: ['sh'] },
      }),
    );
    expect(err.code).toBe(Code.PERMISSION_DENIED);
    expect(err.message).toBe('"ExecProcessRequest is blocked by policy: "');
    expect(err.message).toContain('ExecProcessRequest is blocked by policy');
    expect(h.agent.callsOf('ExecProcess')).toHaveLength(before);
    expect(h.logs.lines.at(-1)).toMatchObject({
      level: 'warn',
      msg: 'request denied by policy',
      obj: { kind: 'ExecProcessRequest', method: 'ExecProcess', code: 'PERMISSION_DENIED' },
    });
  });

  it('blocks writes to stdin and SetPolicy', async () => {
    const w = await failure(h.call('WriteStdin', 'WriteStreamRequest', { container_id: 'c1', data: [1, 2] }));
    expect([w.code, w.message]).toEqual([
      Code.PERMISSION_DENIED,
      '"WriteStreamRequest is blocked by policy: "',
    ]);
    const s = await failure(
      h.call('SetPolicy', 'SetPolicyRequest', { policy: kataPolicy('allow-all.rego') }),
    );
    expect([s.code, s.message]).toEqual([
      Code.PERMISSION_DENIED,
      '"SetPolicyRequest is blocked by policy: "',
    ]);
    expect(h.agent.callsOf('WriteStdin')).toHaveLength(0);
    expect(h.agent.callsOf('SetPolicy')).toHaveLength(0);
  });

  it('answers INTERNAL for requests the policy leaves undefined, without forwarding them', async () => {
    const err = await failure(h.call('AddSwapPath', 'AddSwapPathRequest', { path: '/swap' }));
    expect(err.code).toBe(Code.INTERNAL);
    expect(err.message).toBe(
      '"AddSwapPathRequest: internal error policy check: unexpected eval_query result len QueryResults { result: [] }"',
    );
    expect(h.agent.callsOf('AddSwapPath')).toHaveLength(0);
    expect(h.logs.lines.at(-1)).toMatchObject({
      level: 'error',
      obj: { kind: 'AddSwapPathRequest', code: 'INTERNAL' },
    });
  });

  it('never checks grpc.Health', async () => {
    expect(bytesOf(await h.client.call('grpc.Health', 'Check', new Uint8Array(0)))).toEqual([0x08, 0x01]);
    expect(h.agent.callsOf('Check')).toHaveLength(1);
    // Methods the gate does not know are forwarded too; the agent answers for itself.
    const watch = await failure(h.client.call('grpc.Health', 'Watch', new Uint8Array(0)));
    expect([watch.code, watch.message]).toEqual([Code.UNIMPLEMENTED, 'method Watch']);
  });

  it('forwards metadata and the remaining deadline', async () => {
    await h.call(
      'GetMetrics',
      'GetMetricsRequest',
      {},
      { metadata: { a: ['1', '2'], b: 'x' }, timeoutMs: 30_000 },
    );
    const got = h.agent.callsOf('GetMetrics').at(-1)!;
    expect(got.metadata).toEqual({ a: ['1', '2'], b: ['x'] });
    expect(got.deadline).toBeTypeOf('number');
    await h.call('GetMetrics', 'GetMetricsRequest', {});
    expect(h.agent.callsOf('GetMetrics').at(-1)!.deadline).toBeUndefined();
  });

  it('relays agent errors with their code, message and details', async () => {
    const err = await failure(
      h.call(
        'StartContainer',
        'StartContainerRequest',
        { container_id: 'nope' },
        {
          metadata: { 'x-stand-in-fail': '5:container nope not found' },
        },
      ),
    );
    expect(err.code).toBe(Code.NOT_FOUND);
    expect(err.message).toBe('container nope not found');
    expect(err.details.map((d) => d.type_url)).toEqual(['type.googleapis.com/stand.in.Detail']);
  });

  it('ends a call at its deadline while the agent is still busy', async () => {
    const err = await failure(
      h.call(
        'WaitProcess',
        'WaitProcessRequest',
        { container_id: 'c1' },
        {
          metadata: { 'x-stand-in-sleep-ms': '60000' },
          timeoutMs: 50,
        },
      ),
    );
    expect(err.code).toBe(Code.DEADLINE_EXCEEDED);
  });

  it('does not let a slow agent call hold up others', async () => {
    let settled = false;
    const slowClient = await TtrpcClient.connect({ path: h.gateSocket });
    const slow = slowClient
      .call(SERVICE, 'WaitProcess', encodeRequest('WaitProcessRequest', { container_id: 'c1' }).bytes, {
        metadata: { 'x-stand-in-sleep-ms': '600000' },
      })
      .then(
        () => 'resolved',
        (e: TtrpcError) => e.code,
      )
      .finally(() => {
        settled = true;
      });
    for (let i = 0; i < 5; i++) {
      await h.call('StartContainer', 'StartContainerRequest', { container_id: `c${i}` });
    }
    await h.call('ReadStderr', 'ReadStreamRequest', { container_id: 'c1' });
    expect(settled).toBe(false);
    slowClient.close();
    expect(await slow).toBe(Code.UNAVAILABLE);
  });

  it('refuses undecodable requests with UNKNOWN, as ttrpc-rust does, without forwarding them', async () => {
    const before = h.agent.calls.length;
    const garbage = await failure(
      h.client.call(SERVICE, 'CreateContainer', new Uint8Array([0xff, 0xff, 0xff])),
    );
    expect(garbage.code).toBe(Code.UNKNOWN);
    expect(garbage.message).toMatch(/^ttrpc err: grpc\.CreateContainerRequest: /);
    const badUtf8 = await failure(
      h.client.call(SERVICE, 'StartContainer', new Uint8Array([0x0a, 0x02, 0xc3, 0x28])),
    );
    expect(badUtf8.message).toBe(
      'ttrpc err: grpc.StartContainerRequest: grpc.StartContainerRequest.container_id: invalid UTF-8 in string',
    );
    expect(h.agent.calls.length).toBe(before);
  });

  it('denies unknown methods and services by default', async () => {
    const m = await failure(h.client.call(SERVICE, 'FutureMethod', new Uint8Array(0)));
    expect([m.code, m.message]).toEqual([
      Code.PERMISSION_DENIED,
      '"/grpc.AgentService/FutureMethod is blocked by the policy gate: unknown method"',
    ]);
    const s = await failure(h.client.call('grpc.Other', 'Thing', new Uint8Array(0)));
    expect(s.code).toBe(Code.PERMISSION_DENIED);
    expect(h.agent.callsOf('FutureMethod')).toHaveLength(0);
  });

  it('answers RESOURCE_EXHAUSTED to an oversize frame and keeps the connection', async () => {
    const envelope = defineProto(`
      syntax = "proto3";
      package t;
      message Req { string service = 1; string method = 2; bytes payload = 3; }
      message Status { int32 code = 1; string message = 2; }
      message Res { Status status = 1; bytes payload = 2; }
    `);
    const Req = messageCodec<{ service: string; method: string; payload: Uint8Array }>(envelope, 't.Req');
    const Res = messageCodec<{ status: { code: number; message: string } | null }>(envelope, 't.Res');
    const sock = net.createConnection({ path: h.gateSocket });
    await new Promise<void>((r) => sock.once('connect', () => r()));
    const decoder = new FrameDecoder(4 << 20);
    const answers: { id: number; code: number; message: string }[] = [];
    const got = new Promise<void>((resolve) => {
      sock.on('data', (chunk: Buffer) => {
        for (const ev of decoder.push(chunk)) {
          if (ev.kind !== 'frame') continue;
          const st = Res.decode(ev.data).status;
          answers.push({ id: ev.header.streamId, code: st?.code ?? 0, message: st?.message ?? '' });
          if (answers.length === 2) resolve();
        }
      });
    });
    const big = 5 << 20;
    const header = Buffer.alloc(10);
    header.writeUInt32BE(big, 0);
    header.writeUInt32BE(1, 4);
    header[8] = MessageType.REQUEST;
    sock.write(header);
    sock.write(Buffer.alloc(big));
    const ok = Req.encode({
      service: SERVICE,
      method: 'StartContainer',
      payload: encodeRequest('StartContainerRequest', { container_id: 'after' }).bytes,
    });
    sock.write(encodeFrame(3, MessageType.REQUEST, 0, ok));
    await got;
    sock.destroy();
    expect(answers).toEqual([
      {
        id: 1,
        code: Code.RESOURCE_EXHAUSTED,
        message: `message length ${big} exceed maximum message size of 4194304`,
      },
      { id: 3, code: 0, message: '' },
    ]);
  });
});

describe('gate: hidden logs (ReadStreamRequest false)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness(
      DEFAULT_POLICY_REGO.replace('default ReadStreamRequest := true', 'default ReadStreamRequest := false'),
    );
  });
  afterAll(async () => {
    await h.close();
  });

  it('reads from the agent but answers success with no data', async () => {
    expect(bytesOf(await h.call('ReadStdout', 'ReadStreamRequest', { container_id: 'c1', len: 10 }))).toEqual(
      [],
    );
    expect(bytesOf(await h.call('ReadStderr', 'ReadStreamRequest', { container_id: 'c1', len: 10 }))).toEqual(
      [],
    );
    expect(h.agent.callsOf('ReadStdout')).toHaveLength(1);
    expect(h.agent.callsOf('ReadStderr')).toHaveLength(1);
    expect(h.logs.lines.filter((l) => l.msg === 'request denied by policy').map((l) => l.obj.method)).toEqual(
      ['ReadStdout', 'ReadStderr'],
    );
  });

  it("passes the agent's read errors through unchanged", async () => {
    const err = await failure(
      h.call(
        'ReadStdout',
        'ReadStreamRequest',
        { container_id: 'gone' },
        { metadata: { 'x-stand-in-fail': '5:gone' } },
      ),
    );
    expect([err.code, err.message]).toEqual([Code.NOT_FOUND, 'gone']);
  });

  it('still runs exec when allowed, so commands run but their output cannot be seen', async () => {
    await h.policy.load(
      `${DEFAULT_POLICY_REGO.replace('default ReadStreamRequest := true', 'default ReadStreamRequest := false')}`.replace(
        'default ExecProcessRequest := false',
        'default ExecProcessRequest := true',
      ),
    );
    await h.call('ExecProcess', 'ExecProcessRequest', { container_id: 'c1', exec_id: 'e1' });
    expect(h.agent.callsOf('ExecProcess')).toHaveLength(1);
    expect(
      bytesOf(await h.call('ReadStdout', 'ReadStreamRequest', { container_id: 'c1', exec_id: 'e1' })),
    ).toEqual([]);
  });
});

describe('gate: SetPolicy', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness(kataPolicy('allow-set-policy.rego'));
  });
  afterEach(async () => {
    await h.close();
  });

  it('is checked against the current policy, loads the new one itself and is not forwarded', async () => {
    expect(
      bytesOf(
        await h.call('SetPolicy', 'SetPolicyRequest', {
          policy: kataPolicy('allow-all-except-exec-process.rego'),
        }),
      ),
    ).toEqual([]);
    const exec = await failure(h.call('ExecProcess', 'ExecProcessRequest', { container_id: 'c1' }));
    expect(exec.code).toBe(Code.PERMISSION_DENIED);
    await h.call('CreateContainer', 'CreateContainerRequest', CREATE);
    expect(h.agent.callsOf('SetPolicy')).toHaveLength(0);
    expect(h.agent.callsOf('CreateContainer')).toHaveLength(1);
    expect(h.logs.lines.some((l) => l.msg === 'policy replaced by SetPolicy')).toBe(true);
  });

  it('fails closed when the new policy does not load', async () => {
    const err = await failure(
      h.call('SetPolicy', 'SetPolicyRequest', { policy: 'package agent_policy\ndefault X := ' }),
    );
    expect(err.code).toBe(Code.INVALID_ARGUMENT);
    const after = await failure(h.call('CreateContainer', 'CreateContainerRequest', CREATE));
    expect(after.code).toBe(Code.INTERNAL);
    // Even SetPolicy is now undefined: only a restart with a good policy recovers.
    const again = await failure(
      h.call('SetPolicy', 'SetPolicyRequest', { policy: kataPolicy('allow-all.rego') }),
    );
    expect(again.code).toBe(Code.INTERNAL);
    expect(h.agent.calls).toHaveLength(0);
  });

  it('refuses huge policies by kata’s limits, and oversize messages by the frame cap', async () => {
    const manyLines = `package agent_policy\ndefault CreateContainerRequest := true\n${'#\n'.repeat(200_000)}`;
    const lines = await failure(h.call('SetPolicy', 'SetPolicyRequest', { policy: manyLines }));
    expect([lines.code, lines.message]).toEqual([
      Code.INVALID_ARGUMENT,
      'agent_policy exceeds maximum allowed line count 200000',
    ]);
    await h.policy.load(kataPolicy('allow-set-policy.rego'));
    const wide = await failure(
      h.call('SetPolicy', 'SetPolicyRequest', { policy: `package agent_policy\n# ${'x'.repeat(100_000)}\n` }),
    );
    expect(wide.message).toBe('agent_policy:2:65537: line exceeds maximum column width of 65536');
    await h.policy.load(kataPolicy('allow-set-policy.rego'));
    // 3.5 MB within the limits loads.
    const big = `package agent_policy\ndefault CreateContainerRequest := true\n${`# ${'y'.repeat(40_000)}\n`.repeat(90)}`;
    expect(bytesOf(await h.call('SetPolicy', 'SetPolicyRequest', { policy: big }))).toEqual([]);
    await h.call('CreateContainer', 'CreateContainerRequest', CREATE);
    await h.policy.load(kataPolicy('allow-set-policy.rego'));
    const tooBig = await failure(h.call('SetPolicy', 'SetPolicyRequest', { policy: 'x'.repeat(5 << 20) }));
    expect(tooBig.code).toBe(Code.RESOURCE_EXHAUSTED);
  });

  it('resets the policy state', async () => {
    const stateful = `package agent_policy
import future.keywords.if
default SetPolicyRequest := true
default CreateContainerRequest := {"allowed": false}
CreateContainerRequest := {"allowed": true, "ops": [{"op": "add", "path": "/pstate/sandbox_name", "value": name}]} if {
  name := input.OCI.Annotations["io.kubernetes.cri.sandbox-name"]
  not data.pstate.sandbox_name
}
CreateContainerRequest := {"allowed": true, "ops": []} if {
  data.pstate.sandbox_name == input.OCI.Annotations["io.kubernetes.cri.sandbox-name"]
}`;
    await h.call('SetPolicy', 'SetPolicyRequest', { policy: stateful });
    await h.call('CreateContainer', 'CreateContainerRequest', CREATE);
    expect(h.policy.state).toEqual({ pstate: { sandbox_name: 'web-0' } });
    const other = {
      ...CREATE,
      OCI: { ...CREATE.OCI, Annotations: { 'io.kubernetes.cri.sandbox-name': 'other' } },
    };
    const denied = await failure(h.call('CreateContainer', 'CreateContainerRequest', other));
    expect(denied.code).toBe(Code.PERMISSION_DENIED);
    await h.call('SetPolicy', 'SetPolicyRequest', { policy: stateful });
    expect(h.policy.state).toEqual({ pstate: {} });
    await h.call('CreateContainer', 'CreateContainerRequest', other);
    expect(h.agent.callsOf('CreateContainer')).toHaveLength(2);
  });
});

describe('gate: other policies and settings', () => {
  it('allow-all lets exec through', async () => {
    const h = await harness(kataPolicy('allow-all.rego'));
    try {
      await h.call('ExecProcess', 'ExecProcessRequest', { container_id: 'c1', exec_id: 'e1' });
      expect(h.agent.callsOf('ExecProcess')).toHaveLength(1);
    } finally {
      await h.close();
    }
  });

  it('gives the policy the reduced CopyFile input and refuses unreadable symlink targets', async () => {
    const h = await harness(`package agent_policy
import future.keywords.if
default CopyFileRequest := false
CopyFileRequest if {
  print(input)
  input.file_type == "Symlink"
  input.symlink_target == "..data/token"
  not input.data
}`);
    try {
      const link = { path: '/run/x/token', file_mode: 0o120777, data: [...Buffer.from('..data/token')] };
      await h.call('CopyFile', 'CopyFileRequest', link);
      expect(h.agent.callsOf('CopyFile')).toHaveLength(1);
      const regular = await failure(h.call('CopyFile', 'CopyFileRequest', { ...link, file_mode: 0o100644 }));
      expect(regular.code).toBe(Code.PERMISSION_DENIED);
      expect(regular.message).toContain('\\"file_type\\": \\"Regular\\"');
      const bad = await failure(
        h.call('CopyFile', 'CopyFileRequest', { ...link, data: [0x00, 0xff, 0xff, 0x00] }),
      );
      expect([bad.code, bad.message]).toEqual([
        Code.INTERNAL,
        'parsing CopyFileRequest for policy\n\nCaused by:\n    invalid symlink content',
      ]);
      expect(h.agent.callsOf('CopyFile')).toHaveLength(1);
    } finally {
      await h.close();
    }
  });

  it('puts prints in the deny message but never logs a write’s prints or payload', async () => {
    const h = await harness(`package agent_policy
import future.keywords.if
default WriteStreamRequest := false
default ExecProcessRequest := false
WriteStreamRequest if { print("writing", input.data); false }
ExecProcessRequest if { print("exec", input.process.Args); false }`);
    try {
      const secret = [...Buffer.from('TOP-SECRET-PASSWORD')];
      const w = await failure(
        h.call('WriteStdin', 'WriteStreamRequest', { container_id: 'c1', data: secret }),
      );
      expect(w.message).toBe(
        `"WriteStreamRequest is blocked by policy: agent_policy:5: writing [${secret.join(', ')}]"`,
      );
      const e = await failure(
        h.call('ExecProcess', 'ExecProcessRequest', { process: { Args: ['cat', '/etc/x'] } }),
      );
      expect(e.message).toBe(
        '"ExecProcessRequest is blocked by policy: agent_policy:6: exec [\\"cat\\", \\"/etc/x\\"]"',
      );
      const denials = h.logs.lines.filter((l) => l.msg === 'request denied by policy');
      expect(denials.map((l) => l.obj.kind)).toEqual(['WriteStreamRequest', 'ExecProcessRequest']);
      expect(denials[0]!.obj).not.toHaveProperty('prints');
      expect(denials[1]!.obj.prints).toBe('agent_policy:6: exec ["cat", "/etc/x"]');
      expect(h.logs.text()).not.toContain(secret.join(', '));
      expect(h.logs.text()).not.toContain('TOP-SECRET');
    } finally {
      await h.close();
    }
  });

  it('passes unknown methods through when configured to', async () => {
    const h = await harness(DEFAULT_POLICY_REGO, { unknownMethods: 'pass' });
    try {
      expect(Buffer.from(await h.client.call(SERVICE, 'FutureMethod', new Uint8Array(0))).toString()).toBe(
        'future',
      );
      const s = await failure(h.client.call('grpc.Other', 'Thing', new Uint8Array(0)));
      expect([s.code, s.message]).toEqual([Code.UNIMPLEMENTED, 'service grpc.Other']);
      // Known methods are still checked.
      expect((await failure(h.call('ExecProcess', 'ExecProcessRequest', {}))).code).toBe(
        Code.PERMISSION_DENIED,
      );
    } finally {
      await h.close();
    }
  });

  it('answers UNAVAILABLE while the agent is down and reconnects once it is up', async () => {
    const h = await harness(DEFAULT_POLICY_REGO, { startAgent: false });
    try {
      const down = await failure(h.call('StartContainer', 'StartContainerRequest', { container_id: 'c1' }));
      expect(down.code).toBe(Code.UNAVAILABLE);
      await h.agent.server.listen({ path: h.agentSocket });
      await h.call('StartContainer', 'StartContainerRequest', { container_id: 'c1' });
      expect(h.agent.callsOf('StartContainer')).toHaveLength(1);
      // Policy checks come before the agent connection: a denial needs no agent.
      await h.agent.server.close({ graceMs: 0 });
      expect((await failure(h.call('ExecProcess', 'ExecProcessRequest', {}))).code).toBe(
        Code.PERMISSION_DENIED,
      );
    } finally {
      await h.close();
    }
  });
});
