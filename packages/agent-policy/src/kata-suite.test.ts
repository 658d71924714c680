// regorus' kata suites through the gate: real genpolicy policies with the requests kata recorded. Each
// recorded input is encoded into its protobuf request with our agent.proto, sent through the gate with
// our ttrpc client to a stand-in agent, and the outcome (forwarded or PERMISSION_DENIED) must equal
// outputs.json.
//
// The recordings were made with agents of the kata 3.3–3.14 period (regorus added them in April–May
// 2024), so the gate runs with the matching agent.proto profile, `3.3`, and every one of the 172
// outcomes must equal outputs.json. A separate test shows why the profile matters: under `current`,
// Storage has the `shared` field (kata 3.28), and these policies compare whole Storage objects, so
// they deny CreateSandbox in four suites.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Code, TtrpcClient, TtrpcError } from '@broker/ttrpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_METHODS, AGENT_SERVICE, type AgentProtoProfile } from './agent-proto.js';
import { AgentPolicyGate } from './gate.js';
import { AgentPolicy } from './policy.js';
import { KATA_FIXTURES, kataRequests, TsStandInAgent, tempDir } from './testing/helpers.js';
import { decodeRequest, encodeRequest, toPolicyJson } from './wire.js';

// biome-ignore lint/suspicious/noExplicitAny: the recorded inputs are edited by path
type J = any;

const SUITES = readdirSync(KATA_FIXTURES).sort();

/** The CreateSandbox requests that `current` denies: their storages gain `shared: false`. */
const DENIED_UNDER_CURRENT = [
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
  const RECORDING_PROFILE: AgentProtoProfile = '3.3';
  let driven = 0;

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
      const gate = new AgentPolicyGate({
        policy,
        agent: { path: join(dir, 'agent.sock') },
        agentProto: RECORDING_PROFILE,
      });
      const socket = join(dir, `${suite}.sock`);
      await gate.listen({ path: socket });
      const client = await TtrpcClient.connect({ path: socket });
      try {
        let forwarded = 0;
        for (const [i, [ep, input]] of requests.entries()) {
          const where = `${suite}#${i} ${ep}`;
          if (ep === 'AllowRequestsFailingPolicy') {
            // Evaluated by the agent itself at load, with input {}.
            expect(policy.allowRequestsFailingPolicy, where).toBe(outputs[i]);
            driven++;
            continue;
          }
          const { bytes } = encodeRequest(ep, input, RECORDING_PROFILE);
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
          expect(got, where).toBe(outputs[i]);
          driven++;
        }
        expect(forwarded).toBeGreaterThan(10);
      } finally {
        client.close();
        await gate.close({ graceMs: 0 });
      }
    });
  }

  it('drove all 172 recorded requests', () => {
    expect(driven).toBe(172);
  });

  // Kata's behaviour today is the default: the current agent.proto gives every Storage `shared`, so the
  // input differs from the recordings, and these old policies, which compare whole Storage objects
  // against their expected list, deny the four CreateSandbox requests that carry storages.
  it('under the current profile, gives Storage.shared and denies the four old CreateSandbox requests', async () => {
    const denied: string[] = [];
    for (const suite of SUITES) {
      const policy = new AgentPolicy();
      policy.load(readFileSync(join(KATA_FIXTURES, suite, 'policy.rego'), 'utf8'));
      const gate = new AgentPolicyGate({ policy, agent: { path: join(dir, 'agent.sock') } });
      expect(gate.agentProto).toBe('current');
      const socket = join(dir, `${suite}-current.sock`);
      await gate.listen({ path: socket });
      const client = await TtrpcClient.connect({ path: socket });
      try {
        for (const [i, [ep, input]] of kataRequests(suite).entries()) {
          if (ep !== 'CreateSandboxRequest') continue;
          const where = `${suite}#${i} ${ep}`;
          const { bytes } = encodeRequest(ep, input);
          const current = toPolicyJson(decodeRequest(ep, bytes)) as J;
          const old = toPolicyJson(decodeRequest(ep, bytes, RECORDING_PROFILE)) as J;
          for (const st of current.storages) expect(st.shared, where).toBe(false);
          for (const st of old.storages) expect(Object.hasOwn(st, 'shared'), where).toBe(false);
          const got = await outcome(client.call(AGENT_SERVICE, methodOf(ep), bytes));
          if (got === false) {
            denied.push(where);
            // The input difference alone decides: the recorded-era input is allowed by the same policy.
            expect(policy.evaluate(ep, old).allowed, where).toBe(true);
            expect(current.storages.length, where).toBeGreaterThan(0);
          } else {
            expect(got, where).toBe(true);
          }
        }
      } finally {
        client.close();
        await gate.close({ graceMs: 0 });
      }
    }
    expect(denied.sort()).toEqual(DENIED_UNDER_CURRENT);
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
