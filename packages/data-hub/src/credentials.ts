/**
 * `[[credentials]]`: KBS resources the hub writes to files at start-up, such
 * as KMS credentials for sealed secrets. Paths follow upstream's rule (under
 * `/run/confidential-containers/cdh/kbs`, no `.` or `..` component) so a
 * config can never place a file elsewhere in the guest.
 */
import { randomBytes } from 'node:crypto';
import { open, realpath, rename, unlink } from 'node:fs/promises';
import { dirname, join, sep } from 'node:path';
import { makeDirectory } from '@broker/cli';
import type { Credential } from './config.js';
import { HubInitializationFailed, shown } from './errors.js';

/** upstream `CDH_BASE_DIR` + `/kbs` (`KBS_RESOURCE_STORAGE_DIR`). */
export const KBS_RESOURCE_STORAGE_DIR = '/run/confidential-containers/cdh/kbs';

/**
 * Whether `path` may receive a credential: below `root` and free of `.` and
 * `..` components. Upstream compares with a plain string prefix, so
 * `/run/confidential-containers/cdh/kbs-other/x` passes there; here the path
 * must be inside the folder itself.
 */
export function isCredentialPathValid(path: string, root: string = KBS_RESOURCE_STORAGE_DIR): boolean {
  const base = root.endsWith('/') ? root : `${root}/`;
  if (!path.startsWith(base) || path.length === base.length || path.endsWith('/')) return false;
  return !path.split('/').some((c) => c === '.' || c === '..');
}

/**
 * Writes `data` to `path` so readers see the old file or the new one, never a
 * part: a temporary file in the same folder, flushed, then renamed over.
 * The file is readable by its owner only (it holds a secret).
 */
export async function writeFileAtomic(path: string, data: Uint8Array): Promise<void> {
  const tmp = join(dirname(path), `.${randomBytes(8).toString('hex')}.tmp`);
  const handle = await open(tmp, 'wx', 0o600);
  try {
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, path);
  } catch (e) {
    await unlink(tmp).catch(() => {});
    throw e;
  }
}

export type CredentialFetcher = (uri: string) => Promise<Uint8Array>;

/**
 * Checks every path first, then fetches each credential and writes it.
 * Any failure stops start-up with upstream's `init Hub failed: …`.
 */
export async function provisionCredentials(
  credentials: readonly Credential[],
  fetch: CredentialFetcher,
  root: string = KBS_RESOURCE_STORAGE_DIR,
): Promise<void> {
  for (const c of credentials) {
    if (!isCredentialPathValid(c.path, root)) {
      throw new HubInitializationFailed(`illegal path to put credential : ${shown(c.path)}`);
    }
  }
  if (credentials.length === 0) return;
  try {
    await makeDirectory(root, 0o700);
  } catch (e) {
    throw new HubInitializationFailed(`Create ${root} dir failed ${(e as Error).message}.`, { cause: e });
  }
  const realRoot = await realpath(root);
  for (const c of credentials) {
    let content: Uint8Array;
    try {
      content = await fetch(c.resourceUri);
    } catch (e) {
      throw new HubInitializationFailed(`kbs client get resource failed: ${(e as Error).message}`, {
        cause: e,
      });
    }
    const parent = dirname(c.path);
    try {
      await makeDirectory(parent, 0o700);
    } catch (e) {
      throw new HubInitializationFailed(`create dir ${parent} failed: ${(e as Error).message}`, { cause: e });
    }
    // A symlinked folder inside the root must not lead the write outside it.
    const realParent = await realpath(parent);
    if (realParent !== realRoot && !realParent.startsWith(realRoot + sep)) {
      throw new HubInitializationFailed(`illegal path to put credential : ${shown(c.path)} (leaves ${root})`);
    }
    try {
      await writeFileAtomic(c.path, content);
    } catch (e) {
      throw new HubInitializationFailed(`write kbs initialization file failed: ${(e as Error).message}`, {
        cause: e,
      });
    }
  }
}
