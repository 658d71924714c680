// Binds the initdata to the vTPM: PCR8 (SHA-256 bank) is extended once with the first 32 bytes of the
// initdata digest, so PCR8 = sha256(32 zero bytes ‖ digest[0..32]), what trustee and our attestation
// policy compare. PCR8 is read first, which makes the step safe to run again after a service restart:
// already holding the expected value is success; holding anything else is a conflict, never a second
// extend.
import { pcr8FromInitDataDigest } from '@broker/protocol';
import { TPM_ALG, Tpm, TpmLibraryError, taggedDigest } from '@broker/tpm';
import { ProvisionError } from './errors.js';

export const INITDATA_PCR = 8;

export type Pcr8Outcome = 'extended' | 'already-extended';

export interface Pcr8Result {
  readonly outcome: Pcr8Outcome;
  /** PCR8 afterwards, hex. */
  readonly value: string;
}

export async function bindInitDataToPcr8(tpmAddress: string, digest: Uint8Array): Promise<Pcr8Result> {
  const expected = pcr8FromInitDataDigest(digest, { truncate: true });
  let tpm: Tpm;
  try {
    tpm = Tpm.open(tpmAddress);
  } catch (e) {
    throw new ProvisionError('TPM', `TPM ${tpmAddress}: ${(e as Error).message}`, { cause: e });
  }
  try {
    const read = async () => Buffer.from((await tpm.readPcrs(TPM_ALG.SHA256, [INITDATA_PCR]))[0] ?? []);
    const before = await read();
    if (before.equals(expected)) return { outcome: 'already-extended', value: before.toString('hex') };
    if (!before.equals(Buffer.alloc(32))) {
      throw new ProvisionError(
        'PCR8_CONFLICT',
        `PCR8 already holds ${before.toString('hex')}, which is not this initdata's value ${expected.toString('hex')}; refusing to extend it again`,
      );
    }
    await tpm.pcrExtend(INITDATA_PCR, [taggedDigest(TPM_ALG.SHA256, digest.subarray(0, 32))]);
    const after = await read();
    if (!after.equals(expected)) {
      throw new ProvisionError(
        'TPM',
        `PCR8 reads ${after.toString('hex')} after the extend, expected ${expected.toString('hex')}`,
      );
    }
    return { outcome: 'extended', value: after.toString('hex') };
  } catch (e) {
    if (e instanceof TpmLibraryError)
      throw new ProvisionError('TPM', `TPM ${tpmAddress}: ${e.message}`, { cause: e });
    throw e;
  } finally {
    await tpm.close().catch(() => {});
  }
}
