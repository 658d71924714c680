// Where user data comes from: a cidata image (ISO file or block device), a mounted cidata folder or a
// plain user-data file, or an IMDS-style endpoint (Azure's userData, base64 text behind
// `Metadata: true`), retried until it answers or a deadline passes.
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { ProvisionError } from './errors.js';
import { looksLikeIso, readIsoRootFile, withFileReader } from './iso9660.js';
import { MAX_USER_DATA_BYTES } from './user-data.js';

/** Azure's userData path under the IMDS base URL. */
export const AZURE_USER_DATA_PATH = '/metadata/instance/compute/userData?api-version=2021-01-01&format=text';
/** Where CAA's units mount the cidata image, and where cloud-init labels it. */
export const DEFAULT_CIDATA_DIR = '/media/cidata';
export const DEFAULT_CIDATA_DEVICE = '/dev/disk/by-label/cidata';

export type UserDataSource =
  /** A file: an ISO 9660 image (or block device) holding `user-data`, or the user-data itself. */
  | { readonly kind: 'file'; readonly path: string }
  /** A folder holding `user-data` (a mounted cidata image). */
  | { readonly kind: 'dir'; readonly path: string }
  | { readonly kind: 'imds'; readonly baseUrl: string };

async function readSmallFile(path: string): Promise<Buffer> {
  const info = await stat(path);
  if (!info.isFile() && !info.isBlockDevice()) {
    throw new ProvisionError('USER_DATA_MISSING', `${path} is not a file or block device`);
  }
  return withFileReader(path, async (read) => {
    const head = await read(0, 16 * 2048 + 6);
    if (looksLikeIso(head)) {
      const ud = await readIsoRootFile(read, 'user-data', MAX_USER_DATA_BYTES);
      if (ud === undefined)
        throw new ProvisionError('USER_DATA_MISSING', `the cidata image ${path} has no user-data file`);
      return ud;
    }
    if (info.isBlockDevice()) throw new ProvisionError('ISO_INVALID', `${path} is not an ISO 9660 image`);
    const whole = await read(0, MAX_USER_DATA_BYTES + 1);
    if (whole.length > MAX_USER_DATA_BYTES) {
      throw new ProvisionError('USER_DATA_INVALID', `${path} is larger than ${MAX_USER_DATA_BYTES} bytes`);
    }
    return whole;
  });
}

/** Azure IMDS answers userData as base64 text; an empty answer means none was set. */
async function imdsOnce(baseUrl: string, signal: AbortSignal): Promise<Buffer> {
  const url = `${baseUrl.replace(/\/+$/, '')}${AZURE_USER_DATA_PATH}`;
  const res = await fetch(url, { headers: { Metadata: 'true' }, signal, redirect: 'error' });
  if (res.status !== 200) {
    await res.body?.cancel();
    throw new ProvisionError('USER_DATA_STATUS', `HTTP ${res.status}`);
  }
  const declared = Number(res.headers.get('content-length') ?? '0');
  const limit = Math.ceil((MAX_USER_DATA_BYTES * 4) / 3) + 4;
  if (declared > limit)
    throw new ProvisionError('USER_DATA_INVALID', `${url}: answer larger than ${limit} bytes`);
  const body = Buffer.from(await res.arrayBuffer());
  if (body.length > limit)
    throw new ProvisionError('USER_DATA_INVALID', `${url}: answer larger than ${limit} bytes`);
  const text = body.toString('latin1').replace(/\s+/g, '');
  const decoded = Buffer.from(text, 'base64');
  if (decoded.toString('base64').replace(/=+$/, '') !== text.replace(/=+$/, '')) {
    throw new ProvisionError('USER_DATA_INVALID', `${url}: the answer is not base64`);
  }
  return decoded;
}

export interface FetchOptions {
  /** Give up on the endpoint after this long (ms). */
  readonly timeoutMs: number;
  /** Pause between attempts (ms). */
  readonly retryDelayMs: number;
  /** Reports each failed attempt. */
  readonly onRetry?: (attempt: number, error: Error) => void;
}

const isMissing = (e: unknown) => (e as NodeJS.ErrnoException).code === 'ENOENT';

/**
 * Reads the user data. The metadata endpoint is retried on any failure, a file or folder while it does
 * not exist yet (a cidata device appears when udev gets to it), each until `timeoutMs` has passed.
 */
export async function fetchUserData(source: UserDataSource, options: FetchOptions): Promise<Buffer> {
  const deadline = Date.now() + options.timeoutMs;
  const where = source.kind === 'imds' ? source.baseUrl : source.path;
  for (let attempt = 1; ; attempt++) {
    try {
      switch (source.kind) {
        case 'file':
          return await readSmallFile(source.path);
        case 'dir':
          return await readSmallFile(join(source.path, 'user-data'));
        case 'imds': {
          const left = deadline - Date.now();
          return await imdsOnce(source.baseUrl, AbortSignal.timeout(Math.max(1, Math.min(left, 10_000))));
        }
      }
    } catch (e) {
      // A status other than 200 is retried like a failed connection; other ProvisionErrors are final.
      const final = e instanceof ProvisionError && e.code !== 'USER_DATA_STATUS';
      if (final || (source.kind !== 'imds' && !isMissing(e))) throw e;
      options.onRetry?.(attempt, e as Error);
      if (Date.now() + options.retryDelayMs >= deadline) {
        throw new ProvisionError(
          'USER_DATA_FETCH',
          `no user data from ${where} within ${options.timeoutMs} ms: ${(e as Error).message}`,
          { cause: e },
        );
      }
      await new Promise((r) => setTimeout(r, options.retryDelayMs));
    }
  }
}

export interface DefaultSourceOptions {
  readonly dir?: string;
  readonly device?: string;
  /** How long to look for either (udev may not have created the by-label link yet). */
  readonly waitMs?: number;
  readonly pollMs?: number;
}

/**
 * The default source when none is given: a mounted cidata folder, else the cidata device, looked for
 * during `waitMs` (default 10 s); none when neither shows up.
 */
export async function defaultSource(options: DefaultSourceOptions = {}): Promise<UserDataSource | undefined> {
  const dir = options.dir ?? DEFAULT_CIDATA_DIR;
  const device = options.device ?? DEFAULT_CIDATA_DEVICE;
  const deadline = Date.now() + (options.waitMs ?? 10_000);
  for (;;) {
    try {
      if ((await stat(join(dir, 'user-data'))).isFile()) return { kind: 'dir', path: dir };
    } catch {
      // Not mounted.
    }
    try {
      await stat(device);
      return { kind: 'file', path: device };
    } catch {
      // Not there (yet).
    }
    if (Date.now() >= deadline) return undefined;
    await new Promise((r) => setTimeout(r, options.pollMs ?? 250));
  }
}
