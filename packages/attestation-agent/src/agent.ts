/**
 * The attestation agent's operations, independent of the transport: evidence
 * from the primary and additional attesters, tokens from the KBS (RCAR) or a
 * CoCo attestation service, and runtime measurements into the event log.
 *
 * Tokens are not cached: every `getToken("kbs")` runs a full RCAR handshake
 * with a fresh TEE key, as upstream does. The evidence behind a token must
 * be current (a runtime measurement changes it), and each caller gets a key
 * nobody else holds; the CDH caches the token it receives.
 */
import type { Attester } from '@broker/attester';
import { RuntimeMeasurementResult, TOKEN_TYPE_COCO_AS, TOKEN_TYPE_KBS } from '@broker/guest-api';
import type { Tee } from '@broker/protocol';
import { getCocoAsToken } from './coco-as.js';
import type { AaConfig } from './config.js';
import {
  InvalidRegisterIndex,
  RuntimeDataTooLarge,
  TokenConfigMissing,
  UnsupportedTokenType,
} from './errors.js';
import type { AaelEvent, EventLog } from './eventlog.js';

/**
 * Bound on `GetEvidence` runtime data. Real TEEs take at most 64 bytes of
 * report data (their attesters reject more); this keeps a 4 MiB request from
 * being base64-copied into sample evidence.
 */
export const MAX_RUNTIME_DATA_BYTES = 64 * 1024;
/** Highest register index accepted (the TCG2 entry stores it as a u32). */
export const MAX_REGISTER_INDEX = 0xffff_ffff;

export interface AgentLogger {
  debug(msg: string): void;
  info(msg: string): void;
  warn(msg: string): void;
}

export interface AttestationAgentOptions {
  readonly config: AaConfig;
  readonly attester: Attester;
  /** Additional attestable devices, in detection order. */
  readonly additionalAttesters?: readonly Attester[];
  /** Open when `enable_eventlog` is set and the attester can extend registers. */
  readonly eventlog?: EventLog;
  /** Init-data TOML from `--initdata-toml`, sent to the KBS with every token request. */
  readonly initDataToml?: string;
  readonly logger?: AgentLogger;
  /** KBS request timeout (default the KBS client's, 60 s). */
  readonly kbsTimeoutMs?: number;
  /** Pause between RCAR attempts (tests shorten it). */
  readonly kbsRetryDelay?: (ms: number) => Promise<void>;
}

const silent: AgentLogger = { debug() {}, info() {}, warn() {} };

function checkRuntimeData(runtimeData: Uint8Array): void {
  if (runtimeData.length > MAX_RUNTIME_DATA_BYTES) {
    throw new RuntimeDataTooLarge(
      `runtime data is ${runtimeData.length} bytes, more than the ${MAX_RUNTIME_DATA_BYTES} accepted`,
    );
  }
}

export class AttestationAgent {
  readonly #config: AaConfig;
  readonly #attester: Attester;
  readonly #additional: readonly Attester[];
  readonly #eventlog: EventLog | undefined;
  readonly #initDataToml: string | undefined;
  readonly #log: AgentLogger;
  readonly #kbsTimeoutMs: number | undefined;
  readonly #kbsRetryDelay: ((ms: number) => Promise<void>) | undefined;

  constructor(options: AttestationAgentOptions) {
    this.#config = options.config;
    this.#attester = options.attester;
    this.#additional = options.additionalAttesters ?? [];
    this.#eventlog = options.eventlog;
    this.#initDataToml = options.initDataToml;
    this.#log = options.logger ?? silent;
    this.#kbsTimeoutMs = options.kbsTimeoutMs;
    this.#kbsRetryDelay = options.kbsRetryDelay;
  }

  get teeType(): Tee {
    return this.#attester.tee;
  }

  get additionalTees(): Tee[] {
    return this.#additional.map((a) => a.tee);
  }

  /** The primary evidence JSON, UTF-8, with `runtimeData` bound as the report data as given. */
  async getEvidence(runtimeData: Uint8Array): Promise<Buffer> {
    checkRuntimeData(runtimeData);
    const evidence = await this.#attester.getEvidence(runtimeData);
    return Buffer.from(JSON.stringify(evidence), 'utf8');
  }

  /** `{"<tee>": evidence, …}` of the additional devices, or empty bytes when there are none. */
  async getAdditionalEvidence(runtimeData: Uint8Array): Promise<Buffer> {
    checkRuntimeData(runtimeData);
    if (this.#additional.length === 0) {
      this.#log.info('No additional attesters configured, returning empty evidence.');
      return Buffer.alloc(0);
    }
    const map: Record<string, unknown> = {};
    for (const a of this.#additional) map[a.tee] = await a.getEvidence(runtimeData);
    return Buffer.from(JSON.stringify(map), 'utf8');
  }

  /**
   * `kbs`: JSON `{"token","tee_keypair"}` after a fresh RCAR handshake;
   * `coco_as`: the attestation service's token text. Other types fail with
   * `UnsupportedTokenType`, a missing config table with `TokenConfigMissing`.
   */
  async getToken(tokenType: string): Promise<Buffer> {
    if (tokenType === TOKEN_TYPE_KBS) return this.#kbsToken();
    if (tokenType === TOKEN_TYPE_COCO_AS) {
      const cfg = this.#config.tokenConfigs.cocoAs;
      if (cfg === undefined) throw new TokenConfigMissing(TOKEN_TYPE_COCO_AS);
      return getCocoAsToken({ url: cfg.url, attester: this.#attester });
    }
    throw new UnsupportedTokenType(tokenType);
  }

  async #kbsToken(): Promise<Buffer> {
    const cfg = this.#config.tokenConfigs.kbs;
    if (cfg === undefined) throw new TokenConfigMissing(TOKEN_TYPE_KBS);
    // The KBS client (HTTP, TLS, JOSE) is loaded on first use, after the socket is up.
    const { KbsClient } = await import('@broker/kbs-client');
    const client = new KbsClient({
      url: cfg.url,
      attester: this.#attester,
      additionalAttesters: this.#additional,
      teeKeyAlgorithm: cfg.teeKeyAlgorithm,
      initData: this.#initDataToml ?? null,
      logger: this.#log,
      ...(cfg.cert !== undefined && { certPem: cfg.cert }),
      ...(this.#kbsTimeoutMs !== undefined && { timeoutMs: this.#kbsTimeoutMs }),
      ...(this.#kbsRetryDelay !== undefined && { sleep: this.#kbsRetryDelay }),
    });
    try {
      const { token, teeKeyPair } = await client.getToken();
      return Buffer.from(JSON.stringify({ token, tee_keypair: teeKeyPair.toPem() }), 'utf8');
    } finally {
      client.close();
    }
  }

  /**
   * Logs the event and extends the register (`registerIndex`, else
   * `init_pcr`): NOT_ENABLED when the config leaves the event log off,
   * NOT_SUPPORTED when the TEE cannot extend registers.
   */
  async extendRuntimeMeasurement(
    event: AaelEvent,
    registerIndex?: number | bigint,
  ): Promise<RuntimeMeasurementResult> {
    if (!this.#config.eventlog.enableEventlog) return RuntimeMeasurementResult.NOT_ENABLED;
    if (this.#eventlog === undefined) return RuntimeMeasurementResult.NOT_SUPPORTED;
    const index = registerIndex ?? this.#config.eventlog.initPcr;
    if (BigInt(index) < 0n || BigInt(index) > BigInt(MAX_REGISTER_INDEX)) {
      throw new InvalidRegisterIndex(`register index ${String(index)} is out of range`);
    }
    await this.#eventlog.extend(event, Number(index));
    return RuntimeMeasurementResult.OK;
  }

  async close(): Promise<void> {
    await this.#eventlog?.close();
  }
}
