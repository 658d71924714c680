/**
 * `agent-policy-gate serve …` runs the gate; `agent-policy-gate check …` evaluates one request the way
 * the gate does, so an operator can try a policy before putting it into initdata.
 */
import { readFile } from 'node:fs/promises';
import {
  choice,
  createLogger,
  describeFailure,
  LOG_FORMAT_OPTION,
  type LogFormat,
  logFlags,
  type OptionValues,
  runCommand,
  UsageError,
} from '@broker/cli';
import { formatTtrpcAddress, type ListenOptions, parseTtrpcAddress, type TtrpcAddress } from '@broker/ttrpc';
import {
  AGENT_METHODS,
  AGENT_PROTO_PROFILES,
  type AgentProtoProfile,
  isAgentProtoProfile,
  REQUEST_TYPES,
} from './agent-proto.js';
import { AgentPolicyError } from './errors.js';
import { AgentPolicyGate, type UnknownMethodMode } from './gate.js';
import {
  DEFAULT_INITDATA_TOML_PATH,
  DEFAULT_POLICY_FILE,
  InitialPolicyError,
  resolveInitialPolicy,
} from './initial.js';
import type { Json } from './json-patch.js';
import {
  AgentPolicy,
  POLICY_MAX_FILE_BYTES,
  PolicyEvaluationError,
  PolicyLoadError,
  type RegoDialect,
} from './policy.js';
import { CopyFileInputError, policyInputOf } from './requests.js';
import { rustDebugString } from './rust-debug.js';
import { decodeRequest, encodeRequest, RequestDecodeError, RequestEncodeError } from './wire.js';

export const DEFAULT_LISTEN = 'tcp://0.0.0.0:15150';
export const DEFAULT_AGENT_ADDRESS = 'unix:///run/kata-containers/agent.sock';
/** Largest request JSON `check` reads. */
const MAX_INPUT_BYTES = 64 * 1024 * 1024;

const VERSION = '0.1.0';

const USAGE = `Usage: agent-policy-gate <COMMAND> [OPTIONS]

Commands:
  serve  Enforce policy.rego on every kata agent ttrpc request, forwarding allowed ones to the agent
  check  Evaluate one request against a policy and print the decision, the policy's prints and state ops

Options:
  -h, --help     Print help (each command has its own: agent-policy-gate serve --help)
  -V, --version  Print version
`;

const SERVE = {
  name: 'agent-policy-gate serve',
  version: VERSION,
  help: `Usage: agent-policy-gate serve [OPTIONS]

Enforces policy.rego on every kata agent ttrpc request, forwarding allowed ones to the agent. Serves
until SIGINT, SIGTERM or SIGHUP. Log lines are JSON on stdout (text on a terminal).

Options:
      --listen <ADDR>          where the host side connects, tcp://HOST:PORT or unix:///PATH; repeatable
                               [default: ${DEFAULT_LISTEN}]
      --agent <ADDR>           the agent's ttrpc socket [default: ${DEFAULT_AGENT_ADDRESS}]
      --initdata <FILE>        initdata TOML whose data."policy.rego" is the first choice of policy
                               [default: ${DEFAULT_INITDATA_TOML_PATH}]
      --no-initdata            do not read initdata
      --policy-file <FILE>     policy used when initdata has none [default: ${DEFAULT_POLICY_FILE}];
                               when neither exists, the built-in default policy applies
      --unknown-methods <MODE> deny or pass requests the gate does not know [default: deny]
      --rego-version <V>       auto, v1 or v0 [default: auto: Rego v1 as kata-agent parses today, falling
                               back to v0 for older genpolicy output]
      --agent-proto <P>        the agent's agent.proto version: current, or 3.3 for kata 3.3.0 to 3.14.x
                               (no Storage.shared, Route.flags, Route.mtu; Interface.pciPath; CopyFile
                               unreduced) [default: current]
      --log-level <LEVEL>      off, error, warn, info, debug or trace [default: RUST_LOG, else info]
      --log-format <FORMAT>    json (default) or text (default when stdout is a terminal)
  -h, --help                   Print help
`,
  options: {
    listen: { type: 'string', multiple: true },
    agent: { type: 'string' },
    initdata: { type: 'string' },
    'no-initdata': { type: 'boolean' },
    'policy-file': { type: 'string' },
    'unknown-methods': { type: 'string' },
    'rego-version': { type: 'string' },
    'agent-proto': { type: 'string' },
    'log-level': { type: 'string' },
    ...LOG_FORMAT_OPTION,
  },
  exitStatus: [
    [0, 'stopped by SIGINT, SIGTERM or SIGHUP'],
    [1, 'the initial policy could not be loaded, or an address could not be listened on'],
  ],
} as const;

const CHECK = {
  name: 'agent-policy-gate check',
  version: VERSION,
  help: `Usage: agent-policy-gate check --policy <FILE> --request <NAME> --input <FILE> [OPTIONS]

Evaluates one request against a policy the way the gate does, and prints the decision, the policy's
prints and state ops.

Options:
      --policy <FILE>      the policy (package agent_policy)
      --request <NAME>     the request message type (ExecProcessRequest) or RPC name (ExecProcess)
      --input <FILE>       the request as JSON, in the policy-input form (proto field names)
      --raw                use the JSON as the policy input as is, instead of normalising it through the
                           protobuf message (defaults filled in, CopyFile reduced) as the gate does
      --json               print the result as one JSON object
      --rego-version <V>   auto, v1 or v0 [default: auto]
      --agent-proto <P>    current or 3.3, as for serve [default: current]
  -h, --help               Print help
`,
  options: {
    policy: { type: 'string' },
    request: { type: 'string' },
    input: { type: 'string' },
    raw: { type: 'boolean' },
    json: { type: 'boolean' },
    'rego-version': { type: 'string' },
    'agent-proto': { type: 'string' },
  },
  exitStatus: [
    [0, 'allowed'],
    [1, 'denied'],
    [2, 'usage error (unknown option, missing or invalid argument, unknown request)'],
    [3, 'the policy could not decide or load'],
    [4, 'bad input (unreadable file, invalid JSON, not the request message)'],
  ],
} as const;

export interface MainOptions {
  readonly stdout?: (text: string) => void;
  readonly stderr?: (text: string) => void;
  /** Where `serve` writes JSON log lines; default stdout. */
  readonly logDestination?: { write(line: string): void };
  /** Aborting it stops `serve` as SIGTERM would. */
  readonly signal?: AbortSignal;
  /** Called once `serve` listens on all its addresses. */
  readonly onListening?: (gate: AgentPolicyGate, addresses: readonly TtrpcAddress[]) => void;
}

interface ServeArgs {
  readonly listen: ListenOptions[];
  readonly agent: TtrpcAddress;
  readonly initdata: string | null;
  readonly policyFile: string;
  readonly unknownMethods: UnknownMethodMode;
  readonly regoVersion: RegoDialect | 'auto';
  readonly agentProto: AgentProtoProfile;
  readonly logLevel: string | undefined;
  readonly logFormat: LogFormat | undefined;
}

interface CheckArgs {
  readonly policy: string;
  readonly request: string;
  readonly input: string;
  readonly raw: boolean;
  readonly json: boolean;
  readonly regoVersion: RegoDialect | 'auto';
  readonly agentProto: AgentProtoProfile;
}

function parseAddress(s: string): TtrpcAddress {
  try {
    return parseTtrpcAddress(s);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

/** A listen address: as a ttrpc address, but TCP port 0 (any free port) is allowed. */
function parseListen(s: string): ListenOptions {
  const any = /^tcp:\/\/(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]/]+)):0$/.exec(s);
  if (any) return { host: (any[1] ?? any[2])!, port: 0 };
  return parseAddress(s);
}

function regoVersionFlag(value: string | undefined): RegoDialect | 'auto' {
  return choice('rego-version', value, ['auto', 'v0', 'v1'] as const) ?? 'auto';
}

function agentProtoFlag(value: string | undefined): AgentProtoProfile {
  const v = value ?? 'current';
  if (!isAgentProtoProfile(v)) {
    throw new UsageError(
      `invalid value '${v}' for '--agent-proto' (allowed: ${AGENT_PROTO_PROFILES.join(', ')})`,
    );
  }
  return v;
}

function serveArgs(values: OptionValues<typeof SERVE.options>): ServeArgs {
  const unknown = choice('unknown-methods', values['unknown-methods'], ['deny', 'pass'] as const) ?? 'deny';
  const { level: logLevel, format: logFormat } = logFlags(values, ['agent_policy_gate']);
  if (values['no-initdata'] && values.initdata !== undefined) {
    throw new UsageError("options '--initdata' and '--no-initdata' exclude each other");
  }
  return {
    listen: (values.listen ?? [DEFAULT_LISTEN]).map(parseListen),
    agent: parseAddress(values.agent ?? DEFAULT_AGENT_ADDRESS),
    initdata: values['no-initdata'] ? null : (values.initdata ?? DEFAULT_INITDATA_TOML_PATH),
    policyFile: values['policy-file'] ?? DEFAULT_POLICY_FILE,
    unknownMethods: unknown,
    regoVersion: regoVersionFlag(values['rego-version']),
    agentProto: agentProtoFlag(values['agent-proto']),
    logLevel,
    logFormat,
  };
}

function checkArgs(values: OptionValues<typeof CHECK.options>): CheckArgs {
  const need = (name: 'policy' | 'request' | 'input'): string => {
    const v = values[name];
    if (v === undefined) throw new UsageError(`missing option '--${name}'`);
    return v;
  };
  return {
    policy: need('policy'),
    request: need('request'),
    input: need('input'),
    raw: values.raw === true,
    json: values.json === true,
    regoVersion: regoVersionFlag(values['rego-version']),
    agentProto: agentProtoFlag(values['agent-proto']),
  };
}

/** The request message type for a message type name or an RPC name. */
export function requestTypeOf(name: string): string | undefined {
  if (REQUEST_TYPES.includes(name)) return name;
  return Object.hasOwn(AGENT_METHODS, name) ? AGENT_METHODS[name] : undefined;
}

/** JSON.parse keeping integers beyond 2^53 exact (as bigint), as serde_json and regorus do. */
export function parseJsonExact(text: string): unknown {
  return JSON.parse(text, (_key, value, context?: { source?: string }) => {
    if (typeof value === 'number' && !Number.isSafeInteger(value) && context?.source !== undefined) {
      if (/^-?\d+$/.test(context.source)) return BigInt(context.source);
    }
    return value;
  });
}

/** JSON text with bigints written as plain integers. */
export function stringifyJson(value: unknown, indent?: number): string {
  const marks = new Map<string, string>();
  // A random tag keeps a string in the data that happens to look like a mark from being rewritten.
  const tag = Math.random().toString(36).slice(2, 10);
  let n = 0;
  const text = JSON.stringify(
    value,
    (_key, v: unknown) => {
      if (typeof v !== 'bigint') return v;
      const mark = `\u0000bigint${tag}.${n++}\u0000`;
      marks.set(mark, v.toString());
      return mark;
    },
    indent,
  );
  if (marks.size === 0) return text;
  return text.replace(
    /"\\u0000bigint[a-z0-9]+\.\d+\\u0000"/g,
    (m) => marks.get(JSON.parse(m) as string) ?? m,
  );
}

export interface CheckResult {
  readonly request: string;
  readonly decision: 'allow' | 'deny' | 'error';
  /** What the gate would answer: ttrpc status code and message (absent when allowed). */
  readonly code?: number;
  readonly message?: string;
  readonly prints: string;
  readonly ops: readonly unknown[];
  /** The data document after the request (`{"pstate": …}`). */
  readonly state: Json;
  /** Input members the protobuf message does not have (dropped while normalising). */
  readonly ignored: readonly string[];
}

/**
 * Evaluates one request as the gate would. `input` is the request in policy-input form; unless `raw`,
 * it is encoded to protobuf and decoded again, so the policy sees what the agent would give it.
 * `agentProto` is the agent.proto profile, as for the gate.
 */
export function checkRequest(
  policy: AgentPolicy,
  requestType: string,
  input: Record<string, unknown>,
  raw = false,
  agentProto: AgentProtoProfile = 'current',
): CheckResult {
  let policyInput: unknown = input;
  let ignored: string[] = [];
  if (!raw) {
    const encoded = encodeRequest(requestType, input, agentProto);
    ignored = encoded.ignored;
    policyInput = policyInputOf(
      requestType,
      decodeRequest(requestType, encoded.bytes, agentProto),
      agentProto,
    );
  }
  const base = { request: requestType, ignored };
  try {
    const d = policy.evaluate(requestType, policyInput);
    if (d.allowed) return { ...base, decision: 'allow', prints: d.prints, ops: d.ops, state: policy.state };
    return {
      ...base,
      decision: 'deny',
      code: 7,
      message: rustDebugString(`${requestType} is blocked by policy: ${d.prints}`),
      prints: d.prints,
      ops: [],
      state: policy.state,
    };
  } catch (e) {
    if (!(e instanceof PolicyEvaluationError)) throw e;
    return {
      ...base,
      decision: 'error',
      code: 13,
      message: rustDebugString(e.message),
      prints: '',
      ops: [],
      state: policy.state,
    };
  }
}

function formatCheck(r: CheckResult): string {
  const lines = [`${r.decision}: ${r.request}`];
  if (r.message !== undefined) lines.push(`status: ${r.code} ${r.message}`);
  lines.push('prints:');
  // Each print line starts with `<source>:<line>: `; show one per line.
  const prints = r.prints === '' ? [] : r.prints.split(/ (?=[^\s:]+:\d+: )/);
  for (const p of prints) lines.push(`  ${p}`);
  if (r.ops.length > 0) lines.push(`ops: ${stringifyJson(r.ops)}`, `state: ${stringifyJson(r.state)}`);
  return `${lines.join('\n')}\n`;
}

async function runCheck(
  args: CheckArgs,
  out: (t: string) => void,
  err: (t: string) => void,
): Promise<number> {
  const requestType = requestTypeOf(args.request);
  if (requestType === undefined) throw new UsageError(`unknown request '${args.request.slice(0, 80)}'`);
  let policyText: string;
  let inputText: string;
  try {
    policyText = await readLimited(args.policy, POLICY_MAX_FILE_BYTES);
    inputText = await readLimited(args.input, MAX_INPUT_BYTES);
  } catch (e) {
    err(`agent-policy-gate: ${describeFailure(e)}\n`);
    return 4;
  }
  const policy = new AgentPolicy({ regoVersion: args.regoVersion });
  try {
    policy.load(policyText);
  } catch (e) {
    if (!(e instanceof PolicyLoadError)) throw e;
    err(`agent-policy-gate: ${args.policy}: ${e.message}\n`);
    return 3;
  }
  let input: unknown;
  try {
    input = parseJsonExact(inputText);
  } catch (e) {
    err(`agent-policy-gate: ${args.input}: invalid JSON: ${(e as Error).message}\n`);
    return 4;
  }
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    err(`agent-policy-gate: ${args.input}: the request must be a JSON object\n`);
    return 4;
  }
  let result: CheckResult;
  try {
    result = checkRequest(policy, requestType, input as Record<string, unknown>, args.raw, args.agentProto);
  } catch (e) {
    if (
      e instanceof RequestEncodeError ||
      e instanceof RequestDecodeError ||
      e instanceof CopyFileInputError
    ) {
      err(`agent-policy-gate: ${args.input}: ${e.message}\n`);
      return 4;
    }
    throw e;
  }
  for (const f of result.ignored)
    err(`agent-policy-gate: warning: ${f} is not a field of ${requestType}; ignored\n`);
  out(args.json ? `${stringifyJson(result)}\n` : formatCheck(result));
  return result.decision === 'allow' ? 0 : result.decision === 'deny' ? 1 : 3;
}

async function readLimited(path: string, max: number): Promise<string> {
  const bytes = await readFile(path);
  if (bytes.length > max)
    throw new AgentPolicyError(`${path} is larger than ${max} bytes`, { code: 'FILE_TOO_LARGE' });
  return bytes.toString('utf8');
}

async function runServe(args: ServeArgs, options: MainOptions): Promise<number> {
  const logger = createLogger({
    name: 'agent-policy-gate',
    ...(args.logLevel !== undefined && { env: { RUST_LOG: args.logLevel } }),
    ...(args.logFormat !== undefined && { format: args.logFormat }),
    ...(options.logDestination !== undefined && { destination: options.logDestination }),
  });
  const policy = new AgentPolicy({ regoVersion: args.regoVersion });
  try {
    const initial = await resolveInitialPolicy({ initdataPath: args.initdata, policyFile: args.policyFile });
    const loaded = policy.load(initial.text, initial.name);
    logger.info(
      {
        origin: initial.origin,
        ...(initial.path !== undefined && { path: initial.path }),
        regoVersion: loaded.regoVersion,
        allowRequestsFailingPolicy: loaded.allowRequestsFailingPolicy,
      },
      initial.origin === 'initdata' ? 'using policy from initdata' : 'using default policy',
    );
    if (loaded.allowRequestsFailingPolicy) {
      logger.warn({}, 'policy: AllowRequestsFailingPolicy is enabled - will ignore errors');
    }
  } catch (e) {
    if (!(e instanceof InitialPolicyError || e instanceof PolicyLoadError)) throw e;
    // Reported once, by the dialect, on stderr.
    throw new AgentPolicyError(`cannot load the initial policy: ${e.message}`, {
      cause: e,
      code: 'INITIAL_POLICY_UNUSABLE',
    });
  }

  const gate = new AgentPolicyGate({
    policy,
    agent: args.agent,
    unknownMethods: args.unknownMethods,
    agentProto: args.agentProto,
    logger,
  });
  const stopped = waitForStop(options.signal);
  const bound: TtrpcAddress[] = [];
  try {
    for (const l of args.listen) bound.push(await gate.listen(l));
  } catch (e) {
    stopped.cancel();
    await gate.close({ graceMs: 0 });
    throw new AgentPolicyError(`cannot listen: ${(e as Error).message}`, { cause: e, code: 'LISTEN_FAILED' });
  }
  logger.info(
    {
      listen: bound.map(formatTtrpcAddress),
      agent: formatTtrpcAddress(args.agent),
      unknownMethods: args.unknownMethods,
      agentProto: args.agentProto,
    },
    'agent-policy-gate serving',
  );
  options.onListening?.(gate, bound);
  const why = await stopped.promise;
  logger.info({ reason: why }, 'stopping');
  await gate.close();
  return 0;
}

const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

function waitForStop(signal: AbortSignal | undefined): { promise: Promise<string>; cancel(): void } {
  let finish: (why: string) => void = () => {};
  const promise = new Promise<string>((resolve) => {
    finish = resolve;
  });
  const handlers = STOP_SIGNALS.map((name) => {
    const h = () => done(name);
    process.on(name, h);
    return [name, h] as const;
  });
  const onAbort = () => done('abort');
  function done(why: string): void {
    for (const [name, h] of handlers) process.off(name, h);
    signal?.removeEventListener('abort', onAbort);
    finish(why);
  }
  if (signal?.aborted) done('abort');
  else signal?.addEventListener('abort', onAbort, { once: true });
  return { promise, cancel: () => done('cancelled') };
}

const TOP = {
  name: 'agent-policy-gate',
  version: VERSION,
  help: USAGE,
  subcommands: ['serve', 'check'],
} as const;

/** The `agent-policy-gate` command. Resolves with the exit status. */
export function main(argv: string[], options: MainOptions = {}): Promise<number> {
  const out = options.stdout ?? ((t: string) => void process.stdout.write(t));
  const err = options.stderr ?? ((t: string) => void process.stderr.write(t));
  const io = { out, err };
  return runCommand(
    TOP,
    argv,
    ({ command, rest }) =>
      command === 'serve'
        ? runCommand(SERVE, rest, ({ values }) => runServe(serveArgs(values), options), io)
        : runCommand(CHECK, rest, ({ values }) => runCheck(checkArgs(values), out, err), io),
    io,
  );
}
