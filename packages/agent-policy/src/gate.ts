/**
 * The agent-policy gate: a ttrpc interposer in front of the kata agent's socket. Each
 * `grpc.AgentService` request is decoded and checked against the policy the way the agent itself would
 * check it; allowed requests are forwarded byte for byte (metadata and deadline included) and the
 * agent's answer is relayed unchanged. `grpc.Health` is never checked.
 *
 * - Deny: PERMISSION_DENIED `"<Request> is blocked by policy: <prints>"` (Rust-Debug quoted, as kata).
 * - Policy error or undefined rule: INTERNAL `"<Request>: internal error <reason>"`.
 * - ReadStdout/ReadStderr: read first, then checked; a deny answers success with no data (hidden logs).
 * - SetPolicy: checked against the current policy, then the gate loads the new policy itself (it is not
 *   forwarded). A policy that does not load answers INVALID_ARGUMENT and leaves the gate failing closed.
 * - Undecodable requests: UNKNOWN `ttrpc err: …`, as ttrpc-rust answers a payload it cannot parse.
 * - Methods the gate does not know: denied (default) or passed through, by configuration.
 */
import { createHash } from 'node:crypto';
import type { Duplex } from 'node:stream';
import {
  type CallContext,
  type CallOptions,
  Code,
  formatTtrpcAddress,
  type ListenOptions,
  type TtrpcAddress,
  TtrpcClient,
  TtrpcError,
  TtrpcServer,
  type UnaryHandler,
} from '@broker/ttrpc';
import {
  AGENT_METHODS,
  AGENT_SERVICE,
  type AgentProtoProfile,
  HEALTH_SERVICE,
  isAgentProtoProfile,
} from './agent-proto.js';
import { type AgentPolicy, PolicyEvaluationError, PolicyLoadError } from './policy.js';
import { CopyFileInputError, policyInputOf } from './requests.js';
import { rustDebugString } from './rust-debug.js';
import { decodeRequest, RequestDecodeError } from './wire.js';

export type UnknownMethodMode = 'deny' | 'pass';

/** The logging surface the gate needs; a pino logger satisfies it. */
export interface GateLogger {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

const noop = (): void => {};
const silent: GateLogger = { debug: noop, info: noop, warn: noop, error: noop };

export interface AgentPolicyGateOptions {
  readonly policy: AgentPolicy;
  /** The agent's ttrpc socket (kata: `unix:///run/kata-containers/agent.sock` in peer pods). */
  readonly agent: TtrpcAddress;
  /** What to do with methods that are neither `grpc.AgentService` RPCs nor `grpc.Health`. Default deny. */
  readonly unknownMethods?: UnknownMethodMode;
  /**
   * The agent.proto version of the agent behind the gate (default `current`): it decides which fields
   * requests are decoded with and which the policy input has. See `AgentProtoProfile`.
   */
  readonly agentProto?: AgentProtoProfile;
  readonly logger?: GateLogger;
  /** Frame size cap on both sides; default 4 MiB as ttrpc. */
  readonly maxMessageSize?: number;
  /** How long connecting to the agent may take; default 10 000 ms. */
  readonly connectTimeoutMs?: number;
}

/** Most characters of `print` output copied into a denial log line. */
const MAX_LOGGED_PRINTS = 2000;
const EMPTY = new Uint8Array(0);
const READ_STREAM_METHODS = new Set(['ReadStdout', 'ReadStderr']);

/** One shared, multiplexed connection to the agent, opened on first use and reopened after it drops. */
class AgentConnection {
  private client: TtrpcClient | undefined;
  private connecting: Promise<TtrpcClient> | undefined;
  private closed = false;

  constructor(
    private readonly address: TtrpcAddress,
    private readonly options: { maxMessageSize?: number; connectTimeoutMs?: number },
    private readonly logger: GateLogger,
  ) {}

  async get(): Promise<TtrpcClient> {
    if (this.closed) throw new TtrpcError(Code.UNAVAILABLE, 'agent-policy-gate: closed');
    if (this.client && !this.client.closed) return this.client;
    this.connecting ??= TtrpcClient.connect(this.address, this.options)
      .then((c) => {
        if (this.closed) {
          c.close();
          throw new TtrpcError(Code.UNAVAILABLE, 'agent-policy-gate: closed');
        }
        this.client = c;
        this.logger.info({ agent: formatTtrpcAddress(this.address) }, 'connected to the agent');
        c.onClose((err) => {
          if (this.client === c) this.client = undefined;
          if (!this.closed) this.logger.warn({ err: err.message }, 'agent connection closed');
        });
        return c;
      })
      .finally(() => {
        this.connecting = undefined;
      });
    return this.connecting;
  }

  close(): void {
    this.closed = true;
    this.client?.close();
    this.client = undefined;
  }
}

export class AgentPolicyGate {
  readonly policy: AgentPolicy;
  private readonly server: TtrpcServer;
  private readonly agent: AgentConnection;
  readonly agentProto: AgentProtoProfile;
  private readonly unknownMethods: UnknownMethodMode;
  private readonly logger: GateLogger;

  constructor(options: AgentPolicyGateOptions) {
    this.policy = options.policy;
    this.agentProto = options.agentProto ?? 'current';
    if (!isAgentProtoProfile(this.agentProto)) {
      throw new TypeError(`unknown agentProto profile ${JSON.stringify(this.agentProto)}`);
    }
    this.unknownMethods = options.unknownMethods ?? 'deny';
    this.logger = options.logger ?? silent;
    const { maxMessageSize, connectTimeoutMs } = options;
    this.agent = new AgentConnection(
      options.agent,
      {
        ...(maxMessageSize !== undefined && { maxMessageSize }),
        ...(connectTimeoutMs !== undefined && { connectTimeoutMs }),
      },
      this.logger,
    );
    // Unknown services and methods are the gate's to deny or forward, not ttrpc's UNIMPLEMENTED.
    this.server = new TtrpcServer({
      ...(maxMessageSize !== undefined && { maxMessageSize }),
      logger: this.logger,
      fallback: (payload, ctx) => this.unknown(payload, ctx),
    });
    const methods: Record<string, UnaryHandler> = {};
    for (const [method, requestType] of Object.entries(AGENT_METHODS)) {
      methods[method] = (payload, ctx) => this.agentRequest(method, requestType, payload, ctx);
    }
    this.server.register(AGENT_SERVICE, methods);
    const passHealth: UnaryHandler = (payload, ctx) => this.forward(payload, ctx);
    this.server.register(HEALTH_SERVICE, { Check: passHealth, Version: passHealth });
  }

  /** Listens on a unix socket (`{ path }`) or TCP (`{ host, port }`); may be called for several addresses. */
  listen(address: ListenOptions): Promise<TtrpcAddress> {
    return this.server.listen(address);
  }

  /** Serves an already-connected stream (a TLS socket, for instance). */
  serveSocket(socket: Duplex): void {
    this.server.serveSocket(socket);
  }

  /** Stops listening, lets calls in flight finish (up to `graceMs`), then drops the agent connection. */
  async close(options: { graceMs?: number } = {}): Promise<void> {
    await this.server.close(options);
    this.agent.close();
  }

  private async forward(payload: Uint8Array, ctx: CallContext): Promise<Uint8Array> {
    const client = await this.agent.get();
    const options: CallOptions = { signal: ctx.signal };
    if (ctx.metadata.size > 0) {
      options.metadata = Object.fromEntries([...ctx.metadata].map(([k, v]) => [k, [...v]]));
    }
    if (ctx.deadline !== undefined) options.timeoutMs = Math.max(1, ctx.deadline - Date.now());
    return client.call(ctx.service, ctx.method, payload, options);
  }

  private async unknown(payload: Uint8Array, ctx: CallContext): Promise<Uint8Array> {
    // grpc.Health is never checked, whatever the method.
    if (this.unknownMethods === 'pass' || ctx.service === HEALTH_SERVICE) {
      this.logger.debug({ service: ctx.service, method: ctx.method }, 'passing an unknown method through');
      return this.forward(payload, ctx);
    }
    this.logger.warn(
      { service: ctx.service, method: ctx.method, code: 'PERMISSION_DENIED' },
      'unknown method denied',
    );
    throw new TtrpcError(
      Code.PERMISSION_DENIED,
      rustDebugString(`/${ctx.service}/${ctx.method} is blocked by the policy gate: unknown method`),
    );
  }

  private async agentRequest(
    method: string,
    requestType: string,
    payload: Uint8Array,
    ctx: CallContext,
  ): Promise<Uint8Array> {
    let input: unknown;
    let decoded: ReturnType<typeof decodeRequest>;
    try {
      decoded = decodeRequest(requestType, payload, this.agentProto);
    } catch (e) {
      if (!(e instanceof RequestDecodeError)) throw e;
      this.logger.warn({ kind: requestType, method, err: e.message }, 'undecodable request refused');
      throw new TtrpcError(Code.UNKNOWN, `ttrpc err: ${e.message}`);
    }
    try {
      input = policyInputOf(requestType, decoded, this.agentProto);
    } catch (e) {
      if (!(e instanceof CopyFileInputError)) throw e;
      this.logger.warn({ kind: requestType, method, err: 'invalid symlink content' }, 'request refused');
      throw new TtrpcError(Code.INTERNAL, e.message);
    }

    if (READ_STREAM_METHODS.has(method)) {
      // As the agent: read first, then ask the policy; a refusal hides the output instead of failing.
      const response = await this.forward(payload, ctx);
      if (this.decide(method, requestType, input) === true) return response;
      return EMPTY;
    }

    const decision = this.decide(method, requestType, input);
    if (decision !== true) throw decision;

    if (method === 'SetPolicy') return this.setPolicy(decoded.policy as string);
    return this.forward(payload, ctx);
  }

  /** `true`, or the error to answer with; denials and failures are logged here. */
  private decide(method: string, requestType: string, input: unknown): true | TtrpcError {
    try {
      const d = this.policy.evaluate(requestType, input);
      if (d.allowed) {
        if (d.ops.length > 0)
          this.logger.debug({ kind: requestType, ops: d.ops.length }, 'policy state updated');
        return true;
      }
      this.logger.warn(
        {
          kind: requestType,
          method,
          code: 'PERMISSION_DENIED',
          // A write's prints could echo the data written; never log them.
          ...(requestType !== 'WriteStreamRequest' && { prints: d.prints.slice(0, MAX_LOGGED_PRINTS) }),
        },
        'request denied by policy',
      );
      return new TtrpcError(
        Code.PERMISSION_DENIED,
        rustDebugString(`${requestType} is blocked by policy: ${d.prints}`),
      );
    } catch (e) {
      if (!(e instanceof PolicyEvaluationError)) throw e;
      this.logger.error(
        { kind: requestType, method, code: 'INTERNAL', err: e.reason.slice(0, MAX_LOGGED_PRINTS) },
        'policy could not decide',
      );
      return new TtrpcError(Code.INTERNAL, rustDebugString(e.message));
    }
  }

  private setPolicy(text: string): Uint8Array {
    const sha256 = createHash('sha256').update(text).digest('hex');
    try {
      const loaded = this.policy.load(text);
      this.logger.info(
        {
          sha256,
          bytes: Buffer.byteLength(text),
          allowRequestsFailingPolicy: loaded.allowRequestsFailingPolicy,
        },
        'policy replaced by SetPolicy',
      );
      return EMPTY;
    } catch (e) {
      if (!(e instanceof PolicyLoadError)) throw e;
      this.logger.error(
        { sha256, err: e.message.slice(0, MAX_LOGGED_PRINTS) },
        'SetPolicy: policy rejected; failing closed',
      );
      throw new TtrpcError(Code.INVALID_ARGUMENT, e.message);
    }
  }
}
