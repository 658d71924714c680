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
    throw new Error(`HTTP ${res.status}`);
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

export async function fetchUserData(source: UserDataSource, options: FetchOptions): Promise<Buffer> {
  switch (source.kind) {
    case 'file':
      return readSmallFile(source.path);
    case 'dir':
      return readSmallFile(join(source.path, 'user-data'));
    case 'imds': {
      const deadline = Date.now() + options.timeoutMs;
      for (let attempt = 1; ; attempt++) {
        const left = deadline - Date.now();
        try {
          return await imdsOnce(source.baseUrl, AbortSignal.timeout(Math.max(1, Math.min(left, 10_000))));
        } catch (e) {
          if (e instanceof ProvisionError) throw e;
          options.onRetry?.(attempt, e as Error);
          if (Date.now() + options.retryDelayMs >= deadline) {
            throw new ProvisionError(
              'USER_DATA_FETCH',
              `no user data from ${source.baseUrl} within ${options.timeoutMs} ms: ${(e as Error).message}`,
              { cause: e },
            );
          }
          await new Promise((r) => setTimeout(r, options.retryDelayMs));
        }
      }
    }
  }
}

/** The default source when none is given: a mounted cidata folder, else the cidata device; else none. */
export async function defaultSource(
  dir = DEFAULT_CIDATA_DIR,
  device = DEFAULT_CIDATA_DEVICE,
): Promise<UserDataSource | undefined> {
  try {
    if ((await stat(join(dir, 'user-data'))).isFile()) return { kind: 'dir', path: dir };
  } catch {
    // Not mounted.
  }
  try {
    await stat(device);
    return { kind: 'file', path: device };
  } catch {
    return undefined;
  }
}
