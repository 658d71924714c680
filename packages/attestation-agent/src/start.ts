/**
 * Start-up in upstream's order: detect the TEE and devices, bind init-data,
 * open the event log, then serve `attestation_agent.AttestationAgentService`
 * on the unix socket.
 */
import {
  type Attester,
  type DetectOptions,
  detectAdditionalDevices,
  detectTee,
  getAttester,
} from '@broker/attester';
import { type AttestationAgentServiceImpl, registerAttestationAgentService } from '@broker/guest-api';
import { TtrpcServer } from '@broker/ttrpc';
import type { Logger } from 'pino';
import { AttestationAgent } from './agent.js';
import type { AaConfig } from './config.js';
import { canMeasure, EventLog, runtimeMeasurementProfile } from './eventlog.js';
import { bindInitData, type InitDataBinding, type LoadedInitData } from './initdata.js';

export interface StartOptions {
  readonly config: AaConfig;
  /** Unix socket path (its folder is created, a stale socket replaced). */
  readonly socketPath: string;
  readonly logger: Logger;
  /** Where TEE probes look (`root`, `env`, `modules`); default the real machine. */
  readonly detect?: DetectOptions;
  /** `--initdata-toml`: bound, and sent to the KBS. Wins over `initDataDigest`, as upstream. */
  readonly initData?: LoadedInitData;
  /** `--initdata-digest`: bound only. */
  readonly initDataDigest?: Uint8Array;
  /** Default `/run/attestation-agent`. */
  readonly eventlogDir?: string;
  readonly kbsTimeoutMs?: number;
  readonly kbsRetryDelay?: (ms: number) => Promise<void>;
}

export interface RunningAttestationAgent {
  readonly agent: AttestationAgent;
  readonly socketPath: string;
  readonly initDataBinding: InitDataBinding | 'none';
  /** Stops serving (in-flight calls get a grace period) and closes the event log. */
  close(): Promise<void>;
}

/** The ttrpc face of an agent; `BindInitData` is left out, so it answers as upstream's ttrpc server. */
export function attestationAgentService(
  agent: AttestationAgent,
  logger: Logger,
): AttestationAgentServiceImpl {
  const logged = async <T>(what: string, run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (err) {
      logger.error({ err: err instanceof Error ? err.message : String(err) }, `AA (ttrpc): ${what} failed`);
      throw err;
    }
  };
  return {
    getEvidence: (runtimeData) => logged('get evidence', () => agent.getEvidence(runtimeData)),
    getAdditionalEvidence: (runtimeData) =>
      logged('get additional evidence', () => agent.getAdditionalEvidence(runtimeData)),
    getToken: (tokenType) =>
      logged('get token', async () => {
        const started = performance.now();
        const token = await agent.getToken(tokenType);
        // Never the token itself: it and the key in it are credentials.
        logger.info({ tokenType, ms: Math.round(performance.now() - started) }, 'AA (ttrpc): token issued');
        return token;
      }),
    extendRuntimeMeasurement: (req) =>
      logged('extend runtime measurement', () =>
        agent.extendRuntimeMeasurement(
          { domain: req.Domain, operation: req.Operation, content: req.Content },
          req.RegisterIndex,
        ),
      ),
    getTeeType: async () => agent.teeType,
    getAdditionalTees: async () => agent.additionalTees,
  };
}

async function detectAttesters(
  detect: DetectOptions,
  logger: Logger,
): Promise<{ primary: Attester; additional: Attester[] }> {
  const options: DetectOptions = { ...detect, logger };
  const tee = await detectTee(options);
  const primary = getAttester(tee, options);
  const devices = await detectAdditionalDevices({ ...options, primary: tee });
  if (devices.length > 0) logger.info({ devices }, 'additional attestable devices');
  return { primary, additional: devices.map((d) => getAttester(d, options)) };
}

async function openEventlog(options: StartOptions, attester: Attester): Promise<EventLog | undefined> {
  if (!options.config.eventlog.enableEventlog) return undefined;
  const profile = runtimeMeasurementProfile(attester.tee);
  if (!canMeasure(attester) || profile === undefined) {
    options.logger.warn(
      `eventlog enabled, but TEE ${attester.tee} cannot extend runtime measurements: ExtendRuntimeMeasurement answers NOT_SUPPORTED`,
    );
    return undefined;
  }
  return EventLog.open({
    attester,
    profile,
    logger: options.logger,
    ...(options.eventlogDir !== undefined && { dir: options.eventlogDir }),
  });
}

export async function startAttestationAgent(options: StartOptions): Promise<RunningAttestationAgent> {
  const { logger } = options;
  const { primary, additional } = await detectAttesters(options.detect ?? {}, logger);

  let initDataBinding: InitDataBinding | 'none' = 'none';
  const digest = options.initData?.digest ?? options.initDataDigest;
  if (digest !== undefined) {
    logger.info(
      options.initData !== undefined
        ? 'Initdata TOML file is given by parameter'
        : 'Initdata digest is given by parameter',
    );
    initDataBinding = await bindInitData(primary, digest, logger);
  }

  const eventlog = await openEventlog(options, primary);
  const agent = new AttestationAgent({
    config: options.config,
    attester: primary,
    additionalAttesters: additional,
    logger,
    ...(eventlog !== undefined && { eventlog }),
    ...(options.initData !== undefined && { initDataToml: options.initData.toml }),
    ...(options.kbsTimeoutMs !== undefined && { kbsTimeoutMs: options.kbsTimeoutMs }),
    ...(options.kbsRetryDelay !== undefined && { kbsRetryDelay: options.kbsRetryDelay }),
  });

  const server = new TtrpcServer({ logger });
  registerAttestationAgentService(server, attestationAgentService(agent, logger));
  try {
    await server.listen({ path: options.socketPath });
  } catch (err) {
    await agent.close();
    throw err;
  }
  logger.info({ socket: `unix://${options.socketPath}` }, 'Attestation ttRPC service listening');

  let closing: Promise<void> | undefined;
  return {
    agent,
    socketPath: options.socketPath,
    initDataBinding,
    close() {
      closing ??= server.close().then(() => agent.close());
      return closing;
    },
  };
}
