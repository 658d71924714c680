// Rego engine figures for ARCHITECTURE §7, on regorus' kata `web` fixture (a real genpolicy policy):
//  - load: parse and prepare the policy (new Engine, addPolicy, prepare), mean over several loads;
//  - eval: `data.agent_policy.CreateContainerRequest` with its recorded input, in v0 mode with non-strict
//    builtin errors and gathered prints, as the kata agent runs it; p50 and p99 after warm-up.
// Targets: load < 50 ms, eval p50 < 1 ms.
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { vector } from '@broker/cli/testing';
import { Engine } from '../../packages/rego/src/engine.js';
import { parseJSON, type Value } from '../../packages/rego/src/value.js';
import { percentile } from '../helpers.js';

const FIXTURES = vector('');
const KATA = `${FIXTURES}/regorus/kata/web`;

function newEngine(policy: string, gatherPrints: boolean): Engine {
  const e = new Engine({ regoVersion: 'v0', strictBuiltinErrors: false, gatherPrints });
  e.addPolicy('tests/kata/data/web/policy.rego', policy);
  e.prepare();
  return e;
}

function evalTimes(e: Engine, n: number): number[] {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    e.evalRule('data.agent_policy.CreateContainerRequest');
    e.takePrints();
    times.push(performance.now() - t0);
  }
  return times.sort((a, b) => a - b);
}

export async function run(): Promise<Record<string, number>> {
  const policy = readFileSync(`${KATA}/policy.rego`, 'utf8');
  const request = readFileSync(`${KATA}/inputs.txt`, 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.includes('"CreateContainerRequest"'))[0];
  if (request === undefined) throw new Error('no CreateContainerRequest in the kata web inputs');
  const input = (parseJSON(request.replace('"ep":', '').slice(0, -1)) as Value[])[1]!;

  for (let i = 0; i < 5; i++) newEngine(policy, true);
  const loads: number[] = [];
  for (let i = 0; i < 20; i++) {
    const t0 = performance.now();
    newEngine(policy, true);
    loads.push(performance.now() - t0);
  }
  loads.sort((a, b) => a - b);

  const e = newEngine(policy, true);
  e.setInput(input);
  if (e.evalRule('data.agent_policy.CreateContainerRequest') !== true) {
    throw new Error('CreateContainerRequest did not evaluate to true');
  }
  evalTimes(e, 300);
  const withPrints = evalTimes(e, 3000);

  const quiet = newEngine(policy, false);
  quiet.setInput(input);
  evalTimes(quiet, 300);
  const noPrints = evalTimes(quiet, 3000);

  const mean = loads.reduce((a, b) => a + b, 0) / loads.length;
  return {
    'load_ms.mean': mean,
    'load_ms.p50': percentile(loads, 50),
    'create_container.p50_ms': percentile(withPrints, 50),
    'create_container.p99_ms': percentile(withPrints, 99),
    'create_container.no_prints.p50_ms': percentile(noPrints, 50),
    'create_container.no_prints.p99_ms': percentile(noPrints, 99),
    'target.load_ms': 50,
    'target.p50_ms': 1,
  };
}
