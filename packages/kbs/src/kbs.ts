// Wiring: storage, trust material, admin, policies, the attestation service, sessions and the servers.
import { readFile } from 'node:fs/promises';
import type { Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import {
  type AttestationService,
  createAttestationService,
  openGrpcAttestationService,
} from '@broker/attestation';
import { type AdminAuthorizer, createAdminAuthorizer } from '@broker/auth';
import { createLogger } from '@broker/cli';
import type { KvStorage, Namespace } from '@broker/kv-storage';
import {
  describePostgresTarget,
  LocalFsStorage,
  LocalJsonStorage,
  MemoryStorage,
  PostgresStorage,
  postgresTarget,
  REDIS_URL_ENV,
  RedisStorage,
  RoutedStorage,
  redactRedisUrl,
} from '@broker/kv-storage';
import type { Logger } from 'pino';
import { Api } from './api.js';
import { type KbsConfig, sessionStorageOf, validateAdminConfig } from './config.js';
import { consoleDeps } from './console/deps.js';
import { createAdminRoutes } from './console/routes.js';
import { consolePage } from './console/static.js';
import { KbsServiceError } from './errors.js';
import { KbsMetrics } from './metrics.js';
import { verdictObserver } from './observer.js';
import { startBuiltinPlugins } from './plugins/builtin-registry.js';
import { ExternalPlugin } from './plugins/external.js';
import { ResourcePolicy } from './policy/resource-policy.js';
import { Rcar } from './rcar.js';
import { MountedFiles, type MountedFilesOptions } from './reload/mounted.js';
import { certificateNotAfter, type TlsReloader, watchTlsFiles } from './reload/tls.js';
import { ResourceRepository } from './repository.js';
import {
  createMetricsHandler,
  createRequestHandler,
  type Listening,
  listen,
  listenMetrics,
} from './server.js';
import { type SessionLimits, SessionStore } from './session.js';
import { AttestationTokenVerifier } from './token.js';
import type { VerdictStore } from './verdicts/log.js';
import { openVerdicts, recorderOptions } from './verdicts/open.js';
import { VerdictRecorder } from './verdicts/recorder.js';

export class KbsStartupError extends KbsServiceError {
  override readonly name: string = 'KbsStartupError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('STARTUP_FAILED', message, options);
  }
}

export interface KbsOptions {
  /** Defaults to the `kbs` command's logger: JSON lines on stdout, the level from RUST_LOG (else `info`). */
  readonly logger?: Logger;
  readonly sessionLimits?: SessionLimits;
  /** Clock in epoch milliseconds for sessions and token checks (tests). */
  readonly now?: () => number;
  /** How file changes are noticed (quiet period, fallback poll, settle window); tests shorten them. */
  readonly watch?: MountedFilesOptions;
}

export interface RunningKbs {
  /** One per configured socket, with the port actually bound. */
  readonly addresses: readonly AddressInfo[];
  /** `http(s)://host:port` per socket. */
  readonly urls: readonly string[];
  /** `http://host:port/metrics` of the `[http_server] metrics_socket` listener, when configured. */
  readonly metricsUrl?: string;
  readonly metrics: KbsMetrics;
  readonly sessions: SessionStore;
  readonly storage: KvStorage;
  readonly attestationService: AttestationService;
  /** The last attestations and resource requests (`GET /kbs/v0/admin/verdicts`); in Redis over Redis. */
  readonly verdicts: VerdictStore;
  /**
   * Resolves once every decision made so far is in the verdict log where every replica reads it: an
   * attestation is recorded after its reply, and a shared store writes behind.
   */
  verdictsRecorded(): Promise<void>;
  /**
   * Re-reads the watched files now (TLS key and certificate, `[mounted_files]`) instead of waiting for
   * the file watch; resolves once the changes apply. The `kbs` command does this on SIGHUP.
   */
  reload(): Promise<void>;
  close(): Promise<void>;
}

type BackendType = 'Memory' | 'LocalFs' | 'LocalJson' | 'Postgres' | 'Redis';

/** One backend per storage type, and the namespaces routed to the types configured for them. */
async function openStorage(config: KbsConfig, opened: KvStorage[], logger: Logger): Promise<RoutedStorage> {
  const backends = new Map<BackendType, KvStorage>();
  const backend = async (type: BackendType, what: string): Promise<KvStorage> => {
    const have = backends.get(type);
    if (have !== undefined) return have;
    let s: KvStorage;
    if (type === 'Memory') s = new MemoryStorage();
    else if (type === 'LocalFs') {
      const dirPath = config.storageBackend.localFsDir;
      if (dirPath === undefined) {
        throw new KbsStartupError(`${what}: LocalFs needs [storage_backend.backends.local_fs] dir_path`);
      }
      s = await LocalFsStorage.open({ dirPath });
    } else if (type === 'LocalJson') {
      const dirPath = config.storageBackend.localJsonDir;
      if (dirPath === undefined) {
        throw new KbsStartupError(
          `${what}: LocalJson needs [storage_backend.backends.local_json] file_dir_path`,
        );
      }
      s = await LocalJsonStorage.open({ dirPath });
    } else if (type === 'Redis') {
      const configured = config.storageBackend.redisUrl;
      if (configured === undefined) {
        throw new KbsStartupError(`${what}: Redis needs [storage_backend.backends.redis] url`);
      }
      // trustee's override: the URL (which may hold a password) can come from a Secret through the env.
      const fromEnv = process.env[REDIS_URL_ENV];
      const url = fromEnv !== undefined && fromEnv !== '' ? fromEnv : configured;
      const log = logger.child({ component: 'redis', redis: redactRedisUrl(url) });
      s = await RedisStorage.open({
        url,
        onEvent: (e) => {
          if (e.kind === 'disconnected')
            log.error({ reason: e.reason }, 'Redis connection lost: requests fail until it returns');
          else if (e.kind === 'reconnected') log.info('Redis connection restored');
          else log.debug({ reason: e.reason }, 'Redis reconnection attempt failed');
        },
      });
    } else if (type === 'Postgres') {
      const configured = config.storageBackend.postgres;
      if (configured === undefined) {
        throw new KbsStartupError(`${what}: Postgres needs [storage_backend.backends.postgres]`);
      }
      // trustee's override: POSTGRES_URL (which may hold a password) replaces the configured fields.
      const target = postgresTarget(configured);
      const log = logger.child({ component: 'postgres', postgres: describePostgresTarget(target) });
      s = await PostgresStorage.open({
        target,
        onEvent: (e) => {
          if (e.kind === 'disconnected')
            log.error({ reason: e.reason }, 'PostgreSQL connection lost: requests fail until it returns');
          else if (e.kind === 'reconnected') log.info('PostgreSQL connection restored');
          else log.debug({ reason: e.reason }, 'PostgreSQL connection failed again');
        },
      });
    } else {
      throw new KbsStartupError(
        `${what}: storage type ${type} is not supported by this KBS (supported: Memory, LocalFs, LocalJson, Postgres, Redis)`,
      );
    }
    opened.push(s);
    backends.set(type, s);
    return s;
  };
  const main = await backend(config.storageBackend.storageType, '[storage_backend] storage_type');
  const as = config.attestationService;
  const routes: Partial<Record<Namespace, KvStorage>> = {};
  const sessionType = sessionStorageOf(config);
  if (sessionType !== config.storageBackend.storageType) {
    routes.kbs_protocol_session = await backend(sessionType, 'session_storage_type');
  }
  if (as.storageType !== undefined) {
    routes.attestation_service_policy = await backend(as.storageType, '[attestation_service] storage_type');
  }
  const rvType = as.rvps.storageType ?? as.storageType;
  if (rvType !== undefined) {
    routes.reference_value = await backend(rvType, '[attestation_service.rvps_config] storage_type');
  }
  return new RoutedStorage(main, routes);
}

function urlOf(a: AddressInfo, tls: boolean): string {
  const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
  return `${tls ? 'https' : 'http'}://${host}:${a.port}`;
}

/** Starts a KBS; resolves once every socket listens. Throws KbsStartupError (or ConfigError-like) on failure. */
export async function startKbs(config: KbsConfig, options: KbsOptions = {}): Promise<RunningKbs> {
  const logger = options.logger ?? createLogger({ name: 'kbs' });
  for (const w of config.warnings) logger.warn(w);
  for (const k of config.attestationService.ignoredKeys) logger.warn(`${k} is a legacy key and is ignored`);

  const opened: KvStorage[] = [];
  const cleanups: (() => Promise<void> | void)[] = [];
  const cleanup = async () => {
    for (const c of cleanups.reverse()) await c();
    for (const s of opened) await s.close();
  };
  const step = async <T>(what: string, f: () => Promise<T>): Promise<T> => {
    try {
      return await f();
    } catch (e) {
      if (e instanceof KbsStartupError) throw e;
      const message = (e as Error).message;
      // The step's words once, when the failure already starts with them.
      const said = message.toLowerCase().startsWith(what.toLowerCase());
      throw new KbsStartupError(said ? message : `${what}: ${message}`, { cause: e });
    }
  };

  try {
    const storage = await step('storage backend initialization failed', () =>
      openStorage(config, opened, logger),
    );
    logger.info(
      {
        storage: config.storageBackend.storageType,
        sessions: sessionStorageOf(config),
      },
      'KBS storage backend',
    );
    let repository: ResourceRepository | undefined;
    /** Where the resources are, for the console's list. */
    let resourceStore: KvStorage | undefined;
    const plugin = config.resourcePlugin;
    if (plugin?.backend === 'kvstorage') {
      repository = new ResourceRepository(storage);
      resourceStore = storage;
    } else if (plugin?.backend === 'LocalFs') {
      const repoStorage = await step('resource plugin initialization failed', () =>
        LocalFsStorage.open({ dirPath: plugin.dirPath, namespaceDirs: { repository: plugin.dirPath } }),
      );
      opened.push(repoStorage);
      repository = new ResourceRepository(repoStorage);
      resourceStore = repoStorage;
    }

    const tokens = await step('attestation token verifier initialization failed', () =>
      AttestationTokenVerifier.create(config.attestationToken, options.now),
    );
    if (config.attestationToken.insecureHeaderJwk) {
      logger.warn(
        '[attestation_token] insecure_header_jwk = true: token signing keys are not checked against trust anchors',
      );
    }
    const admin: AdminAuthorizer = await step('failed to initialize [admin] configuration', () =>
      (async () => {
        validateAdminConfig(config.admin);
        return createAdminAuthorizer(config.admin, options.now);
      })(),
    );
    if (admin.mode === 'InsecureAllowAll') {
      logger.warn(
        'admin API is insecure: authorization_mode = "InsecureAllowAll" lets anyone change policies and resources',
      );
    }

    const policy = new ResourcePolicy(storage, {
      // `metrics` is made below; the policy is evaluated only once requests are served.
      onLimit: (remembered) => metrics.policyLimitRefusals.labels('resource', String(remembered)).inc(),
    });
    await step('resource policy initialization failed', () => policy.seedDefault());

    const remoteAs = config.attestationService.grpc;
    const attestation = await step('attestation service initialization failed', () =>
      // trustee's coco_as_grpc: the AS is another process; the connection is made on first use, so
      // the KBS starts (and answers errors) while the AS is not up yet.
      remoteAs !== undefined
        ? Promise.resolve().then(() =>
            openGrpcAttestationService(remoteAs, logger.child({ component: 'attestation-service' })),
          )
        : createAttestationService(
            config.attestationService,
            storage,
            logger.child({ component: 'attestation-service' }),
            {
              ...(options.now !== undefined && { now: options.now }),
              onPolicyLimit: (remembered) =>
                metrics.policyLimitRefusals.labels('attestation', String(remembered)).inc(),
              onCollateralFetchFailure: (source) => metrics.collateralFetchFailures.labels(source).inc(),
              // A store other processes write to is read on every use, so that a change made through
              // another replica applies to the next request here.
              ...((storage.isShared('attestation_service_policy') || storage.isShared('reference_value')) && {
                cacheTtlMs: 0,
              }),
            },
          ),
    );
    cleanups.push(() => attestation.close());

    const metrics = new KbsMetrics({ resourcePaths: config.httpServer.metricsResourcePaths === true });
    let lastEvictLog = 0;
    const sessions = new SessionStore({
      storage,
      lifetimeMs: config.attestationService.timeoutMin * 60_000,
      ...(options.sessionLimits !== undefined && { limits: options.sessionLimits }),
      ...(options.now !== undefined && { now: options.now }),
      onEvict: (count) => {
        const t = Date.now();
        if (t - lastEvictLog > 10_000) {
          lastEvictLog = t;
          logger.warn({ evicted: count }, 'session limit reached: oldest sessions dropped');
        }
      },
    });
    cleanups.push(() => sessions.close());

    const verdictStore = await openVerdicts(config, logger, options.now);
    cleanups.push(() => verdictStore.close());
    const verdictLog = verdictStore.store;
    const verdicts = new VerdictRecorder(
      verdictLog,
      recorderOptions({ config, storage, attestation, logger, now: options.now }),
    );
    // Closing waits for the handshakes still being recorded (cleanups run last first).
    cleanups.push(() => verdicts.settled());
    // The verdict log watches the handshake and the resource path through one seam.
    const observer = verdictObserver(verdicts, logger);
    const rcar = new Rcar({ sessions, attestation, metrics, logger, observer });
    const externalConfig = config.externalPlugin;
    const external =
      externalConfig === undefined
        ? undefined
        : await step('PluginManager initialization failed', () =>
            ExternalPlugin.connect(externalConfig, { admin, sessions, tokens, policy, metrics, logger }),
          );
    if (external !== undefined) cleanups.push(() => external.close());
    const builtinPlugins = await step('PluginManager initialization failed', () =>
      startBuiltinPlugins(config.builtinPlugins, {
        admin,
        sessions,
        tokens,
        policy,
        metrics,
        logger,
        storage,
      }),
    );
    if (builtinPlugins !== undefined) cleanups.push(() => builtinPlugins.close());
    const api = new Api({
      rcar,
      sessions,
      attestation,
      tokens,
      admin,
      policy,
      repository,
      metrics,
      logger,
      observer,
      ...(external !== undefined && { external }),
      ...(builtinPlugins !== undefined && { builtinPlugins }),
    });
    const handler = createRequestHandler({
      api,
      metrics,
      logger,
      preRoute: createAdminRoutes({
        admin,
        verdicts: verdictLog,
        ...(config.console.enabled && {
          console: consoleDeps({
            config,
            storage,
            resourceStore,
            metrics,
            attestation,
            verdicts: verdictStore,
            now: options.now,
          }),
        }),
      }),
      ...(config.console.enabled && { consolePage }),
      bodyLimit: config.httpServer.payloadRequestSize * 1024 * 1024,
      serveMetrics: config.httpServer.metricsSocket === undefined,
    });
    let mounted: MountedFiles | undefined;
    if (config.mountedFiles !== undefined) {
      const mountedFiles = config.mountedFiles;
      mounted = await step('mounted files', () =>
        MountedFiles.start(
          {
            config: mountedFiles,
            attestation,
            policy,
            repository,
            logger: logger.child({ component: 'mounted-files' }),
          },
          options.watch,
        ),
      );
      cleanups.push(() => mounted?.close());
    }

    const tls = !config.httpServer.insecureHttp;
    const listening: Listening = await step(`HTTP${tls ? 'S' : ''} initialization failed`, () =>
      listen(config.httpServer, handler),
    );
    cleanups.push(() => listening.close());
    const metricsSocket = config.httpServer.metricsSocket;
    let metricsUrl: string | undefined;
    if (metricsSocket !== undefined) {
      const m = await step('metrics listener initialization failed', () =>
        listenMetrics(metricsSocket, createMetricsHandler(metrics, logger.child({ component: 'metrics' }))),
      );
      cleanups.push(() => m.close());
      metricsUrl = `${urlOf(m.address, false)}/metrics`;
      logger.info(
        { url: metricsUrl },
        'metrics listening (plain HTTP); the public sockets do not serve /metrics',
      );
    }
    const expiry = (certificate: string, pem: Buffer | string) => {
      const t = certificateNotAfter(pem);
      if (t !== undefined) metrics.certificateExpiry.labels(certificate).set(t);
    };
    const signerCert = config.attestationService.tokenBroker.signer?.certPath;
    if (signerCert !== undefined) {
      try {
        expiry('token', await readFile(signerCert));
      } catch {
        // The attestation service reports an unreadable certificate itself.
      }
    }
    let tlsReloader: TlsReloader | undefined;
    if (listening.tls !== undefined) {
      expiry('https', listening.tls.cert);
      tlsReloader = watchTlsFiles(
        config.httpServer,
        listening.servers as HttpsServer[],
        listening.tls,
        logger.child({ component: 'tls' }),
        options.watch,
        (cert) => expiry('https', cert),
      );
      cleanups.push(() => tlsReloader?.close());
    }
    const urls = listening.addresses.map((a) => urlOf(a, tls));
    logger.info({ urls }, `KBS listening (HTTP${tls ? 'S' : ''})`);
    if (!tls) logger.warn('[http_server] insecure_http = true: serving plain HTTP');
    if (config.console.enabled) {
      logger.info({ console: urls.map((u) => `${u}/console/`) }, 'operator console enabled');
      // Browsers keep a Secure cookie only from HTTPS (or localhost).
      if (!tls) logger.warn('[admin] console = true over plain HTTP: sign-in works only from localhost');
    }

    let closed: Promise<void> | undefined;
    return {
      addresses: listening.addresses,
      urls,
      ...(metricsUrl !== undefined && { metricsUrl }),
      metrics,
      sessions,
      storage,
      attestationService: attestation,
      verdicts: verdictLog,
      verdictsRecorded: () => verdicts.settled(),
      reload: async () => {
        await Promise.all([tlsReloader?.reload(), mounted?.reload()]);
      },
      close: () => {
        closed ??= cleanup();
        return closed;
      },
    };
  } catch (e) {
    await cleanup();
    throw e;
  }
}
