// regorus' kata suites through the gate: real genpolicy policies with the requests kata recorded. Each
// recorded input is encoded into its protobuf request with our agent.proto, sent through the gate with
// our ttrpc client to a stand-in agent, and the outcome (forwarded or PERMISSION_DENIED) must equal
// outputs.json.
//
// The recordings predate today's agent.proto. The gate builds the input the current agent would, with
// new fields such as Storage.shared; an old policy that compares whole Storage objects therefore denies
// CreateSandbox in four suites. Those cases are listed, and each is shown to be caused by the input
// difference alone: the same policy allows the recorded input.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Code, TtrpcClient, TtrpcError } from '@broker/ttrpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_METHODS, AGENT_SERVICE } from './agent-proto.js';
import { AgentPolicyGate } from './gate.js';
import { AgentPolicy } from './policy.js';
import { KATA_FIXTURES, kataRequests, TsStandInAgent, tempDir } from './test-helpers.js';
import { encodeRequest } from './wire.js';

// biome-ignore lint/suspicious/noExplicitAny: the recorded inputs are edited by path
type J = any;

const SUITES = readdirSync(KATA_FIXTURES).sort();

/** Requests whose outcome differs from outputs.json because of agent.proto changes since recording. */
const VERSION_SKEW = [
  'pod-cm2#3 CreateSandboxRequest',
  'pod-lifecycle#3 CreateSandboxRequest',
  'pod-persistent-volumes#1 CreateSandboxRequest',
  'web#3 CreateSandboxRequest',
];

/** The RPC that carries a request type (ReadStreamRequest → ReadStdout). */
function methodOf(requestType: string): string {
  const m = Object.entries(AGENT_METHODS).find(([, t]) => t === requestType);
  if (!m) throw new Error(`no RPC takes ${requestType}`);
  return m[0];
}

async function outcome(p: Promise<Uint8Array>): Promise<boolean | TtrpcError> {
  try {
    await p;
    return true;
  } catch (e) {
    if (e instanceof TtrpcError && e.code === Code.PERMISSION_DENIED) return false;
    return e as TtrpcError;
  }
}

describe('regorus kata suites through the gate', () => {
  let agent: TsStandInAgent;
  let dir: string;
  let cleanup: () => Promise<void>;
  const skewSeen: string[] = [];

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    agent = new TsStandInAgent();
    await agent.server.listen({ path: join(dir, 'agent.sock') });
  });

  afterAll(async () => {
    await agent.server.close({ graceMs: 0 });
    await cleanup();
  });

  for (const suite of SUITES) {
    it(suite, async () => {
      const text = readFileSync(join(KATA_FIXTURES, suite, 'policy.rego'), 'utf8');
      const outputs = JSON.parse(
        readFileSync(join(KATA_FIXTURES, suite, 'outputs.json'), 'utf8'),
      ) as boolean[];
      const requests = kataRequests(suite);
      expect(requests).toHaveLength(outputs.length);

      const policy = new AgentPolicy();
      expect(policy.load(text).regoVersion).toBe('v0');
      const gate = new AgentPolicyGate({ policy, agent: { path: join(dir, 'agent.sock') } });
      const socket = join(dir, `${suite}.sock`);
      await gate.listen({ path: socket });
      const client = await TtrpcClient.connect({ path: socket });
      const reference = new AgentPolicy();
      reference.load(text);
      try {
        let forwarded = 0;
        for (const [i, [ep, input]] of requests.entries()) {
          const where = `${suite}#${i} ${ep}`;
          if (ep === 'AllowRequestsFailingPolicy') {
            // Evaluated by the agent itself at load, with input {}.
            expect(policy.allowRequestsFailingPolicy, where).toBe(outputs[i]);
            continue;
          }
          const { bytes } = encodeRequest(ep, input);
          const method = methodOf(ep);
          const before = agent.calls.length;
          const got = await outcome(client.call(AGENT_SERVICE, method, bytes));
          expect(typeof got, `${where}: ${got instanceof Error ? got.message : ''}`).toBe('boolean');
          if (got === true) {
            // Forwarded unchanged (a denied ReadStream would still be forwarded, but none is denied here).
            expect(agent.calls.length, where).toBe(before + 1);
            const call = agent.calls.at(-1)!;
            expect(call.method).toBe(method);
            expect(Buffer.from(call.payload).equals(Buffer.from(bytes)), where).toBe(true);
            forwarded++;
          } else {
            expect(agent.calls.length, where).toBe(before);
          }
          if (got !== outputs[i]) {
            skewSeen.push(where);
            // The recorded input, as the older agent gave it, gets the recorded answer.
            expect(reference.evaluate(ep, input).allowed, where).toBe(outputs[i]);
          }
        }
        expect(forwarded).toBeGreaterThan(10);
      } finally {
        client.close();
        await gate.close({ graceMs: 0 });
      }
    });
  }

  it('differs from outputs.json exactly in the known version-skew cases', () => {
    expect(skewSeen.sort()).toEqual(VERSION_SKEW);
  });

  it('denies altered requests with the policy prints in the message, and forwards nothing', async () => {
    const text = readFileSync(join(KATA_FIXTURES, 'pod-lifecycle', 'policy.rego'), 'utf8');
    const policy = new AgentPolicy();
    policy.load(text);
    const gate = new AgentPolicyGate({ policy, agent: { path: join(dir, 'agent.sock') } });
    const socket = join(dir, 'altered.sock');
    await gate.listen({ path: socket });
    const client = await TtrpcClient.connect({ path: socket });
    try {
      const requests = kataRequests('pod-lifecycle');
      const pick = (ep: string) => structuredClone(requests.find(([e]) => e === ep)![1]) as J;

      const exec = pick('ExecProcessRequest');
      exec.process.Args = ['sh', '-c', 'cat /etc/shadow'];
      const create = pick('CreateContainerRequest');
      create.OCI.Process.Args = ['/bin/sh'];
      const copy = pick('CopyFileRequest');
      copy.path = '/etc/passwd';
      const before = agent.calls.length;
      for (const [ep, input] of [
        ['ExecProcessRequest', exec],
        ['CreateContainerRequest', create],
        ['CopyFileRequest', copy],
      ] as const) {
        let denied: TtrpcError | undefined;
        try {
          await client.call(AGENT_SERVICE, methodOf(ep), encodeRequest(ep, input).bytes);
        } catch (e) {
          denied = e as TtrpcError;
        }
        expect(denied?.code, ep).toBe(Code.PERMISSION_DENIED);
        expect(denied?.message.startsWith(`"${ep} is blocked by policy: agent_policy:`), ep).toBe(true);
      }
      expect(agent.calls.length).toBe(before);
    } finally {
      client.close();
      await gate.close({ graceMs: 0 });
    }
  });
});
