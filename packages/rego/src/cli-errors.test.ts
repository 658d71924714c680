// `rego eval --errors regorus|opa`.
import { describe, expect, it } from 'vitest';
import { main } from './cli.js';

describe('rego eval --errors', () => {
  it('reports errors in the chosen style', async () => {
    const run = async (args: string[]) => {
      let stderr = '';
      try {
        const code = await main(args, {
          out: () => {},
          err: (s) => {
            stderr += s;
          },
          readFile: () => 'package p\nf(x) := 1\nf(x) := 2 if x\nq := f(true)\n',
        });
        return { code, text: stderr };
      } catch (e) {
        return { code: -1, text: (e as Error).message };
      }
    };
    const opa = await run(['eval', '--errors', 'opa', '-d', 'p.rego', 'data.p.q']);
    expect(opa.code).not.toBe(0);
    expect(opa.text).toContain(
      'p.rego:4: eval_conflict_error: function data.p.f produced conflicting values for the same inputs',
    );
    expect((await run(['eval', '-d', 'p.rego', 'data.p.q'])).text).toMatch(/p\.rego:\d+:\d+: /);
    expect((await run(['eval', '--errors', 'go', 'data.p.q'])).code).toBe(2);
  });
});
