import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_POLICY_REGO } from './default-policy.js';
import { AgentPolicy, PolicyEvaluationError, PolicyLoadError, unimportedFutureKeywords } from './policy.js';
import { KATA_POLICIES } from './testing/helpers.js';

const UNDEFINED = 'policy check: unexpected eval_query result len QueryResults { result: [] }';

function loaded(text: string, options?: ConstructorParameters<typeof AgentPolicy>[0]): AgentPolicy {
  const p = new AgentPolicy(options);
  p.load(text);
  return p;
}

function evalError(p: AgentPolicy, request: string, input: unknown = {}): PolicyEvaluationError {
  try {
    p.evaluate(request, input);
  } catch (e) {
    expect(e).toBeInstanceOf(PolicyEvaluationError);
    return e as PolicyEvaluationError;
  }
  throw new Error(`${request} did not fail`);
}

// The spec's table of defaults for initdata's policy.rego.
const SPEC_FALSE = ['SetPolicyRequest', 'WriteStreamRequest', 'ExecProcessRequest'];
const SPEC_TRUE = [
  'ReadStreamRequest',
  'AddARPNeighborsRequest',
  'AddSwapRequest',
  'CloseStdinRequest',
  'CopyFileRequest',
  'CreateContainerRequest',
  'CreateSandboxRequest',
  'DestroySandboxRequest',
  'GetMetricsRequest',
  'GetOOMEventRequest',
  'GuestDetailsRequest',
  'ListInterfacesRequest',
  'ListRoutesRequest',
  'MemHotplugByProbeRequest',
  'OnlineCPUMemRequest',
  'PauseContainerRequest',
  'PullImageRequest',
  'RemoveContainerRequest',
  'RemoveStaleVirtiofsShareMountsRequest',
  'ReseedRandomDevRequest',
  'ResumeContainerRequest',
  'SetGuestDateTimeRequest',
  'SignalProcessRequest',
  'StartContainerRequest',
  'StartTracingRequest',
  'StatsContainerRequest',
  'StopTracingRequest',
  'TtyWinResizeRequest',
  'UpdateContainerRequest',
  'UpdateEphemeralMountsRequest',
  'UpdateInterfaceRequest',
  'UpdateRoutesRequest',
  'WaitProcessRequest',
];

// Names in kata's allow-all.rego (all `default X := true`).
const ALLOW_ALL = [
  ...SPEC_TRUE.filter((n) => n !== 'ReadStreamRequest'),
  'ReadStreamRequest',
  'ExecProcessRequest',
  'GetDiagnosticDataRequest',
  'MemAgentCompactConfig',
  'MemAgentMemcgConfig',
  'SetPolicyRequest',
  'WriteStreamRequest',
];

describe("the spec's default policy", () => {
  const p = loaded(DEFAULT_POLICY_REGO);

  it('allows every request of its table except SetPolicy, WriteStream and ExecProcess', () => {
    for (const r of SPEC_TRUE) expect(p.evaluate(r, {}).allowed, r).toBe(true);
    for (const r of SPEC_FALSE) expect(p.evaluate(r, {}).allowed, r).toBe(false);
    expect(p.allowRequestsFailingPolicy).toBe(false);
  });

  it('leaves requests the table does not name undefined, which is an internal error', () => {
    for (const r of [
      'AddSwapPathRequest',
      'GetDiagnosticDataRequest',
      'VolumeStatsRequest',
      'MemAgentMemcgConfig',
    ]) {
      expect(evalError(p, r).message).toBe(`${r}: internal error ${UNDEFINED}`);
    }
  });
});

describe("kata's static policies (src/kata-opa)", () => {
  const policy = (name: string) => readFileSync(join(KATA_POLICIES, name), 'utf8');

  it('allow-all.rego allows its 39 requests; requests it omits fail as undefined', () => {
    const p = loaded(policy('allow-all.rego'));
    expect(ALLOW_ALL).toHaveLength(39);
    for (const r of ALLOW_ALL) expect(p.evaluate(r, {}).allowed, r).toBe(true);
    for (const r of [
      'AddSwapPathRequest',
      'GetIPTablesRequest',
      'SetIPTablesRequest',
      'VolumeStatsRequest',
    ]) {
      expect(evalError(p, r).reason).toBe(UNDEFINED);
    }
  });

  it('allow-all-except-exec-process.rego blocks exec only', () => {
    const p = loaded(policy('allow-all-except-exec-process.rego'));
    expect(p.evaluate('ExecProcessRequest', {}).allowed).toBe(false);
    for (const r of ALLOW_ALL.filter((n) => n !== 'ExecProcessRequest' && n !== 'GetDiagnosticDataRequest')) {
      expect(p.evaluate(r, {}).allowed, r).toBe(true);
    }
    expect(evalError(p, 'GetDiagnosticDataRequest').reason).toBe(UNDEFINED);
  });

  it('allow-set-policy.rego allows SetPolicy and nothing else is defined', () => {
    const p = loaded(policy('allow-set-policy.rego'));
    expect(p.evaluate('SetPolicyRequest', { policy: 'package agent_policy' }).allowed).toBe(true);
    expect(evalError(p, 'CreateContainerRequest').reason).toBe(UNDEFINED);
  });

  it('the genpolicy rules template loads in both Rego dialects', () => {
    const rules = `${policy('genpolicy-rules.rego')}\npolicy_data := {"containers": [], "request_defaults": {}}\n`;
    for (const regoVersion of ['v0', 'v1'] as const) {
      const p = loaded(rules, { regoVersion });
      expect(p.evaluate('ExecProcessRequest', { process: null }).allowed).toBe(false);
      expect(p.evaluate('GuestDetailsRequest', {}).allowed).toBe(true);
      expect(p.evaluate('SetPolicyRequest', { policy: '' }).allowed).toBe(false);
      expect(p.allowRequestsFailingPolicy).toBe(false);
    }
  });
});

describe('results', () => {
  const STATEFUL = `package agent_policy
import future.keywords.if
default CreateContainerRequest := {"allowed": false}
CreateContainerRequest := {"allowed": true, "ops": ops} if {
  name := input.OCI.Annotations["io.kubernetes.cri.sandbox-name"]
  print("sandbox name", name, "state", data.pstate)
  ops := state_ops(name)
}
state_ops(name) := [] if { data.pstate.sandbox_name == name }
state_ops(name) := [{"op": "add", "path": "/pstate/sandbox_name", "value": name}] if { not data.pstate.sandbox_name }
DenyWithOps := {"allowed": false, "ops": [{"op": "add", "path": "/pstate/x", "value": 1}]}
BadOps := {"allowed": false, "ops": [{"op": "nope"}]}
FailingOps := {"allowed": true, "ops": [{"op": "remove", "path": "/pstate/missing"}]}
NoAllowed := {"ops": []}
Number := 1
`;
  const req = (name: string) => ({ OCI: { Annotations: { 'io.kubernetes.cri.sandbox-name': name } } });

  it('applies an object result’s ops to data only when allowed, and later requests see the state', () => {
    const p = loaded(STATEFUL);
    const first = p.evaluate('CreateContainerRequest', req('web-0'));
    expect(first.allowed).toBe(true);
    expect(first.ops).toEqual([{ op: 'add', path: '/pstate/sandbox_name', value: 'web-0' }]);
    expect(first.prints).toBe('agent_policy:6: sandbox name web-0 state {}');
    expect(p.state).toEqual({ pstate: { sandbox_name: 'web-0' } });
    expect(p.evaluate('CreateContainerRequest', req('web-0'))).toMatchObject({ allowed: true, ops: [] });
    // A second sandbox name no longer matches the state: denied, state unchanged.
    const other = p.evaluate('CreateContainerRequest', req('other'));
    expect(other.allowed).toBe(false);
    expect(other.prints).toBe('agent_policy:6: sandbox name other state {"sandbox_name": "web-0"}');
    expect(p.evaluate('DenyWithOps', {})).toEqual({ allowed: false, prints: '', ops: [] });
    expect(p.state).toEqual({ pstate: { sandbox_name: 'web-0' } });
  });

  it('resets the state on every load', () => {
    const p = loaded(STATEFUL);
    p.evaluate('CreateContainerRequest', req('web-0'));
    p.load(STATEFUL);
    expect(p.state).toEqual({ pstate: {} });
    expect(p.evaluate('CreateContainerRequest', req('other')).allowed).toBe(true);
  });

  it('fails on malformed ops (even when denied), ops that do not apply, and results of other shapes', () => {
    const p = loaded(STATEFUL);
    expect(evalError(p, 'BadOps').reason).toMatch(/unknown op/);
    expect(evalError(p, 'FailingOps').reason).toBe(
      "operation '/0' failed at path '/pstate/missing': path is invalid",
    );
    expect(p.state).toEqual({ pstate: {} });
    expect(evalError(p, 'NoAllowed').reason).toBe('missing field `allowed`');
    expect(evalError(p, 'Number').reason).toBe('policy check: unexpected eval_query result type 1');
  });

  it('reports evaluation errors as internal errors and drops their prints', () => {
    const p = loaded(`package agent_policy
X := 1 if { print("one") }
X := 2 if { true }
Y := true if { print("y") }`);
    expect(evalError(p, 'X').message).toMatch(/^X: internal error /);
    expect(p.evaluate('Y', {}).prints).toBe('agent_policy:4: y');
  });

  it('treats builtin errors as undefined (non-strict), as kata configures regorus', () => {
    const p = loaded(`package agent_policy
default ExecProcessRequest := false
ExecProcessRequest := true if { to_number("not a number") == 1 }
ExecProcessRequest := true if { input.x == 1 }`);
    expect(p.evaluate('ExecProcessRequest', { x: 2 }).allowed).toBe(false);
    expect(p.evaluate('ExecProcessRequest', { x: 1 }).allowed).toBe(true);
  });
});

describe('AllowRequestsFailingPolicy', () => {
  it('turns denials and undefined results into allows, and is evaluated on every load', () => {
    const p = loaded(`package agent_policy
default AllowRequestsFailingPolicy := true
default ExecProcessRequest := false`);
    expect(p.allowRequestsFailingPolicy).toBe(true);
    expect(p.evaluate('ExecProcessRequest', {}).allowed).toBe(true);
    expect(p.evaluate('CreateContainerRequest', {}).allowed).toBe(true);
    p.load(DEFAULT_POLICY_REGO);
    expect(p.allowRequestsFailingPolicy).toBe(false);
    expect(p.evaluate('ExecProcessRequest', {}).allowed).toBe(false);
  });

  it('is off when a new policy fails to load (kata would keep the old flag)', () => {
    const p = loaded('package agent_policy\ndefault AllowRequestsFailingPolicy := true');
    expect(() => p.load('package agent_policy\nbroken :=')).toThrow(PolicyLoadError);
    expect(p.allowRequestsFailingPolicy).toBe(false);
    expect(evalError(p, 'CreateContainerRequest').reason).toBe(UNDEFINED);
  });
});

describe('loading', () => {
  it('fails closed: after a bad policy every request is an internal error', () => {
    const p = loaded(DEFAULT_POLICY_REGO);
    expect(p.loaded).toBe(true);
    expect(() => p.load('package agent_policy\ndefault X := ')).toThrow(PolicyLoadError);
    expect(p.loaded).toBe(false);
    expect(evalError(p, 'CreateContainerRequest').reason).toBe(UNDEFINED);
    expect(() => p.load('package agent_policy\nX := no_such_function(1)')).toThrow(/could not find function/);
  });

  it('enforces the length limits kata sets on regorus', () => {
    const p = new AgentPolicy();
    expect(() => p.load(`package agent_policy${'\n'.repeat(200_000)}`)).toThrow(
      'agent_policy exceeds maximum allowed line count 200000',
    );
    expect(() => p.load(`package agent_policy${'\n'.repeat(199_999)}`)).not.toThrow();
    expect(() => p.load(`package agent_policy\n# ${'x'.repeat(70_000)}\n`)).toThrow(
      'agent_policy:2:65537: line exceeds maximum column width of 65536',
    );
    expect(() => p.load(`package agent_policy\n${`# ${'x'.repeat(60_000)}\n`.repeat(290)}`)).toThrow(
      'agent_policy exceeds maximum allowed policy file size 16777216 bytes',
    );
  });

  it('reads Rego v1, falls back to v0 for older policies, and can be pinned to either', () => {
    const v0 = 'package agent_policy\nExecProcessRequest { input.ok }';
    const v1 = 'package agent_policy\nExecProcessRequest if { input.ok }';
    const p = new AgentPolicy();
    expect(p.load(v0).regoVersion).toBe('v0');
    expect(p.evaluate('ExecProcessRequest', { ok: true }).allowed).toBe(true);
    expect(p.load(v1).regoVersion).toBe('v1');
    expect(evalError(p, 'ExecProcessRequest', { ok: false }).reason).toBe(UNDEFINED);
    expect(loaded(v1, { regoVersion: 'v1' }).evaluate('ExecProcessRequest', { ok: true }).allowed).toBe(true);
    expect(() => loaded(v0, { regoVersion: 'v1' })).toThrow(/`if` keyword is required/);
    expect(() => loaded('package agent_policy\nX {', {})).toThrow(/\(as Rego v0: /);
  });

  it('refuses v0 policies that use future keywords without importing them', () => {
    // regorus' v0 parser reads `if` here as a rule name, making ExecProcessRequest unconditionally true.
    const trap = 'package agent_policy\nExecProcessRequest := true if { input.ok }\nOther { true }';
    expect(() => loaded(trap)).toThrow(/`if` used without `import future.keywords`/);
    expect(() => loaded(trap, { regoVersion: 'v0' })).toThrow(PolicyLoadError);
    const imported = `package agent_policy\nimport future.keywords.if\n${trap.split('\n').slice(1).join('\n')}`;
    const p = loaded(imported, { regoVersion: 'v0' });
    expect(evalError(p, 'ExecProcessRequest', { ok: false }).reason).toBe(UNDEFINED);
  });

  it('finds future keywords outside comments, strings, imports and references', () => {
    expect(
      unimportedFutureKeywords('package p\n# if in\nx := "if every"\ny := input.in\nz := contains("a", "b")'),
    ).toEqual([]);
    expect(unimportedFutureKeywords('package p\ndeny contains m if { some m in input }')).toEqual([
      'contains',
      'if',
      'in',
    ]);
    expect(unimportedFutureKeywords('package p\nimport future.keywords\nx if { true }')).toEqual([]);
    expect(unimportedFutureKeywords('package p\nimport rego.v1\nx if { true }')).toEqual([]);
    expect(unimportedFutureKeywords('package p\nimport future.keywords.in\nx if { 1 in [1] }')).toEqual([
      'if',
    ]);
  });

  it('names print lines after the policy source', () => {
    const p = new AgentPolicy();
    p.load(
      'package agent_policy\nX := true if { print("hi", {"b": 1, "a": [1]}) }',
      '/etc/kata-opa/default-policy.rego',
    );
    expect(p.name).toBe('/etc/kata-opa/default-policy.rego');
    expect(p.evaluate('X', {}).prints).toBe('/etc/kata-opa/default-policy.rego:2: hi {"a": [1], "b": 1}');
  });
});
