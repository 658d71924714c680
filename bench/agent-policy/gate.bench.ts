// Per-request overhead of the agent-policy gate: CreateContainer under a genpolicy policy (regorus' `web`
// suite, with its recorded request), sent through the gate to the Go stand-in agent, against the same
// request sent straight to that agent, measured in the same run. Also the gate's own work alone
// (decode + evaluate) for reference.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { TtrpcClient } from '@broker/ttrpc';
import { AGENT_SERVICE } from '../../packages/agent-policy/src/agent-proto.js';
import { AgentPolicyGate } from '../../packages/agent-policy/src/gate.js';
import { buildGoAgent, GoStandInAgent } from '../../packages/agent-policy/src/go-agent.js';
import { AgentPolicy } from '../../packages/agent-policy/src/policy.js';
import { policyInputFromBytes } from '../../packages/agent-policy/src/requests.js';
import { KATA_FIXTURES, kataRequests, tempDir } from '../../packages/agent-policy/src/testing/helpers.js';
import { encodeRequest } from '../../packages/agent-policy/src/wire.js';
import { percentile, timeEach } from '../helpers.js';

const WARMUP = 300;
const N = 3000;

export async function run(): Promise<Record<string, number>> {
  const bin = await buildGoAgent();
  const { dir, cleanup } = await tempDir();
  const agent = await GoStandInAgent.start(bin, join(dir, 'agent.sock'));
  const policy = new AgentPolicy();
  policy.load(readFileSync(join(KATA_FIXTURES, 'web', 'policy.rego'), 'utf8'));
  const gate = new AgentPolicyGate({ policy, agent: { path: agent.socket } });
  await gate.listen({ path: join(dir, 'gate.sock') });
  const viaGate = await TtrpcClient.connect({ path: join(dir, 'gate.sock') });
  const direct = await TtrpcClient.connect({ path: agent.socket });
  try {
    const [, input] = kataRequests('web').find(([ep]) => ep === 'CreateContainerRequest')!;
    const request = encodeRequest('CreateContainerRequest', input).bytes;
    if (
      !policy.evaluate('CreateContainerRequest', policyInputFromBytes('CreateContainerRequest', request))
        .allowed
    ) {
      throw new Error('the benchmark request must be allowed by the policy');
    }
    const callGate = () => viaGate.call(AGENT_SERVICE, 'CreateContainer', request);
    const callDirect = () => direct.call(AGENT_SERVICE, 'CreateContainer', request);
    const evaluate = async () =>
      policy.evaluate('CreateContainerRequest', policyInputFromBytes('CreateContainerRequest', request));

    await timeEach(WARMUP, callGate);
    await timeEach(WARMUP, callDirect);
    // Interleave the two series in blocks so drift on a shared machine affects both alike.
    const g: number[] = [];
    const d: number[] = [];
    for (let block = 0; block < 10; block++) {
      d.push(...(await timeEach(N / 10, callDirect)));
      g.push(...(await timeEach(N / 10, callGate)));
    }
    g.sort((a, b) => a - b);
    d.sort((a, b) => a - b);
    const e = await timeEach(N / 3, evaluate);
    return {
      request_bytes: request.length,
      direct_p50_us: percentile(d, 50),
      direct_p99_us: percentile(d, 99),
      gate_p50_us: percentile(g, 50),
      gate_p99_us: percentile(g, 99),
      overhead_p50_us: percentile(g, 50) - percentile(d, 50),
      overhead_p99_us: percentile(g, 99) - percentile(d, 99),
      gate_to_direct_p50_ratio: percentile(g, 50) / percentile(d, 50),
      decode_and_evaluate_p50_us: percentile(e, 50),
      decode_and_evaluate_p99_us: percentile(e, 99),
    };
  } finally {
    viaGate.close();
    direct.close();
    await gate.close({ graceMs: 0 });
    await agent.stop();
    await cleanup();
  }
}
