/**
 * `agent-policy-gate serve …` runs the gate; `agent-policy-gate check …` evaluates one request the way
 * the gate does, so an operator can try a policy before putting it into initdata.
 */
import { readFile } from 'node:fs/promises';
import { formatTtrpcAddress, type ListenOptions, parseTtrpcAddress, type TtrpcAddress } from '@broker/ttrpc';
import pino, { type DestinationStream, type Level } from 'pino';
import {
  AGENT_METHODS,
  AGENT_PROTO_PROFILES,
  type AgentProtoProfile,
  isAgentProtoProfile,
  REQUEST_TYPES,
} from './agent-proto.js';
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

const USAGE = `Usage:
  agent-policy-gate serve [OPTIONS]
  agent-policy-gate check --policy FILE --request NAME --input FILE [--raw] [--json] [--rego-version V]
                          [--agent-proto P]

serve: enforce policy.rego on every kata agent ttrpc request, forwarding allowed ones to the agent.
  --listen ADDR            where the host side connects, tcp://HOST:PORT or unix:///PATH; repeatable
                           [default: ${DEFAULT_LISTEN}]
  --agent ADDR             the agent's ttrpc socket [default: ${DEFAULT_AGENT_ADDRESS}]
  --initdata FILE          initdata TOML whose data."policy.rego" is the first choice of policy
                           [default: ${DEFAULT_INITDATA_TOML_PATH}]
  --no-initdata            do not read initdata
  --policy-file FILE       policy used when initdata has none [default: ${DEFAULT_POLICY_FILE}];
                           when neither exists, the built-in default policy applies
  --unknown-methods MODE   deny or pass requests the gate does not know [default: deny]
  --rego-version V         auto, v1 or v0 [default: auto: Rego v1 as kata-agent parses today, falling back
                           to v0 for older genpolicy output]
  --agent-proto P          the agent's agent.proto version: current, or 3.3 for kata 3.3.0 to 3.14.x
                           (no Storage.shared, Route.flags, Route.mtu; Interface.pciPath; CopyFile
                           unreduced) [default: current]
  --log-level LEVEL        trace, debug, info, warn, error or silent [default: info]

check: evaluate one request against a policy and print the decision, the policy's prints and state ops.
  --policy FILE            the policy (package agent_policy)
  --request NAME           the request message type (ExecProcessRequest) or RPC name (ExecProcess)
  --input FILE             the request as JSON, in the policy-input form (proto field names)
  --raw                    use the JSON as the policy input as is, instead of normalising it through the
                           protobuf message (defaults filled in, CopyFile reduced) as the gate does
  --json                   print the result as one JSON object
  --rego-version V         auto, v1 or v0 [default: auto]
  --agent-proto P          current or 3.3, as for serve [default: current]

Exit status: 0 allowed, 1 denied, 2 usage error, 3 the policy could not decide or load, 4 bad input.
`;

export interface MainOptions {
  readonly stdout?: (text: string) => void;
  readonly stderr?: (text: string) => void;
  /** Where `serve` writes JSON log lines; default stderr. */
  readonly logDestination?: DestinationStream;
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
  readonly logLevel: Level | 'silent';
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

class UsageError extends Error {}

const LOG_LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']);

/** Splits `--flag value` and `--flag=value`; booleans take no value. */
function parseFlags(
  argv: readonly string[],
  valued: ReadonlySet<string>,
  booleans: ReadonlySet<string>,
): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const eq = a.indexOf('=');
    const name = a.startsWith('--') && eq > 0 ? a.slice(0, eq) : a;
    let value: string | undefined;
    if (booleans.has(name) && eq < 0) value = '';
    else if (valued.has(name)) {
      value = eq > 0 && a.startsWith('--') ? a.slice(eq + 1) : argv[++i];
      if (value === undefined) throw new UsageError(`${name} needs a value`);
    } else {
      throw new UsageError(`unexpected argument ${JSON.stringify(a.slice(0, 200))}`);
    }
    out.set(name, [...(out.get(name) ?? []), value]);
  }
  return out;
}

function single(flags: Map<string, string[]>, name: string): string | undefined {
  const v = flags.get(name);
  if (v === undefined) return undefined;
  if (v.length > 1) throw new UsageError(`${name} given more than once`);
  return v[0];
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

function regoVersionFlag(flags: Map<string, string[]>): RegoDialect | 'auto' {
  const v = single(flags, '--rego-version') ?? 'auto';
  if (v !== 'auto' && v !== 'v0' && v !== 'v1') throw new UsageError('--rego-version must be auto, v0 or v1');
  return v;
}

function agentProtoFlag(flags: Map<string, string[]>): AgentProtoProfile {
  const v = single(flags, '--agent-proto') ?? 'current';
  if (!isAgentProtoProfile(v)) {
    throw new UsageError(`--agent-proto must be one of ${AGENT_PROTO_PROFILES.join(', ')}`);
  }
  return v;
}

function parseServeArgs(argv: readonly string[]): ServeArgs {
  const flags = parseFlags(
    argv,
    new Set([
      '--listen',
      '--agent',
      '--initdata',
      '--policy-file',
      '--unknown-methods',
      '--log-level',
      '--rego-version',
      '--agent-proto',
    ]),
    new Set(['--no-initdata']),
  );
  const unknown = single(flags, '--unknown-methods') ?? 'deny';
  if (unknown !== 'deny' && unknown !== 'pass')
    throw new UsageError('--unknown-methods must be deny or pass');
  const logLevel = single(flags, '--log-level') ?? 'info';
  if (!LOG_LEVELS.has(logLevel))
    throw new UsageError(`unknown log level ${JSON.stringify(logLevel.slice(0, 40))}`);
  if (flags.has('--no-initdata') && flags.has('--initdata')) {
    throw new UsageError('--initdata and --no-initdata exclude each other');
  }
  return {
    listen: (flags.get('--listen') ?? [DEFAULT_LISTEN]).map(parseListen),
    agent: parseAddress(single(flags, '--agent') ?? DEFAULT_AGENT_ADDRESS),
    initdata: flags.has('--no-initdata') ? null : (single(flags, '--initdata') ?? DEFAULT_INITDATA_TOML_PATH),
    policyFile: single(flags, '--policy-file') ?? DEFAULT_POLICY_FILE,
    unknownMethods: unknown,
    regoVersion: regoVersionFlag(flags),
    agentProto: agentProtoFlag(flags),
    logLevel: logLevel as Level | 'silent',
  };
}

function parseCheckArgs(argv: readonly string[]): CheckArgs {
  const flags = parseFlags(
    argv,
    new Set(['--policy', '--request', '--input', '--rego-version', '--agent-proto']),
    new Set(['--raw', '--json']),
  );
  const need = (name: string): string => {
    const v = single(flags, name);
    if (v === undefined) throw new UsageError(`${name} is required`);
    return v;
  };
  return {
    policy: need('--policy'),
    request: need('--request'),
    input: need('--input'),
    raw: flags.has('--raw'),
    json: flags.has('--json'),
    regoVersion: regoVersionFlag(flags),
    agentProto: agentProtoFlag(flags),
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
  if (requestType === undefined) {
    err(`agent-policy-gate: unknown request ${JSON.stringify(args.request.slice(0, 80))}\n`);
    return 2;
  }
  let policyText: string;
  let inputText: string;
  try {
    policyText = await readLimited(args.policy, POLICY_MAX_FILE_BYTES);
    inputText = await readLimited(args.input, MAX_INPUT_BYTES);
  } catch (e) {
    err(`agent-policy-gate: ${(e as Error).message}\n`);
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
  if (bytes.length > max) throw new Error(`${path} is larger than ${max} bytes`);
  return bytes.toString('utf8');
}

async function runServe(args: ServeArgs, options: MainOptions, err: (t: string) => void): Promise<number> {
  const logger = pino(
    { name: 'agent-policy-gate', level: args.logLevel },
    options.logDestination ?? pino.destination({ fd: 2, sync: true }),
  );
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
    logger.fatal({ err: e.message }, 'cannot load the initial policy');
    err(`agent-policy-gate: ${e.message}\n`);
    return 1;
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
    logger.fatal({ err: (e as Error).message }, 'cannot listen');
    err(`agent-policy-gate: cannot listen: ${(e as Error).message}\n`);
    return 1;
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

/** The `agent-policy-gate` command. Resolves with the exit status. */
export async function main(argv: string[], options: MainOptions = {}): Promise<number> {
  const out = options.stdout ?? ((t: string) => process.stdout.write(t));
  const err = options.stderr ?? ((t: string) => process.stderr.write(t));
  const [command, ...rest] = argv;
  if (command === undefined || command === '-h' || command === '--help' || command === 'help') {
    (command === undefined ? err : out)(USAGE);
    return command === undefined ? 2 : 0;
  }
  try {
    if (command === 'serve') return await runServe(parseServeArgs(rest), options, err);
    if (command === 'check') return await runCheck(parseCheckArgs(rest), out, err);
    throw new UsageError(`unknown command ${JSON.stringify(command.slice(0, 80))}`);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    err(`agent-policy-gate: ${e.message}\n\n${USAGE}`);
    return 2;
  }
}
