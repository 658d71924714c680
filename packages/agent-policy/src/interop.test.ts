// Interop with the reference ttrpc (containerd/ttrpc in Go, Debian's golang-github-containerd-ttrpc-dev):
// - our gate forwards to a Go server standing in for the kata agent;
// - a Go client calls our gate over a unix socket and over TCP (as the host side reaches port 15150).
// Needs `go`; scripts/install-deps.sh installs it. BROKER_SKIP_GO_INTEROP=1 skips deliberately.
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { Code, type TcpAddress, TtrpcClient, type TtrpcError } from '@broker/ttrpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_SERVICE } from './agent-proto.js';
import { DEFAULT_POLICY_REGO } from './default-policy.js';
import { AgentPolicyGate } from './gate.js';
import { buildGoAgent, type GoCall, GoStandInAgent, goCalls, SKIP_GO } from './go-agent.js';
import { AgentPolicy } from './policy.js';
import { captureLogger, STAND_IN_OUTPUT, tempDir } from './testing/helpers.js';
import { encodeRequest } from './wire.js';

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** The JSON inside the stand-in's `Metrics{metrics = 1}` answer. */
function metricsJson(payload: Uint8Array): {
  metadata: Record<string, string[]> | null;
  deadline_ns?: number;
} {
  expect(payload[0]).toBe(0x0a);
  let len = 0;
  let shift = 0;
  let i = 1;
  for (;;) {
    const b = payload[i++]!;
    len |= (b & 0x7f) << shift;
    shift += 7;
    if ((b & 0x80) === 0) break;
  }
  return JSON.parse(Buffer.from(payload.subarray(i, i + len)).toString());
}

const EXEC = encodeRequest('ExecProcessRequest', {
  container_id: 'c1',
  exec_id: 'e1',
  process: { Args: ['sh'] },
}).bytes;
const CREATE = encodeRequest('CreateContainerRequest', {
  container_id: 'c1',
  OCI: { Version: '1.1.0', Annotations: { 'io.kubernetes.cri.sandbox-name': 'web-0' } },
}).bytes;

describe.skipIf(SKIP_GO)('interop with Go containerd/ttrpc', () => {
  let bin: string;
  let dir: string;
  let cleanup: () => Promise<void>;
  let goAgent: GoStandInAgent;
  let gate: AgentPolicyGate;
  let gateSocket: string;
  let gateTcp: TcpAddress;
  const logs = captureLogger();

  beforeAll(async () => {
    bin = await buildGoAgent();
    ({ dir, cleanup } = await tempDir());
    goAgent = await GoStandInAgent.start(bin, join(dir, 'go-agent.sock'));
    const policy = new AgentPolicy();
    policy.load(DEFAULT_POLICY_REGO);
    gate = new AgentPolicyGate({
      policy,
      agent: { path: goAgent.socket },
      logger: logs,
      unknownMethods: 'pass',
    });
    gateSocket = join(dir, 'gate.sock');
    await gate.listen({ path: gateSocket });
    gateTcp = (await gate.listen({ host: '127.0.0.1', port: 0 })) as TcpAddress;
  }, 200_000);

  afterAll(async () => {
    await gate?.close({ graceMs: 0 });
    await goAgent?.stop();
    await cleanup?.();
  });

  describe('our gate → Go server as the agent', () => {
    let client: TtrpcClient;
    beforeAll(async () => {
      client = await TtrpcClient.connect({ path: gateSocket });
    });
    afterAll(() => client.close());

    it('forwards an allowed request byte for byte and relays the answer', async () => {
      const before = goAgent.calls.length;
      expect([...(await client.call(AGENT_SERVICE, 'CreateContainer', CREATE))]).toEqual([]);
      expect(goAgent.calls.slice(before)).toEqual([
        { call: '/grpc.AgentService/CreateContainer', sha256: sha256(CREATE), len: CREATE.length },
      ]);
      const out = await client.call(
        AGENT_SERVICE,
        'ReadStdout',
        encodeRequest('ReadStreamRequest', { len: 64 }).bytes,
      );
      expect([...out]).toEqual([...STAND_IN_OUTPUT]);
    });

    it('passes metadata and the deadline on to the Go server', async () => {
      const answer = await client.call(AGENT_SERVICE, 'GetMetrics', new Uint8Array(0), {
        metadata: { 'x-trace': ['a', 'b'] },
        timeoutMs: 20_000,
      });
      const seen = metricsJson(answer);
      expect(seen.metadata).toEqual({ 'x-trace': ['a', 'b'] });
      expect(seen.deadline_ns).toBeGreaterThan(0);
      expect(seen.deadline_ns).toBeLessThanOrEqual(20_000 * 1e6);
    });

    it("relays the Go server's status: code, message and details", async () => {
      let err: TtrpcError | undefined;
      try {
        await client.call(AGENT_SERVICE, 'StartContainer', new Uint8Array(0), {
          metadata: { 'x-stand-in-fail': '9:container is not created' },
        });
      } catch (e) {
        err = e as TtrpcError;
      }
      expect(err?.code).toBe(Code.FAILED_PRECONDITION);
      expect(err?.message).toBe('container is not created');
      expect(err?.details.map((d) => [d.type_url, Buffer.from(d.value).toString()])).toEqual([
        ['type.googleapis.com/stand.in.Detail', 'detail'],
      ]);
    });

    it('ends a call at its deadline while the Go server is still working', async () => {
      let err: TtrpcError | undefined;
      try {
        await client.call(AGENT_SERVICE, 'WaitProcess', new Uint8Array(0), {
          metadata: { 'x-stand-in-sleep-ms': '60000' },
          timeoutMs: 100,
        });
      } catch (e) {
        err = e as TtrpcError;
      }
      expect(err?.code).toBe(Code.DEADLINE_EXCEEDED);
    });

    it('forwards grpc.Health and, in pass mode, methods it does not know', async () => {
      expect([...(await client.call('grpc.Health', 'Check', new Uint8Array(0)))]).toEqual([0x08, 0x01]);
      expect(
        Buffer.from(await client.call(AGENT_SERVICE, 'FutureMethod', new Uint8Array(0))).toString(),
      ).toBe('future');
      let err: TtrpcError | undefined;
      try {
        await client.call('grpc.NoSuchService', 'X', new Uint8Array(0));
      } catch (e) {
        err = e as TtrpcError;
      }
      // Go's own answer for an unknown service, relayed.
      expect([err?.code, err?.message]).toEqual([Code.UNIMPLEMENTED, 'service grpc.NoSuchService']);
    });
  });

  describe('Go client → our gate', () => {
    for (const transport of ['unix', 'tcp'] as const) {
      it(`gets kata's status for a denied exec, over ${transport}`, async () => {
        const address = transport === 'unix' ? `unix:${gateSocket}` : `tcp:${gateTcp.host}:${gateTcp.port}`;
        const before = goAgent.calls.length;
        const calls: GoCall[] = [
          { service: AGENT_SERVICE, method: 'ExecProcess', payload: b64(EXEC) },
          { service: AGENT_SERVICE, method: 'CreateContainer', payload: b64(CREATE) },
          {
            service: AGENT_SERVICE,
            method: 'CreateContainer',
            payload: b64(new Uint8Array([0x0a, 0x05, 0x61])),
          },
          { service: AGENT_SERVICE, method: 'WriteStdin', payload: b64(new Uint8Array([0x1a, 0x01, 0x00])) },
          {
            service: AGENT_SERVICE,
            method: 'GetMetrics',
            metadata: { 'x-trace': ['go'] },
            timeout_ms: 20_000,
          },
          { service: 'grpc.Health', method: 'Check' },
        ];
        const [exec, create, garbage, write, metrics, health] = await goCalls(bin, address, calls);
        expect(exec).toMatchObject({
          code: 7,
          message: '"ExecProcessRequest is blocked by policy: "',
          details: [],
        });
        expect(create).toMatchObject({ code: 0, message: '' });
        expect(garbage!.code).toBe(2);
        expect(garbage!.message).toBe('ttrpc err: grpc.CreateContainerRequest: truncated field');
        expect(write).toMatchObject({ code: 7, message: '"WriteStreamRequest is blocked by policy: "' });
        expect(metrics!.code).toBe(0);
        const seen = metricsJson(Buffer.from(metrics!.payload ?? '', 'base64'));
        expect(seen.metadata).toEqual({ 'x-trace': ['go'] });
        expect(seen.deadline_ns).toBeGreaterThan(0);
        expect(Buffer.from(health!.payload ?? '', 'base64')).toEqual(Buffer.from([0x08, 0x01]));
        expect(
          goAgent.calls
            .slice(before)
            .map((c) => c.call)
            .sort(),
        ).toEqual([
          '/grpc.AgentService/CreateContainer',
          '/grpc.AgentService/GetMetrics',
          '/grpc.Health/Check',
        ]);
      });
    }

    it('keeps serving concurrent Go calls while one waits on a slow agent', async () => {
      const calls: GoCall[] = [
        {
          service: AGENT_SERVICE,
          method: 'WaitProcess',
          metadata: { 'x-stand-in-sleep-ms': ['60000'] },
          timeout_ms: 300,
        },
        ...Array.from({ length: 20 }, (_, i) => ({
          service: AGENT_SERVICE,
          method: 'StartContainer',
          payload: b64(encodeRequest('StartContainerRequest', { container_id: `c${i}` }).bytes),
        })),
      ];
      const [slow, ...fast] = await goCalls(bin, `unix:${gateSocket}`, calls);
      // Whichever ends it first: the gate's DEADLINE_EXCEEDED status or the Go client's own context.
      expect(slow!.code === Code.DEADLINE_EXCEEDED || /deadline exceeded/.test(slow!.error ?? '')).toBe(true);
      expect(fast.map((r) => r.code)).toEqual(Array(20).fill(0));
    });
  });
});
