import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Code, type TtrpcAddress, TtrpcClient, type TtrpcError } from '@broker/ttrpc';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AGENT_SERVICE } from './agent-proto.js';
import { main, parseJsonExact, stringifyJson } from './cli.js';
import { DEFAULT_POLICY_REGO } from './default-policy.js';
import { KATA_FIXTURES, kataRequests, TsStandInAgent, tempDir } from './testing/helpers.js';
import { encodeRequest } from './wire.js';

interface Run {
  code: number;
  out: string;
  err: string;
}

async function run(argv: string[], extra: Parameters<typeof main>[1] = {}): Promise<Run> {
  let out = '';
  let err = '';
  const code = await main(argv, {
    stdout: (t) => {
      out += t;
    },
    stderr: (t) => {
      err += t;
    },
    ...extra,
  });
  return { code, out, err };
}

const STATEFUL = `package agent_policy
import future.keywords.if
CreateContainerRequest := {"allowed": true, "ops": [{"op": "add", "path": "/pstate/sandbox_name", "value": name}]} if {
  name := input.OCI.Annotations["io.kubernetes.cri.sandbox-name"]
  print("sandbox", name)
  print("second line")
}`;

describe('agent-policy-gate check', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => {
    ({ dir, cleanup } = await tempDir());
    await writeFile(join(dir, 'default.rego'), DEFAULT_POLICY_REGO);
    await writeFile(join(dir, 'stateful.rego'), STATEFUL);
    await writeFile(
      join(dir, 'exec.json'),
      JSON.stringify({ container_id: 'c1', process: { Args: ['sh'] } }),
    );
    await writeFile(
      join(dir, 'create.json'),
      JSON.stringify({ OCI: { Annotations: { 'io.kubernetes.cri.sandbox-name': 'web-0' } } }),
    );
  });
  afterEach(async () => {
    await cleanup();
  });

  const args = (policy: string, request: string, input: string, ...more: string[]) => [
    'check',
    '--policy',
    join(dir, policy),
    '--request',
    request,
    '--input',
    join(dir, input),
    ...more,
  ];

  it("prints a denial with the gate's status, exit 1", async () => {
    const r = await run(args('default.rego', 'ExecProcessRequest', 'exec.json'));
    expect(r).toEqual({
      code: 1,
      out: 'deny: ExecProcessRequest\nstatus: 7 "ExecProcessRequest is blocked by policy: "\nprints:\n',
      err: '',
    });
    // An RPC name works too.
    expect((await run(args('default.rego', 'ExecProcess', 'exec.json'))).code).toBe(1);
  });

  it('prints an allow with its prints, state ops and resulting state, exit 0', async () => {
    const r = await run(args('stateful.rego', 'CreateContainerRequest', 'create.json'));
    expect(r.code).toBe(0);
    expect(r.out).toBe(
      [
        'allow: CreateContainerRequest',
        'prints:',
        '  agent_policy:5: sandbox web-0',
        '  agent_policy:6: second line',
        'ops: [{"op":"add","path":"/pstate/sandbox_name","value":"web-0"}]',
        'state: {"pstate":{"sandbox_name":"web-0"}}',
        '',
      ].join('\n'),
    );
    const j = await run(args('stateful.rego', 'CreateContainerRequest', 'create.json', '--json'));
    expect(JSON.parse(j.out)).toMatchObject({
      request: 'CreateContainerRequest',
      decision: 'allow',
      prints: 'agent_policy:5: sandbox web-0 agent_policy:6: second line',
      ignored: [],
    });
  });

  it('normalises the input through the protobuf message as the gate does, unless --raw', async () => {
    const policy = `package agent_policy
import future.keywords.if
default StartContainerRequest := false
StartContainerRequest if { input.container_id == ""; not input.extra }
`;
    await writeFile(join(dir, 'p.rego'), policy);
    await writeFile(join(dir, 'start.json'), JSON.stringify({ extra: 1 }));
    const normal = await run(args('p.rego', 'StartContainerRequest', 'start.json'));
    expect(normal.code).toBe(0); // container_id filled in, `extra` dropped
    expect(normal.err).toBe(
      'agent-policy-gate: warning: StartContainerRequest.extra is not a field of StartContainerRequest; ignored\n',
    );
    expect((await run(args('p.rego', 'StartContainerRequest', 'start.json', '--raw'))).code).toBe(1);
  });

  it('evaluates a recorded genpolicy request', async () => {
    const [, input] = kataRequests('web').find(([ep]) => ep === 'CreateContainerRequest')!;
    await writeFile(join(dir, 'web.json'), stringifyJson(input));
    const r = await run([
      'check',
      '--policy',
      join(KATA_FIXTURES, 'web', 'policy.rego'),
      '--request',
      'CreateContainerRequest',
      '--input',
      join(dir, 'web.json'),
      '--json',
    ]);
    expect(r.code).toBe(0);
    expect((JSON.parse(r.out) as { prints: string }).prints).toContain('CreateContainerRequest: true');
  });

  it('checks with the agent.proto profile of --agent-proto (Storage.shared only under current)', async () => {
    const [, input] = kataRequests('web').find(([ep]) => ep === 'CreateSandboxRequest')!;
    await writeFile(join(dir, 'sandbox.json'), stringifyJson(input));
    const check = (...more: string[]) =>
      run([
        'check',
        '--policy',
        join(KATA_FIXTURES, 'web', 'policy.rego'),
        '--request',
        'CreateSandbox',
        '--input',
        join(dir, 'sandbox.json'),
        ...more,
      ]);
    // web's old policy compares whole Storage objects; the current agent adds `shared: false`.
    const current = await check();
    expect(current.code).toBe(1);
    expect(current.out).toContain('deny: CreateSandboxRequest');
    expect((await check('--agent-proto', 'current')).code).toBe(1);
    const old = await check('--agent-proto', '3.3');
    expect([old.code, old.out.split('\n')[0]]).toEqual([0, 'allow: CreateSandboxRequest']);
    expect((await check('--agent-proto', '3.2')).code).toBe(2);
  });

  it('reports policy errors (exit 3), bad input (exit 4) and usage errors (exit 2)', async () => {
    const undefinedReq = await run(args('default.rego', 'AddSwapPathRequest', 'exec.json'));
    expect(undefinedReq.code).toBe(3);
    expect(undefinedReq.out).toContain(
      'error: AddSwapPathRequest\nstatus: 13 "AddSwapPathRequest: internal error',
    );
    await writeFile(join(dir, 'broken.rego'), 'package agent_policy\nX := ');
    expect((await run(args('broken.rego', 'ExecProcessRequest', 'exec.json'))).code).toBe(3);
    await writeFile(join(dir, 'bad.json'), '{');
    expect((await run(args('default.rego', 'ExecProcessRequest', 'bad.json'))).code).toBe(4);
    await writeFile(join(dir, 'wrong.json'), '{"container_id": 5}');
    const wrong = await run(args('default.rego', 'ExecProcessRequest', 'wrong.json'));
    expect([wrong.code, wrong.err]).toEqual([
      4,
      `agent-policy-gate: ${join(dir, 'wrong.json')}: ExecProcessRequest.container_id: expected a string, got number\n`,
    ]);
    expect((await run(args('default.rego', 'NoSuchRequest', 'exec.json'))).code).toBe(2);
    expect((await run(['check', '--policy', 'x'])).code).toBe(2);
    expect((await run(['frobnicate'])).code).toBe(2);
    expect((await run([])).code).toBe(2);
    expect((await run(['--help'])).out).toContain('agent-policy-gate serve');
  });

  it('keeps big integers exact in JSON', () => {
    const v = parseJsonExact('{"a": 18446744073709551615, "b": 1}');
    expect(v).toEqual({ a: 18446744073709551615n, b: 1 });
    expect(stringifyJson(v)).toBe('{"a":18446744073709551615,"b":1}');
    expect(stringifyJson({ s: '\u0000bigint0\u0000' })).toBe('{"s":"\\u0000bigint0\\u0000"}');
  });
});

describe('agent-policy-gate serve', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let agent: TsStandInAgent;
  beforeEach(async () => {
    ({ dir, cleanup } = await tempDir());
    agent = new TsStandInAgent();
    await agent.server.listen({ path: join(dir, 'agent.sock') });
  });
  afterEach(async () => {
    await agent.server.close({ graceMs: 0 });
    await cleanup();
  });

  /** Runs `serve` until `during` finishes; returns the exit status and JSON log lines. */
  async function serve(argv: string[], during: (addresses: readonly TtrpcAddress[]) => Promise<void>) {
    const logs: Record<string, unknown>[] = [];
    const stop = new AbortController();
    let failure: unknown;
    const r = await run(['serve', '--agent', `unix://${join(dir, 'agent.sock')}`, ...argv], {
      signal: stop.signal,
      logDestination: { write: (line: string) => logs.push(JSON.parse(line) as Record<string, unknown>) },
      onListening: (_gate, addresses) => {
        during(addresses).then(
          () => stop.abort(),
          (e) => {
            failure = e;
            stop.abort();
          },
        );
      },
    });
    if (failure) throw failure;
    return { ...r, logs };
  }

  it('enforces the policy from initdata on a unix socket and TCP', async () => {
    const initdata = join(dir, 'initdata.toml');
    await writeFile(
      initdata,
      `algorithm = "sha256"\nversion = "0.1.0"\n\n[data]\n"policy.rego" = '''\n${DEFAULT_POLICY_REGO}'''\n`,
    );
    const sock = join(dir, 'gate.sock');
    const r = await serve(
      [
        '--initdata',
        initdata,
        '--listen',
        `unix://${sock}`,
        '--listen',
        'tcp://127.0.0.1:0',
        '--log-level',
        'debug',
      ],
      async (addresses) => {
        expect(addresses).toHaveLength(2);
        for (const address of addresses) {
          const client = await TtrpcClient.connect(address);
          try {
            await client.call(
              AGENT_SERVICE,
              'StartContainer',
              encodeRequest('StartContainerRequest', {}).bytes,
            );
            let err: TtrpcError | undefined;
            try {
              await client.call(AGENT_SERVICE, 'ExecProcess', new Uint8Array(0));
            } catch (e) {
              err = e as TtrpcError;
            }
            expect(err?.code).toBe(Code.PERMISSION_DENIED);
          } finally {
            client.close();
          }
        }
      },
    );
    expect(r.code).toBe(0);
    expect(agent.callsOf('StartContainer')).toHaveLength(2);
    expect(r.logs.find((l) => l.msg === 'using policy from initdata')).toMatchObject({
      origin: 'initdata',
      regoVersion: 'v1',
    });
    expect(r.logs.filter((l) => l.msg === 'request denied by policy').map((l) => l.kind)).toEqual([
      'ExecProcessRequest',
      'ExecProcessRequest',
    ]);
  });

  it('falls back to the default policy file, then the built-in policy, when initdata has no policy.rego', async () => {
    const initdata = join(dir, 'initdata.toml');
    await writeFile(initdata, 'algorithm = "sha256"\nversion = "0.1.0"\n\n[data]\n"aa.toml" = ""\n');
    await writeFile(
      join(dir, 'default-policy.rego'),
      'package agent_policy\ndefault ExecProcessRequest := true\n',
    );
    const sock = join(dir, 'gate.sock');
    const call = async () => {
      const client = await TtrpcClient.connect({ path: sock });
      try {
        await client.call(AGENT_SERVICE, 'ExecProcess', new Uint8Array(0));
        return 'allowed';
      } catch (e) {
        return (e as TtrpcError).code;
      } finally {
        client.close();
      }
    };
    let fromFile: unknown;
    const withFile = await serve(
      [
        '--initdata',
        initdata,
        '--policy-file',
        join(dir, 'default-policy.rego'),
        '--listen',
        `unix://${sock}`,
      ],
      async () => {
        fromFile = await call();
      },
    );
    expect(fromFile).toBe('allowed');
    expect(withFile.logs.find((l) => l.msg === 'using default policy')).toMatchObject({ origin: 'file' });
    let builtin: unknown;
    const withoutFile = await serve(
      ['--initdata', initdata, '--policy-file', join(dir, 'missing.rego'), '--listen', `unix://${sock}`],
      async () => {
        builtin = await call();
      },
    );
    expect(builtin).toBe(Code.PERMISSION_DENIED);
    expect(withoutFile.logs.find((l) => l.msg === 'using default policy')).toMatchObject({
      origin: 'builtin',
    });
  });

  it('refuses to start with a broken policy source, and on usage errors', async () => {
    await writeFile(join(dir, 'bad.toml'), 'version = "9"\nalgorithm = "sha256"\n[data]\n');
    const r = await run(
      ['serve', '--initdata', join(dir, 'bad.toml'), '--listen', `unix://${join(dir, 'g.sock')}`],
      {
        logDestination: { write: () => {} },
      },
    );
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/unsupported version/);
    await writeFile(join(dir, 'broken.rego'), 'package agent_policy\nX := ');
    const broken = await run(
      [
        'serve',
        '--no-initdata',
        '--policy-file',
        join(dir, 'broken.rego'),
        '--listen',
        `unix://${join(dir, 'g.sock')}`,
      ],
      { logDestination: { write: () => {} } },
    );
    expect(broken.code).toBe(1);
    expect((await run(['serve', '--unknown-methods', 'maybe'])).code).toBe(2);
    expect((await run(['serve', '--listen', 'http://x'])).code).toBe(2);
    expect((await run(['serve', '--no-initdata', '--initdata', 'x'])).code).toBe(2);
    expect((await run(['serve', '--rego-version', 'v2'])).code).toBe(2);
    expect((await run(['serve', '--agent-proto', 'old'])).code).toBe(2);
  });

  it('serves with --agent-proto 3.3: a recorded old CreateSandbox is allowed and forwarded', async () => {
    const [, input] = kataRequests('web').find(([ep]) => ep === 'CreateSandboxRequest')!;
    const sock = join(dir, 'gate.sock');
    const bytes = encodeRequest('CreateSandboxRequest', input, '3.3').bytes;
    const outcomes: Record<string, boolean> = {};
    for (const profile of ['3.3', 'current']) {
      const r = await serve(
        [
          '--no-initdata',
          '--policy-file',
          join(KATA_FIXTURES, 'web', 'policy.rego'),
          '--agent-proto',
          profile,
          '--listen',
          `unix://${sock}`,
        ],
        async ([address]) => {
          const client = await TtrpcClient.connect(address!);
          try {
            await client.call(AGENT_SERVICE, 'CreateSandbox', bytes);
            outcomes[profile] = true;
          } catch (e) {
            expect((e as TtrpcError).code).toBe(Code.PERMISSION_DENIED);
            outcomes[profile] = false;
          } finally {
            client.close();
          }
        },
      );
      expect(r.code).toBe(0);
      expect(r.logs.find((l) => l.msg === 'agent-policy-gate serving')).toMatchObject({
        agentProto: profile,
      });
    }
    expect(outcomes).toEqual({ '3.3': true, current: false });
    expect(agent.callsOf('CreateSandbox')).toHaveLength(1);
  });
});
