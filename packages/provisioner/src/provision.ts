// `process-user-data provision-files`: user data → allow-listed initdata → PCR8 → files.
//
// Files written under `root` (CAA's paths, plus kata's initdata folder the agent-policy gate reads):
//   /run/peerpod/initdata                          the user-data entry as received (when there is one)
//   /run/peerpod/apf.json, auth.json, scratch-space.marker   from user data as received, 0644 (as CAA)
//   /run/peerpod/initdata.digest                   lowercase hex digest of the initdata TOML
//   /run/confidential-containers/initdata/initdata.toml   the exact TOML
//   /run/peerpod/cdh.toml, /run/peerpod/policy.rego       from the initdata
//   /run/peerpod/aa.toml                            last: the attestation agent's path unit waits for it
// PCR8 is extended before any file is written, so a started chain always runs on a bound PCR8.
import { randomBytes } from 'node:crypto';
import { rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { makeDirectory } from '@broker/cli';
import {
  type DecodedInitData,
  decodeUserDataInitData,
  defaultInitData,
  NO_KBS_AA_TOML,
  NO_KBS_CDH_TOML,
} from './initdata.js';
import { bindInitDataToPcr8, type Pcr8Result } from './pcr8.js';
import { type FetchOptions, fetchUserData, type UserDataSource } from './sources.js';
import { acceptWriteFiles, parseCloudConfig } from './user-data.js';

export const PEERPOD_DIR = '/run/peerpod';
export const INITDATA_DIR = '/run/confidential-containers/initdata';

export interface ProvisionOptions {
  /** Where user data comes from; none means "no user data" (the default initdata). */
  readonly source?: UserDataSource;
  /** Prefix of every path written (tests use a temporary folder); `/` in the image. */
  readonly root: string;
  /** TPM address for PCR8 (`/dev/tpmrm0`, `swtpm:HOST:PORT`), or null to skip binding. */
  readonly tpm: string | null;
  readonly fetch?: Partial<FetchOptions>;
  readonly log?: (line: string) => void;
}

export interface ProvisionResult {
  readonly initData: DecodedInitData;
  readonly pcr8?: Pcr8Result;
  /** Absolute paths written, in order. */
  readonly written: readonly string[];
}

/** Writes via a temporary file and rename, so a reader (or a path unit) never sees half a file. */
async function writeAtomic(path: string, data: string | Buffer, mode: number): Promise<void> {
  await makeDirectory(dirname(path), 0o755);
  const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await writeFile(tmp, data, { mode, flag: 'wx' });
    await rename(tmp, path);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  }
}

export async function provisionFiles(options: ProvisionOptions): Promise<ProvisionResult> {
  const log = options.log ?? (() => {});
  let received: string | undefined;
  let userDataFiles: ReadonlyMap<string, string> = new Map();
  if (options.source !== undefined) {
    const fetchOptions: FetchOptions = {
      timeoutMs: options.fetch?.timeoutMs ?? 180_000,
      retryDelayMs: options.fetch?.retryDelayMs ?? 5_000,
      onRetry:
        options.fetch?.onRetry ?? ((n, e) => log(`retry ${n}: user data not available yet: ${e.message}`)),
    };
    const bytes = await fetchUserData(options.source, fetchOptions);
    const accepted = acceptWriteFiles(parseCloudConfig(bytes));
    for (const path of accepted.refused) log(`File: ${path} is not allowed in WriteFiles.`);
    for (const path of accepted.initdataOnly) {
      log(`File: ${path} from user data is ignored: it comes from the initdata, which PCR8 measures.`);
    }
    received = accepted.initdata;
    userDataFiles = accepted.files;
  } else {
    log('no user data source: provisioning the default initdata');
  }
  const initData = received !== undefined ? decodeUserDataInitData(received) : defaultInitData();
  for (const key of initData.skipped) log(`File: ${key} is not allowed in initdata.`);
  if (initData.isDefault && received === undefined && options.source !== undefined) {
    log('user data has no initdata: provisioning the default initdata');
  }
  if (initData.algorithm !== 'sha256') {
    log(`initdata algorithm ${initData.algorithm}: PCR8 is extended with the first 32 bytes of its digest`);
  }

  let pcr8: Pcr8Result | undefined;
  if (options.tpm !== null) {
    pcr8 = await bindInitDataToPcr8(options.tpm, initData.digest);
    log(`PCR8 ${pcr8.outcome === 'extended' ? 'extended' : 'already holds this initdata'}: ${pcr8.value}`);
  } else {
    log('no TPM: PCR8 is not extended');
  }

  const at = (p: string) => join(options.root, p);
  const written: string[] = [];
  const put = async (path: string, data: string | Buffer, mode = 0o600) => {
    await writeAtomic(at(path), data, mode);
    written.push(path);
  };
  if (received !== undefined) await put(`${PEERPOD_DIR}/initdata`, received);
  // CAA writes these with mode 0644 in 0755 folders.
  for (const [path, content] of userDataFiles) await put(path, content, 0o644);
  await put(`${INITDATA_DIR}/initdata.toml`, initData.toml);
  await put(`${PEERPOD_DIR}/initdata.digest`, initData.digest.toString('hex'), 0o644);
  await put(`${PEERPOD_DIR}/cdh.toml`, initData.files.get('cdh.toml') ?? NO_KBS_CDH_TOML);
  const policy = initData.files.get('policy.rego');
  if (policy !== undefined) await put(`${PEERPOD_DIR}/policy.rego`, policy);
  await put(`${PEERPOD_DIR}/aa.toml`, initData.files.get('aa.toml') ?? NO_KBS_AA_TOML);
  for (const p of written) log(`Wrote ${p}`);
  return { initData, ...(pcr8 !== undefined && { pcr8 }), written };
}
