/**
 * What the vTPM attesters (`tpm`, `az-snp-vtpm`) share: where the TPM is,
 * and the PCR operations behind init-data binding and runtime measurements.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { formatTpmAddress, parseTpmAddress, TPM_ALG, Tpm, type TpmAddress } from '@broker/tpm';
import {
  AttesterError,
  type AttesterLogger,
  type PlatformContext,
  type PlatformOptions,
} from '../attester.js';

/**
 * Environment variable naming the TPM instead of a device: `swtpm:HOST:PORT`
 * (swtpm's TCP data channel, as the mock TEE serves it) or a device path
 * (`/dev/tpmrm0`, `device:/dev/tpmrm0`). It wins over device detection, so
 * the attester code path is the same on Azure and on the mock; only the
 * address differs. Device paths given here are used as is (no root prefix).
 */
export const BROKER_TPM = 'BROKER_TPM';

/** PCR that init-data is measured into, as upstream and the peer-pod image do. */
export const INIT_DATA_PCR = 8;
/** Upstream's vTPM attesters quote and extend PCRs 0..23 of the SHA-256 bank only. */
export const PCR_COUNT = 24;

/** The TPM address from `BROKER_TPM`, or undefined when it is unset or empty. */
export function tpmAddressFromEnv(env: PlatformContext['env']): TpmAddress | undefined {
  const value = env[BROKER_TPM];
  if (value === undefined || value.trim() === '') return undefined;
  try {
    return parseTpmAddress(value);
  } catch (err) {
    throw new AttesterError(`${BROKER_TPM}: ${(err as Error).message}`);
  }
}

/** A device path as seen under the platform root (tests point the root at a temporary tree). */
export function deviceUnderRoot(options: PlatformOptions, path: string): TpmAddress {
  return { kind: 'device', path: join(options.root ?? '/', path) };
}

export function describeAddress(address: TpmAddress): string {
  return formatTpmAddress(address);
}

/** Runs `fn` on a TPM connection that is closed afterwards, as upstream opens a context per operation. */
export async function withTpm<T>(address: TpmAddress, fn: (tpm: Tpm) => Promise<T>): Promise<T> {
  const tpm = Tpm.open(address);
  try {
    return await fn(tpm);
  } finally {
    await tpm.close().catch(() => undefined);
  }
}

function hex(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
}

/** Checks a PCR index and a SHA-256 digest the way upstream's extend helpers do. */
export function checkExtendArguments(digest: Uint8Array, pcr: number, what: string): void {
  if (digest.length !== 32) {
    throw new AttesterError(`${what}: expected sha256 digest (32 bytes), got ${digest.length} bytes`);
  }
  if (!Number.isInteger(pcr) || pcr < 0 || pcr >= PCR_COUNT) {
    throw new AttesterError(`${what}: invalid PCR index ${pcr} (expected 0-23)`);
  }
}

/** Extends SHA-256 PCR `pcr` with a 32-byte digest. */
export async function extendSha256Pcr(
  address: TpmAddress,
  pcr: number,
  digest: Uint8Array,
  logger: AttesterLogger | undefined,
  what: string,
): Promise<void> {
  checkExtendArguments(digest, pcr, what);
  logger?.info(`Extending PCR ${pcr} with ${hex(digest)}`);
  try {
    await withTpm(address, (tpm) => tpm.pcrExtend(pcr, [{ hashAlg: TPM_ALG.SHA256, digest }]));
  } catch (err) {
    throw wrapTpmError(`${what}: extending PCR ${pcr} on ${describeAddress(address)} failed`, err);
  }
}

/** The current SHA-256 value of PCR `pcr`. */
export async function readSha256Pcr(address: TpmAddress, pcr: number): Promise<Uint8Array> {
  if (!Number.isInteger(pcr) || pcr < 0 || pcr >= PCR_COUNT) {
    throw new AttesterError(`invalid PCR index ${pcr} (expected 0-23)`);
  }
  try {
    const [value] = await withTpm(address, (tpm) => tpm.readPcrs(TPM_ALG.SHA256, [pcr]));
    return value!;
  } catch (err) {
    throw wrapTpmError(`reading SHA-256 PCR ${pcr} from ${describeAddress(address)} failed`, err);
  }
}

/** Keeps attester errors as they are and wraps TPM and transport errors with context (the cause is kept). */
export function wrapTpmError(
  context: string,
  err: unknown,
  make: (message: string, options: ErrorOptions) => AttesterError = (m, o) => new AttesterError(m, o),
): AttesterError {
  if (err instanceof AttesterError) return err;
  return make(`${context}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
}

export function lowerHex(b: Uint8Array): string {
  return hex(b);
}

/**
 * Binds an init-data digest (SHA-256) to PCR 8, once: PCR 8 = sha256(32 zero bytes ‖ digest). A PCR 8
 * that already holds that value is left as it is (process-user-data bound it at boot, or the agent did
 * before a restart), so the agent can be given the initdata to send to the KBS without PCR 8 drifting;
 * a PCR 8 that holds anything else is a conflict, never a second extend.
 */
export async function bindInitDataOnce(
  address: TpmAddress,
  digest: Uint8Array,
  logger: AttesterLogger | undefined,
): Promise<void> {
  checkExtendArguments(digest, INIT_DATA_PCR, 'init-data binding');
  const expected = createHash('sha256').update(new Uint8Array(32)).update(digest).digest();
  const before = Buffer.from(await readSha256Pcr(address, INIT_DATA_PCR));
  if (before.equals(expected)) {
    logger?.info(`PCR ${INIT_DATA_PCR} already holds this init-data's value; not extending it again`);
    return;
  }
  if (!before.equals(Buffer.alloc(32))) {
    throw new AttesterError(
      `init-data binding: PCR ${INIT_DATA_PCR} holds ${before.toString('hex')}, not this init-data's value ${expected.toString('hex')}; refusing to extend it again`,
    );
  }
  await extendSha256Pcr(address, INIT_DATA_PCR, digest, logger, 'init-data binding');
}
