/**
 * The hub: resources from the configured KBC, and the start-up credentials.
 *
 * `getResource` is the primitive the later services build on: sealed
 * secrets of type vault fetch their `name` through it, and image pulls fetch
 * policies and keys (`kbs:///…`) through it. The KBS client is made on first
 * use, so a hub that never fetches anything never loads it.
 */
import { messageOf } from '@broker/cli';
import type { CallContext } from '@broker/ttrpc';
import type { Logger } from 'pino';
import type { AaConnect } from './aa-token.js';
import type { CdhConfig } from './config.js';
import { KBS_RESOURCE_STORAGE_DIR, provisionCredentials } from './credentials.js';
import { DataHubError, GetResourceFailed, IllegalResourceUri } from './errors.js';
import type { ImagePullService, ImagePullServiceOptions } from './image/service.js';
import type { ResourceGetter } from './kbc.js';
import type { BlockDeviceDeps, SecureMountRequestLike } from './storage/block-device.js';

export interface DataHubOptions {
  readonly logger?: Logger;
  /**
   * Folder that credential paths must be inside (default
   * `/run/confidential-containers/cdh/kbs`). For tests: a config cannot change it.
   */
  readonly credentialRoot?: string;
  /** Whole-request timeout towards the KBS (default 60 s, upstream's). */
  readonly kbsTimeoutMs?: number;
  /** Connect timeout towards the attestation agent (default 5 s). */
  readonly aaConnectTimeoutMs?: number;
  /** Deadline of the agent's `GetToken` (default 50 s, upstream's). */
  readonly aaCallTimeoutMs?: number;
  /** offline_fs_kbc files (default upstream's two `/etc` files plus `OFFLINE_FS_KBC_EXTRA_FILE_PATH`). */
  readonly offlineFsKbcFiles?: readonly string[];
  /** Environment for `OFFLINE_FS_KBC_EXTRA_FILE_PATH` (default `process.env`). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Replaces the ttrpc connection to the agent (tests). */
  readonly aaConnect?: AaConnect;
  /**
   * Folder of sealed-secret verification keys named by a `kid` that is not a
   * KBS URI (default `/run/confidential-containers/cdh/sealed-secret`). For tests.
   */
  readonly sealedSecretKeyDir?: string;
  /** Image-pull settings for tests (registry client options, platform, measurement). */
  readonly imagePull?: ImagePullServiceOptions;
  /** `SecureMount` settings for tests: the tools' environment (PATH), sysfs, tool deadline. */
  readonly secureMount?: Pick<BlockDeviceDeps, 'env' | 'sysBlockDir' | 'toolTimeoutMs'>;
}

/** The parser's reason without its `invalid resource URI "<input>": ` prefix (the URI is shown anyway). */
function uriProblem(uri: string, cause: unknown): string {
  const message = messageOf(cause);
  const prefix = `invalid resource URI ${JSON.stringify(uri.length > 200 ? `${uri.slice(0, 200)}…` : uri)}: `;
  return message.startsWith(prefix) ? message.slice(prefix.length) : message;
}

export class DataHub {
  readonly config: CdhConfig;
  readonly #options: DataHubOptions;
  readonly #log: Logger | undefined;
  #getter: Promise<ResourceGetter> | undefined;
  #images: Promise<ImagePullService> | undefined;
  #closed = false;

  constructor(config: CdhConfig, options: DataHubOptions = {}) {
    this.config = config;
    this.#options = options;
    this.#log = options.logger;
  }

  /**
   * Start-up work before the socket opens: fetch `[[credentials]]` to their
   * files. Throws `HubInitializationFailed`.
   */
  async init(): Promise<void> {
    const { credentials } = this.config;
    if (credentials.length === 0) return;
    await provisionCredentials(
      credentials,
      async (uri) => {
        const bytes = await this.#fetch(uri);
        this.#log?.debug({ resource: uri }, 'credential fetched from the KBS');
        return bytes;
      },
      this.#options.credentialRoot ?? KBS_RESOURCE_STORAGE_DIR,
    );
    this.#log?.info({ count: credentials.length }, 'credentials written');
  }

  /**
   * The resource behind `kbs:///repository/type/tag[?query]`, or a KBS plugin's answer for
   * `kbs+<plugin>:///<path>[?query]` (guest-components: `GET /kbs/v0/<plugin>/<path>[?query]`). The host
   * part is ignored: the configured KBS is always asked, as upstream. Throws `GetResourceFailed`:
   * upstream's text for the caller, the reason logged.
   */
  async getResource(uri: string, _ctx?: CallContext): Promise<Uint8Array> {
    this.#log?.info({ resource: uri.slice(0, 512) }, 'get resource called');
    try {
      return await this.#fetch(uri);
    } catch (cause) {
      const failure = new GetResourceFailed(messageOf(cause), { cause });
      this.#log?.error({ resource: uri.slice(0, 512), err: failure.reason }, 'GetResource failed');
      throw failure;
    }
  }

  /**
   * `UnsealSecret`: a sealed-secret pointer to its plaintext (`./sealed/`).
   * Throws `UnsealSecretFailed`.
   */
  async unsealSecret(secret: Uint8Array, _ctx?: CallContext): Promise<Uint8Array> {
    const { unsealWithHub } = await import('./sealed/unseal.js');
    return unsealWithHub(secret, {
      getResource: (uri) => this.getResource(uri),
      skipVerification: this.config.skipSealedSecretVerification,
      ...(this.#options.sealedSecretKeyDir !== undefined
        ? { signingKeyDir: this.#options.sealedSecretKeyDir }
        : {}),
      ...(this.#log !== undefined ? { logger: this.#log } : {}),
    });
  }

  /**
   * `PullImage` (`./image/`): checks the image against the signature policy,
   * pulls and unpacks it to `<bundlePath>/rootfs`, and returns its manifest
   * digest. Loaded on the first call.
   */
  async pullImage(imageUrl: string, bundlePath: string, _ctx?: CallContext): Promise<string> {
    if (this.#closed) throw new DataHubError('the data hub is closed', { code: 'HUB_CLOSED' });
    this.#images ??= import('./image/service.js').then(
      ({ ImagePullService }) =>
        new ImagePullService(
          this.config,
          {
            getResource: (uri) => this.getResource(uri),
            ...(this.#log !== undefined ? { logger: this.#log } : {}),
          },
          this.#options.imagePull ?? {},
        ),
    );
    return (await this.#images).pullImage(imageUrl, bundlePath);
  }

  /**
   * `SecureMount` (`./storage/block-device.ts`): `volume_type = "block-device"`,
   * a LUKS2 volume keyed through the hub's own KBS path. Throws
   * `SecureMountFailed` naming the failing step; the reason is logged.
   */
  async secureMount(request: SecureMountRequestLike, _ctx?: CallContext): Promise<void> {
    if (this.#closed) throw new DataHubError('the data hub is closed', { code: 'HUB_CLOSED' });
    const { BlockDevice, BLOCK_DEVICE_VOLUME_TYPE, SecureMountFailed } = await import(
      './storage/block-device.js'
    );
    const where = {
      volumeType: request.volume_type.slice(0, 64),
      mountPoint: request.mount_point.slice(0, 512),
    };
    this.#log?.info(where, 'secure mount called');
    try {
      if (request.volume_type !== BLOCK_DEVICE_VOLUME_TYPE) {
        throw new SecureMountFailed(
          'options',
          `Failed to recognize the storage type: ${JSON.stringify(request.volume_type.slice(0, 64))} (supported: block-device)`,
        );
      }
      await new BlockDevice({
        getResource: (uri) => this.getResource(uri),
        unsealSecret: (secret) => this.unsealSecret(secret),
        ...(this.#log !== undefined ? { logger: this.#log } : {}),
        ...this.#options.secureMount,
      }).mount(request);
    } catch (e) {
      const reason = e instanceof SecureMountFailed ? e.reason : messageOf(e);
      this.#log?.error({ ...where, err: reason }, 'SecureMount failed');
      throw e;
    }
  }

  /** Closes the KBS and agent connections. */
  async close(): Promise<void> {
    this.#closed = true;
    (await this.#images?.catch(() => undefined))?.close();
    const getter = this.#getter;
    this.#getter = undefined;
    if (getter !== undefined) (await getter.catch(() => undefined))?.close();
  }

  async #fetch(uri: string): Promise<Buffer> {
    const { parseKbsUri } = await import('@broker/protocol');
    let parsed: ReturnType<typeof parseKbsUri>;
    try {
      parsed = parseKbsUri(uri);
    } catch (cause) {
      throw new IllegalResourceUri(uri, uriProblem(uri, cause), { cause });
    }
    return (await this.#resourceGetter()).getResource(parsed);
  }

  #resourceGetter(): Promise<ResourceGetter> {
    if (this.#closed) return Promise.reject(new Error('the data hub is closed'));
    this.#getter ??= this.#makeGetter().catch((e: unknown) => {
      this.#getter = undefined;
      throw e;
    });
    return this.#getter;
  }

  async #makeGetter(): Promise<ResourceGetter> {
    const kbc = await import('./kbc.js');
    const { kbc: cfg } = this.config;
    const logger = this.#log;
    if (cfg.name === 'offline_fs_kbc') {
      const env = this.#options.env ?? process.env;
      const extra = env[kbc.OFFLINE_FS_KBC_EXTRA_FILE_PATH_ENV];
      const files = this.#options.offlineFsKbcFiles ?? [
        ...kbc.OFFLINE_FS_KBC_FILES,
        ...(extra !== undefined ? extra.split(',') : []),
      ];
      return new kbc.OfflineFsKbc({ files, ...(logger !== undefined ? { logger } : {}) });
    }
    const { AaTokenProvider } = await import('./aa-token.js');
    const o = this.#options;
    const tokenProvider = new AaTokenProvider({
      address: this.config.aa.aaAddress,
      ...(o.aaConnectTimeoutMs !== undefined ? { connectTimeoutMs: o.aaConnectTimeoutMs } : {}),
      ...(o.aaCallTimeoutMs !== undefined ? { callTimeoutMs: o.aaCallTimeoutMs } : {}),
      ...(o.aaConnect !== undefined ? { connect: o.aaConnect } : {}),
    });
    return new kbc.CcKbc({
      url: cfg.url,
      certPem: cfg.kbsCert,
      tokenProvider,
      ...(o.kbsTimeoutMs !== undefined ? { timeoutMs: o.kbsTimeoutMs } : {}),
      ...(logger !== undefined ? { logger } : {}),
    });
  }
}
