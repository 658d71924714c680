/**
 * Init-data binding at start-up (`--initdata-toml FILE` or `--initdata-digest B64`).
 *
 * The digest is the hash of the TOML file's exact bytes with the algorithm it
 * names. The primary attester binds it to the TEE: TDX compares it with
 * MRCONFIGID, SNP with HOSTDATA, vTPMs extend PCR8. An attester without
 * `bindInitData` (the sample attester) cannot, and binding is skipped with a
 * log line, as upstream does for such TEEs. A mismatch is fatal: the agent
 * must not serve evidence for a configuration the TEE was not launched with.
 */
import { readFile } from 'node:fs/promises';
import type { Attester } from '@broker/attester';
import {
  decodeBase64StdStrict,
  type InitData,
  initDataDigest,
  MAX_INITDATA_BYTES,
  parseInitData,
} from '@broker/protocol';
import { InitDataBindingFailed } from './errors.js';

export interface LoadedInitData {
  /** The TOML text, sent to the KBS as `init-data` with token requests. */
  readonly toml: string;
  readonly initData: InitData;
  readonly digest: Buffer;
}

/** Reads and checks an initdata TOML file (at most 1 MiB) and digests its bytes. */
export async function loadInitDataToml(path: string): Promise<LoadedInitData> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (cause) {
    throw new InitDataBindingFailed(`read initdata toml file ${path}: ${(cause as Error).message}`, {
      cause,
    });
  }
  try {
    const initData = parseInitData(bytes, MAX_INITDATA_BYTES);
    return { toml: bytes.toString('utf8'), initData, digest: initDataDigest(bytes, initData.algorithm) };
  } catch (cause) {
    throw new InitDataBindingFailed(`${path}: ${(cause as Error).message}`, { cause });
  }
}

/** Longest digest accepted on the command line (SHA-512, with room for TEE-specific forms). */
const MAX_DIGEST_BYTES = 256;

/** `--initdata-digest`: standard base64 with padding, as upstream decodes it. */
export function parseInitDataDigestArgument(b64: string): Buffer {
  const digest = b64.length <= 4 * MAX_DIGEST_BYTES ? decodeBase64StdStrict(b64) : null;
  if (digest === null) throw new InitDataBindingFailed('base64 decode initdata: not standard base64');
  if (digest.length === 0 || digest.length > MAX_DIGEST_BYTES) {
    throw new InitDataBindingFailed(
      `initdata digest must be 1 to ${MAX_DIGEST_BYTES} bytes, got ${digest.length}`,
    );
  }
  return digest;
}

export type InitDataBinding = 'bound' | 'unsupported';

export interface BindingLogger {
  info(msg: string): void;
}

/**
 * Binds `digest` with the attester. Resolves `unsupported` when it cannot
 * bind; rejects with `InitDataBindingFailed` when the TEE disagrees.
 */
export async function bindInitData(
  attester: Attester,
  digest: Uint8Array,
  logger?: BindingLogger,
): Promise<InitDataBinding> {
  if (attester.bindInitData === undefined) {
    logger?.info(`Platform ${attester.tee} does not support initdata checking. Jumping.`);
    return 'unsupported';
  }
  try {
    await attester.bindInitData(digest);
  } catch (cause) {
    throw new InitDataBindingFailed(
      `The initdata supplied by the parameter is inconsistent with that of the current platform: ${(cause as Error).message}`,
      { cause },
    );
  }
  logger?.info('Check initdata passed.');
  return 'bound';
}
