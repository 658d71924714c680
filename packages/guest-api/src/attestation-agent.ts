/**
 * The attestation agent's ttrpc API (package `attestation_agent`): message
 * definitions with guest-components' field names and numbers, a typed client
 * for the confidential data hub and api-server-rest, and a helper that
 * registers an agent's implementation on a server.
 *
 * Field names are kept verbatim: upstream uses PascalCase (`RuntimeData`,
 * `TokenType`) next to snake_case (`tee`, `additional_tees`), and unmodified
 * upstream clients (kata agent, CDH, api-server-rest) send exactly those.
 */

import {
  type CallContext,
  type CallOptions,
  Code,
  type ConnectOptions,
  defineProto,
  type MessageCodec,
  messageCodec,
  serverMethod,
  type TtrpcAddress,
  type TtrpcClient,
  TtrpcError,
  type TtrpcServer,
  type UnaryHandler,
} from '@broker/ttrpc';
import { GuestApiError, type GuestApiErrorCode } from './errors.js';
import { connectTtrpc, TypedTtrpcClient } from './typed-client.js';

export const ATTESTATION_AGENT_SERVICE = 'attestation_agent.AttestationAgentService';

/** Where upstream's ttrpc agent listens (`ttrpc-aa`'s default `--attestation_sock`). */
export const DEFAULT_ATTESTATION_AGENT_SOCKET_PATH =
  '/run/confidential-containers/attestation-agent/attestation-agent.sock';
/** The same socket as a ttrpc address. */
export const DEFAULT_ATTESTATION_AGENT_SOCKET = `unix://${DEFAULT_ATTESTATION_AGENT_SOCKET_PATH}`;

/** Prefix of every agent failure's status message; the code is INTERNAL (upstream `ttrpc_dep/server.rs`). */
export const AA_ERROR_PREFIX = '[ERROR:attestation-agent] ';

/** The token types upstream's agent knows (`TokenType`): KBS (RCAR) and CoCo-AS. */
export const TOKEN_TYPE_KBS = 'kbs';
export const TOKEN_TYPE_COCO_AS = 'coco_as';

/** Our own proto text; names and numbers follow upstream `attestation-agent.proto`. */
export const ATTESTATION_AGENT_PROTO = `
syntax = "proto3";
package attestation_agent;

message GetEvidenceRequest { bytes RuntimeData = 1; }
message GetAdditionalEvidenceRequest { bytes RuntimeData = 1; }
message GetEvidenceResponse { bytes Evidence = 1; }

message GetTokenRequest { string TokenType = 1; }
message GetTokenResponse { bytes Token = 1; }

message ExtendRuntimeMeasurementRequest {
  string Domain = 1;
  string Operation = 2;
  string Content = 3;
  optional uint64 RegisterIndex = 4;
}
enum RuntimeMeasurementResult {
  OK = 0;
  NOT_SUPPORTED = 1;
  NOT_ENABLED = 2;
}
message ExtendRuntimeMeasurementResponse { RuntimeMeasurementResult Result = 1; }

message BindInitDataRequest { bytes Digest = 1; }
message BindInitDataResponse {}

message GetTeeTypeRequest {}
message GetTeeTypeResponse { string tee = 1; }

message GetAdditionalTeesRequest {}
message GetAdditionalTeesResponse { repeated string additional_tees = 1; }

service AttestationAgentService {
  rpc GetEvidence(GetEvidenceRequest) returns (GetEvidenceResponse);
  rpc GetAdditionalEvidence(GetAdditionalEvidenceRequest) returns (GetEvidenceResponse);
  rpc GetToken(GetTokenRequest) returns (GetTokenResponse);
  rpc ExtendRuntimeMeasurement(ExtendRuntimeMeasurementRequest) returns (ExtendRuntimeMeasurementResponse);
  rpc BindInitData(BindInitDataRequest) returns (BindInitDataResponse);
  rpc GetTeeType(GetTeeTypeRequest) returns (GetTeeTypeResponse);
  rpc GetAdditionalTees(GetAdditionalTeesRequest) returns (GetAdditionalTeesResponse);
}
`;

export interface GetEvidenceRequest {
  /** Bound into the evidence as the report data, as given (no hashing). */
  RuntimeData: Uint8Array;
}
export interface GetAdditionalEvidenceRequest {
  RuntimeData: Uint8Array;
}
export interface GetEvidenceResponse {
  /** The evidence JSON as UTF-8 bytes; for additional evidence a `{"<tee>": …}` map, or empty. */
  Evidence: Uint8Array;
}
export interface GetTokenRequest {
  TokenType: string;
}
export interface GetTokenResponse {
  /** For `kbs`: JSON `{"token","tee_keypair"}`; for `coco_as`: the token text. */
  Token: Uint8Array;
}
export interface ExtendRuntimeMeasurementRequest {
  Domain: string;
  Operation: string;
  /** One line: upstream refuses a newline. */
  Content: string;
  /** PCR index; the agent's `init_pcr` when absent. Decodes as a bigint. */
  RegisterIndex?: bigint | number;
}
/** `RuntimeMeasurementResult` enum values. */
export const RuntimeMeasurementResult = Object.freeze({
  OK: 0,
  NOT_SUPPORTED: 1,
  NOT_ENABLED: 2,
} as const);
export type RuntimeMeasurementResult =
  (typeof RuntimeMeasurementResult)[keyof typeof RuntimeMeasurementResult];
export interface ExtendRuntimeMeasurementResponse {
  Result: number;
}
export interface BindInitDataRequest {
  Digest: Uint8Array;
}
export type BindInitDataResponse = Record<string, never>;
export type GetTeeTypeRequest = Record<string, never>;
export interface GetTeeTypeResponse {
  tee: string;
}
export type GetAdditionalTeesRequest = Record<string, never>;
export interface GetAdditionalTeesResponse {
  additional_tees: string[];
}

const root = defineProto(ATTESTATION_AGENT_PROTO);
const codec = <T>(name: string): MessageCodec<T> => messageCodec<T>(root, `attestation_agent.${name}`);

export const GetEvidenceRequestCodec = codec<GetEvidenceRequest>('GetEvidenceRequest');
export const GetAdditionalEvidenceRequestCodec = codec<GetAdditionalEvidenceRequest>(
  'GetAdditionalEvidenceRequest',
);
export const GetEvidenceResponseCodec = codec<GetEvidenceResponse>('GetEvidenceResponse');
export const GetTokenRequestCodec = codec<GetTokenRequest>('GetTokenRequest');
export const GetTokenResponseCodec = codec<GetTokenResponse>('GetTokenResponse');
export const ExtendRuntimeMeasurementRequestCodec = codec<ExtendRuntimeMeasurementRequest>(
  'ExtendRuntimeMeasurementRequest',
);
export const ExtendRuntimeMeasurementResponseCodec = codec<ExtendRuntimeMeasurementResponse>(
  'ExtendRuntimeMeasurementResponse',
);
export const BindInitDataRequestCodec = codec<BindInitDataRequest>('BindInitDataRequest');
export const BindInitDataResponseCodec = codec<BindInitDataResponse>('BindInitDataResponse');
export const GetTeeTypeRequestCodec = codec<GetTeeTypeRequest>('GetTeeTypeRequest');
export const GetTeeTypeResponseCodec = codec<GetTeeTypeResponse>('GetTeeTypeResponse');
export const GetAdditionalTeesRequestCodec = codec<GetAdditionalTeesRequest>('GetAdditionalTeesRequest');
export const GetAdditionalTeesResponseCodec = codec<GetAdditionalTeesResponse>('GetAdditionalTeesResponse');

/** The reply of `GetToken("kbs")`: an attestation token and the PEM private key it certifies. */
export interface KbsTokenReply {
  readonly token: string;
  /** PEM: PKCS#8 for EC keys, PKCS#1 for RSA keys. */
  readonly tee_keypair: string;
}

/** `GetToken("kbs")` bytes that are not `{"token": string, "tee_keypair": string}`. */
export class InvalidKbsTokenReply extends GuestApiError {
  override readonly code: GuestApiErrorCode = 'KBS_TOKEN_REPLY_INVALID';
  override readonly name: string = 'InvalidKbsTokenReply';
}

/** Serializes a KBS token reply as upstream does (`{"token","tee_keypair"}`, in that order). */
export function encodeKbsTokenReply(reply: KbsTokenReply): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ token: reply.token, tee_keypair: reply.tee_keypair }));
}

/**
 * Parses `GetToken("kbs")` bytes. Other members are ignored, as upstream's
 * token provider does; the strings are not checked further here (the KBS
 * client parses the token and the key).
 */
export function decodeKbsTokenReply(bytes: Uint8Array): KbsTokenReply {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (cause) {
    throw new InvalidKbsTokenReply('attestation agent token reply is not JSON', { cause });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidKbsTokenReply('attestation agent token reply is not a JSON object');
  }
  const { token, tee_keypair } = value as Record<string, unknown>;
  if (typeof token !== 'string') throw new InvalidKbsTokenReply('token reply: `token` must be a string');
  if (typeof tee_keypair !== 'string') {
    throw new InvalidKbsTokenReply('token reply: `tee_keypair` must be a string');
  }
  return { token, tee_keypair };
}

export interface AttestationAgentClientOptions extends ConnectOptions {
  /**
   * Deadline of each call unless the call gives its own; default 50 s, the
   * timeout upstream's CDH and api-server-rest use towards the agent. 0 means none.
   */
  timeoutMs?: number;
}

export const DEFAULT_ATTESTATION_AGENT_CALL_TIMEOUT_MS = 50_000;

export interface RuntimeMeasurementEvent {
  readonly domain: string;
  readonly operation: string;
  readonly content: string;
  /** PCR index; absent = the agent's `init_pcr`. */
  readonly registerIndex?: number | bigint;
}

/**
 * A typed client of the attestation agent. Failures reject with
 * `TtrpcError`: the agent's own errors are INTERNAL `[ERROR:attestation-agent] …`;
 * a lost connection is `TtrpcClosedError` (make a new client).
 */
export class AttestationAgentClient extends TypedTtrpcClient {
  /** Connects to `address` (`unix:///…`, `tcp://host:port` or an absolute path), default the agent's socket. */
  static async connect(
    address: string | TtrpcAddress = DEFAULT_ATTESTATION_AGENT_SOCKET,
    options: AttestationAgentClientOptions = {},
  ): Promise<AttestationAgentClient> {
    return new AttestationAgentClient(await connectTtrpc(address, options), options);
  }

  /** Wraps a connected ttrpc client; `close()` closes it. */
  constructor(client: TtrpcClient, options: { timeoutMs?: number } = {}) {
    super(client, options.timeoutMs ?? DEFAULT_ATTESTATION_AGENT_CALL_TIMEOUT_MS);
  }

  /** The primary TEE's evidence JSON (bytes) with `runtimeData` as its report data. */
  async getEvidence(runtimeData: Uint8Array, options?: CallOptions): Promise<Uint8Array> {
    const res = await this.call(
      ATTESTATION_AGENT_SERVICE,
      'GetEvidence',
      GetEvidenceRequestCodec,
      GetEvidenceResponseCodec,
      { RuntimeData: runtimeData },
      options,
    );
    return res.Evidence;
  }

  /** The additional devices' evidence as a JSON map (bytes), or empty bytes when there are none. */
  async getAdditionalEvidence(runtimeData: Uint8Array, options?: CallOptions): Promise<Uint8Array> {
    const res = await this.call(
      ATTESTATION_AGENT_SERVICE,
      'GetAdditionalEvidence',
      GetAdditionalEvidenceRequestCodec,
      GetEvidenceResponseCodec,
      { RuntimeData: runtimeData },
      options,
    );
    return res.Evidence;
  }

  /** The raw `GetToken` reply for `tokenType` (`kbs` or `coco_as`). */
  async getToken(tokenType: string, options?: CallOptions): Promise<Uint8Array> {
    const res = await this.call(
      ATTESTATION_AGENT_SERVICE,
      'GetToken',
      GetTokenRequestCodec,
      GetTokenResponseCodec,
      { TokenType: tokenType },
      options,
    );
    return res.Token;
  }

  /** `GetToken("kbs")`, parsed. Throws `InvalidKbsTokenReply` for a malformed reply. */
  async getKbsToken(options?: CallOptions): Promise<KbsTokenReply> {
    return decodeKbsTokenReply(await this.getToken(TOKEN_TYPE_KBS, options));
  }

  /** Records an event in the agent's event log and extends the register; resolves with the result code. */
  async extendRuntimeMeasurement(
    event: RuntimeMeasurementEvent,
    options?: CallOptions,
  ): Promise<RuntimeMeasurementResult> {
    const req: ExtendRuntimeMeasurementRequest = {
      Domain: event.domain,
      Operation: event.operation,
      Content: event.content,
    };
    if (event.registerIndex !== undefined) req.RegisterIndex = event.registerIndex;
    const res = await this.call(
      ATTESTATION_AGENT_SERVICE,
      'ExtendRuntimeMeasurement',
      ExtendRuntimeMeasurementRequestCodec,
      ExtendRuntimeMeasurementResponseCodec,
      req,
      options,
    );
    return res.Result as RuntimeMeasurementResult;
  }

  /**
   * Asks the agent to bind an init-data digest. Upstream's ttrpc agent (and
   * ours) does not serve it: binding happens at start-up. Kept for agents
   * that do.
   */
  async bindInitData(digest: Uint8Array, options?: CallOptions): Promise<void> {
    await this.call(
      ATTESTATION_AGENT_SERVICE,
      'BindInitData',
      BindInitDataRequestCodec,
      BindInitDataResponseCodec,
      { Digest: digest },
      options,
    );
  }

  /** The primary TEE's name (`tdx`, `snp`, `sample`, …). */
  async getTeeType(options?: CallOptions): Promise<string> {
    const res = await this.call(
      ATTESTATION_AGENT_SERVICE,
      'GetTeeType',
      GetTeeTypeRequestCodec,
      GetTeeTypeResponseCodec,
      {},
      options,
    );
    return res.tee;
  }

  /** The additional attestable devices' names (`nvidia`, `sampledevice`, …). */
  async getAdditionalTees(options?: CallOptions): Promise<string[]> {
    const res = await this.call(
      ATTESTATION_AGENT_SERVICE,
      'GetAdditionalTees',
      GetAdditionalTeesRequestCodec,
      GetAdditionalTeesResponseCodec,
      {},
      options,
    );
    return res.additional_tees;
  }
}

/**
 * What an agent serves. A member that throws a `TtrpcError` sends it as it
 * is; any other error becomes INTERNAL with upstream's per-method wording plus
 * the error's message (`[ERROR:attestation-agent] AA-KBC get token failed: …`),
 * so messages must be safe to show (no secrets). An absent member answers as
 * upstream's generated default: NOT_FOUND `/<service>/<Method> is not supported`.
 */
export interface AttestationAgentServiceImpl {
  getEvidence?(runtimeData: Uint8Array, ctx: CallContext): Promise<Uint8Array>;
  getAdditionalEvidence?(runtimeData: Uint8Array, ctx: CallContext): Promise<Uint8Array>;
  getToken?(tokenType: string, ctx: CallContext): Promise<Uint8Array>;
  extendRuntimeMeasurement?(
    request: ExtendRuntimeMeasurementRequest,
    ctx: CallContext,
  ): Promise<RuntimeMeasurementResult>;
  bindInitData?(digest: Uint8Array, ctx: CallContext): Promise<void>;
  getTeeType?(ctx: CallContext): Promise<string>;
  getAdditionalTees?(ctx: CallContext): Promise<string[]>;
}

/** INTERNAL `[ERROR:attestation-agent] <what>[: <detail>]`. */
export function attestationAgentError(
  what: string,
  detail?: string,
  options?: { cause?: unknown },
): TtrpcError {
  const text = detail === undefined || detail === '' ? what : `${what}: ${detail}`;
  return new TtrpcError(Code.INTERNAL, `${AA_ERROR_PREFIX}${text}`, options);
}

function notSupported(method: string): UnaryHandler {
  return async () => {
    throw new TtrpcError(Code.NOT_FOUND, `/${ATTESTATION_AGENT_SERVICE}/${method} is not supported`);
  };
}

async function asAgentError<T>(what: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof TtrpcError) throw err;
    throw attestationAgentError(what, err instanceof Error ? err.message : String(err), { cause: err });
  }
}

/** Registers `attestation_agent.AttestationAgentService` with `impl` on `server`. */
export function registerAttestationAgentService(
  server: TtrpcServer,
  impl: AttestationAgentServiceImpl,
): void {
  const {
    getEvidence,
    getAdditionalEvidence,
    getToken,
    extendRuntimeMeasurement,
    bindInitData,
    getTeeType,
    getAdditionalTees,
  } = impl;
  const evidenceFailed = 'AA-KBC get evidence failed';
  const teeTypeFailed = 'AA-KBC get tee type failed';
  server.register(ATTESTATION_AGENT_SERVICE, {
    GetEvidence:
      getEvidence === undefined
        ? notSupported('GetEvidence')
        : serverMethod(GetEvidenceRequestCodec, GetEvidenceResponseCodec, async (req, ctx) => ({
            Evidence: await asAgentError(evidenceFailed, () => getEvidence.call(impl, req.RuntimeData, ctx)),
          })),
    GetAdditionalEvidence:
      getAdditionalEvidence === undefined
        ? notSupported('GetAdditionalEvidence')
        : serverMethod(GetAdditionalEvidenceRequestCodec, GetEvidenceResponseCodec, async (req, ctx) => ({
            Evidence: await asAgentError(evidenceFailed, () =>
              getAdditionalEvidence.call(impl, req.RuntimeData, ctx),
            ),
          })),
    GetToken:
      getToken === undefined
        ? notSupported('GetToken')
        : serverMethod(GetTokenRequestCodec, GetTokenResponseCodec, async (req, ctx) => ({
            Token: await asAgentError('AA-KBC get token failed', () =>
              getToken.call(impl, req.TokenType, ctx),
            ),
          })),
    ExtendRuntimeMeasurement:
      extendRuntimeMeasurement === undefined
        ? notSupported('ExtendRuntimeMeasurement')
        : serverMethod(
            ExtendRuntimeMeasurementRequestCodec,
            ExtendRuntimeMeasurementResponseCodec,
            async (req, ctx) => ({
              Result: await asAgentError('AA extend runtime measurement failed', () =>
                extendRuntimeMeasurement.call(impl, req, ctx),
              ),
            }),
          ),
    BindInitData:
      bindInitData === undefined
        ? notSupported('BindInitData')
        : serverMethod(BindInitDataRequestCodec, BindInitDataResponseCodec, async (req, ctx) => {
            await asAgentError('AA bind init data failed', () => bindInitData.call(impl, req.Digest, ctx));
            return {};
          }),
    GetTeeType:
      getTeeType === undefined
        ? notSupported('GetTeeType')
        : serverMethod(GetTeeTypeRequestCodec, GetTeeTypeResponseCodec, async (_req, ctx) => ({
            tee: await asAgentError(teeTypeFailed, () => getTeeType.call(impl, ctx)),
          })),
    GetAdditionalTees:
      getAdditionalTees === undefined
        ? notSupported('GetAdditionalTees')
        : serverMethod(GetAdditionalTeesRequestCodec, GetAdditionalTeesResponseCodec, async (_req, ctx) => ({
            additional_tees: await asAgentError(teeTypeFailed, () => getAdditionalTees.call(impl, ctx)),
          })),
  });
}
