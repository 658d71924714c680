/**
 * The key broker clients (KBCs) resources come from, as `[kbc] name` picks:
 *
 * - `cc_kbc`: the KBS at `[kbc] url` in passport mode. Tokens come from the
 *   attestation agent and are cached in the KBS client; a 401 gets a new
 *   token, 3 attempts in all.
 * - `offline_fs_kbc`: JSON maps `{"repo/type/tag": "<std base64>"}` read from
 *   local files (upstream's test and air-gapped KBC).
 *
 * Failures are reported with guest-components' `kbs_protocol` wording, so
 * the hub's `Get Resource failed: …` reads like upstream's log chain.
 */
import { readFile } from 'node:fs/promises';
import {
  InvalidToken,
  KbsBadResponse,
  KbsClient,
  type KbsClientLogger,
  KbsRejected,
  KbsResourceNotFound,
  KbsUnauthorized,
  KbsUnreachable,
  type TokenProvider,
} from '@broker/kbs-client';
import { decodeBase64StdStrict, type KbsUri } from '@broker/protocol';
import {
  AaTokenProviderError,
  DataHubError,
  KbcUnavailable,
  OfflineResourceNotFound,
  shown,
} from './errors.js';

/** Something resources can be fetched from. `uri` has been parsed already. */
export interface ResourceGetter {
  getResource(uri: KbsUri): Promise<Buffer>;
  close(): void;
}

/** A failure of the KBC, worded as upstream's kbs_protocol `Error` Display. */
export class KbcError extends DataHubError {
  override readonly name: string = 'KbcError';
  override readonly code = 'KBC_FAILED';
}

function kbsRejection(e: KbsRejected): string {
  const kind = e.kind ?? e.type ?? 'no KBS error type';
  return `${kind}: ${e.detail}`;
}

/** Upstream's Display of the kbs_protocol error that corresponds to `e`. */
export function describeKbsFailure(e: unknown): string {
  if (e instanceof KbsUnauthorized) return `request unauthorized (${kbsRejection(e)})`;
  if (e instanceof KbsResourceNotFound) {
    return `KBS resource not found: KBS resource Not Found (Error 404): ${kbsRejection(e)}`;
  }
  if (e instanceof KbsRejected) {
    return `KBS internal error: KBS Server Internal Failed, Response: HTTP ${e.status} ${kbsRejection(e)}`;
  }
  if (e instanceof KbsUnreachable) return `http request failed: get failed: ${e.message}`;
  if (e instanceof KbsBadResponse) return `deserialize http response failed: ${e.message}`;
  if (e instanceof AaTokenProviderError || e instanceof InvalidToken) return `get token failed: ${e.message}`;
  return e instanceof Error ? e.message : String(e);
}

export interface CcKbcOptions {
  readonly url: string;
  readonly certPem: string | null;
  readonly tokenProvider: TokenProvider & { close?(): void };
  /** Whole-request timeout towards the KBS (default 60 s, upstream's). */
  readonly timeoutMs?: number;
  readonly logger?: KbsClientLogger;
}

export class CcKbc implements ResourceGetter {
  readonly #client: KbsClient;
  readonly #provider: CcKbcOptions['tokenProvider'];

  constructor(options: CcKbcOptions) {
    if (options.url === '') {
      throw new KbcUnavailable('no KBS is configured: [kbc] url is empty');
    }
    this.#provider = options.tokenProvider;
    this.#client = new KbsClient({
      url: options.url,
      tokenProvider: options.tokenProvider,
      ...(options.certPem !== null ? { certPem: options.certPem } : {}),
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      ...(options.logger !== undefined ? { logger: options.logger } : {}),
    });
  }

  async getResource(uri: KbsUri): Promise<Buffer> {
    try {
      return await this.#client.getResource(uri);
    } catch (cause) {
      throw new KbcError(describeKbsFailure(cause), { cause });
    }
  }

  close(): void {
    this.#client.close();
    this.#provider.close?.();
  }
}

/** upstream's offline_fs_kbc resource files, read in this order. */
export const OFFLINE_FS_KBC_FILES: readonly string[] = Object.freeze([
  '/etc/aa-offline_fs_kbc-keys.json',
  '/etc/aa-offline_fs_kbc-resources.json',
]);
/** Comma-separated extra files, read after the default ones. */
export const OFFLINE_FS_KBC_EXTRA_FILE_PATH_ENV = 'OFFLINE_FS_KBC_EXTRA_FILE_PATH';
const MAX_OFFLINE_FILE_BYTES = 16 * 1024 * 1024;

export interface OfflineFsKbcOptions {
  readonly files: readonly string[];
  readonly logger?: KbsClientLogger;
}

/**
 * Resources from local JSON files. A missing file is skipped with a warning
 * and a malformed one is an error, as upstream. The files are read on first
 * use and kept.
 */
export class OfflineFsKbc implements ResourceGetter {
  readonly #files: readonly string[];
  readonly #log: KbsClientLogger | undefined;
  #resources: Promise<Map<string, Buffer>> | undefined;

  constructor(options: OfflineFsKbcOptions) {
    this.#files = options.files;
    this.#log = options.logger;
  }

  async getResource(uri: KbsUri): Promise<Buffer> {
    this.#resources ??= this.#load();
    const resources = await this.#resources.catch((e: unknown) => {
      this.#resources = undefined; // a fixed file can be read on the next request
      throw e;
    });
    // The path alone is the key, whatever the plugin, as upstream's offline_fs_kbc looks resources up.
    const path = uri.path.join('/');
    const value = resources.get(path);
    if (value === undefined) throw new OfflineResourceNotFound(path);
    return Buffer.from(value);
  }

  close(): void {}

  async #load(): Promise<Map<string, Buffer>> {
    const out = new Map<string, Buffer>();
    for (const file of this.#files) {
      let bytes: Buffer;
      try {
        bytes = await readFile(file);
      } catch (e) {
        this.#log?.warn(`Failed to read file ${file} to init offline-fs-kbc: ${(e as Error).message}`);
        continue;
      }
      const bad = (why: string) => new KbcError(`offline-fs-kbc: illegal resource file ${file}: ${why}`);
      if (bytes.length > MAX_OFFLINE_FILE_BYTES) throw bad(`larger than ${MAX_OFFLINE_FILE_BYTES} bytes`);
      let map: unknown;
      try {
        map = JSON.parse(bytes.toString('utf8'));
      } catch (e) {
        throw bad((e as Error).message);
      }
      if (typeof map !== 'object' || map === null || Array.isArray(map)) throw bad('not a JSON object');
      for (const [key, value] of Object.entries(map)) {
        const decoded = typeof value === 'string' ? decodeBase64StdStrict(value) : null;
        if (decoded === null) {
          throw new KbcError(
            `offline-fs-kbc: decode value from file ${file} failed: ${shown(key)} is not standard base64`,
          );
        }
        if (out.has(key)) {
          this.#log?.warn(
            `detected duplicated resource definition ${shown(key)} in file ${file} when initializing offline-fs-kbc`,
          );
        }
        out.set(key, decoded);
      }
    }
    return out;
  }
}
