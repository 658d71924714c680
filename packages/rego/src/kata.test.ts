// regorus' kata suite: real genpolicy agent policies with recorded requests. Each request is evaluated as
// `data.agent_policy.<Request>` in v0 mode with non-strict builtin errors; the results must equal
// outputs.json and the gathered prints must equal prints.json byte for byte. As in regorus' driver, each
// request is also evaluated on a fresh clone of the loaded engine, which must give the same answer.
import { readdirSync, readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import { Engine } from './engine.js';
import { jsonText } from './format.js';
import { parseJSON, type Value } from './value.js';

const ROOT = vector('regorus/kata');

function requests(name: string): [string, Value][] {
  return readFileSync(`${ROOT}/${name}/inputs.txt`, 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .map((l) => {
      // Each line is `["ep":"<Name>",{...}],`.
      const req = parseJSON(l.replace('"ep":', '').slice(0, -1)) as Value[];
      return [req[0] as string, req[1]!];
    });
}

describe('kata genpolicy policies', () => {
  for (const name of readdirSync(ROOT).sort()) {
    it(name, () => {
      const engine = new Engine({ regoVersion: 'v0', strictBuiltinErrors: false, gatherPrints: true });
      engine.addPolicy(
        `tests/kata/data/${name}/policy.rego`,
        readFileSync(`${ROOT}/${name}/policy.rego`, 'utf8'),
      );
      const base = engine.clone();
      const outputs = JSON.parse(readFileSync(`${ROOT}/${name}/outputs.json`, 'utf8')) as unknown[];
      const prints = JSON.parse(readFileSync(`${ROOT}/${name}/prints.json`, 'utf8')) as string[][];
      const reqs = requests(name);
      expect(reqs.length).toBe(outputs.length);
      reqs.forEach(([ep, input], i) => {
        engine.setInput(input);
        const r = engine.evalRule(`data.agent_policy.${ep}`);
        const fresh = base.clone();
        fresh.setInput(input);
        const r2 = fresh.evalRule(`data.agent_policy.${ep}`);
        const where = `${name} request ${i} (${ep})`;
        expect(r === undefined ? undefined : jsonText(r), where).toBe(JSON.stringify(outputs[i]));
        expect(r2 === undefined ? undefined : jsonText(r2), where).toBe(JSON.stringify(outputs[i]));
        const p = engine.takePrints();
        expect(p, where).toEqual(prints[i]);
        expect(fresh.takePrints(), where).toEqual(p);
      });
    });
  }
});
