import { createHash } from 'node:crypto';
import { algName, hashSize, nodeHashName, TPM_ALG } from './constants.js';
import { TpmUsageError } from './errors.js';
import type { PcrSelection } from './pcr-selection.js';

function hasher(hashAlg: number): { readonly name: string; readonly size: number } {
  const name = nodeHashName(hashAlg);
  const size = hashSize(hashAlg);
  if (name === undefined || size === undefined)
    throw new TpmUsageError(`${algName(hashAlg)} is not a hash algorithm`);
  return { name, size };
}

/**
 * PCR values by bank: `pcrValues.get(TPM_ALG.SHA256)[i]` is PCR i of the
 * SHA-256 bank. A plain array stands for the values of the only bank a
 * selection names.
 */
export type PcrValues =
  | ReadonlyMap<number, readonly (Uint8Array | undefined)[]>
  | readonly (Uint8Array | undefined)[];

/**
 * The digest a quote's TPMS_QUOTE_INFO.pcrDigest must hold: `hashAlg` over
 * the selected PCR values concatenated in selection order (banks as listed,
 * PCRs ascending within a bank). Every selected value must be present and
 * have its bank's digest size.
 */
export function pcrDigest(
  pcrValues: PcrValues,
  selection: readonly PcrSelection[],
  hashAlg: number,
): Uint8Array {
  const h = createHash(hasher(hashAlg).name);
  const byBank = Array.isArray(pcrValues)
    ? undefined
    : (pcrValues as ReadonlyMap<number, readonly (Uint8Array | undefined)[]>);
  if (byBank === undefined && new Set(selection.map((s) => s.hashAlg)).size > 1) {
    throw new TpmUsageError('PCR values given as one list, but the selection names several banks');
  }
  for (const sel of selection) {
    const bankSize = hasher(sel.hashAlg).size;
    const values =
      byBank === undefined ? (pcrValues as readonly (Uint8Array | undefined)[]) : byBank.get(sel.hashAlg);
    if (values === undefined) throw new TpmUsageError(`no PCR values for bank ${algName(sel.hashAlg)}`);
    const sorted = [...new Set(sel.pcrs)].sort((a, b) => a - b);
    for (const index of sorted) {
      const v = values[index];
      if (v === undefined) throw new TpmUsageError(`PCR ${index} of bank ${algName(sel.hashAlg)} is missing`);
      if (v.length !== bankSize) {
        throw new TpmUsageError(
          `PCR ${index} of bank ${algName(sel.hashAlg)} is ${v.length} bytes, not ${bankSize}`,
        );
      }
      h.update(v);
    }
  }
  return new Uint8Array(h.digest());
}

/** The value of a PCR after extending `old` with `digest`: H(old ‖ digest). */
export function extendPcr(old: Uint8Array, digest: Uint8Array, hashAlg: number = TPM_ALG.SHA256): Uint8Array {
  const { name, size } = hasher(hashAlg);
  if (old.length !== size || digest.length !== size) {
    throw new TpmUsageError(`${algName(hashAlg)} PCR extension needs ${size}-byte values`);
  }
  return new Uint8Array(createHash(name).update(old).update(digest).digest());
}

/** The value of a PCR reset to zeros and extended with each digest in turn. */
export function replayPcr(digests: readonly Uint8Array[], hashAlg: number = TPM_ALG.SHA256): Uint8Array {
  let value: Uint8Array = new Uint8Array(hasher(hashAlg).size);
  for (const d of digests) value = extendPcr(value, d, hashAlg);
  return value;
}
