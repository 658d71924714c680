// The operator's view of the built-in RVPS's store (the console's reference values): every stored record,
// and expiring one. The expiration date a record carries is not enforced when a policy reads it (as
// trustee), so expiring a value removes it: the next appraisal no longer finds it.
import type { KvStorage } from '../storage/types.js';
import { checkReferenceValueName } from './message.js';
import { decodeReferenceValue, type ReferenceValue } from './reference-value.js';

const NAMESPACE = 'reference_value';
/** Records listed at most; a larger store is cut at this many (sorted by name). */
export const MAX_LISTED_REFERENCE_VALUES = 1000;

export interface ListedReferenceValue {
  readonly name: string;
  readonly expiration?: string;
  readonly value?: unknown;
  /** Why the stored record cannot be read back (it is listed all the same). */
  readonly error?: string;
}

export async function listReferenceValues(storage: KvStorage): Promise<ListedReferenceValue[]> {
  const names = (await storage.list(NAMESPACE)).sort().slice(0, MAX_LISTED_REFERENCE_VALUES);
  const out: ListedReferenceValue[] = [];
  for (const name of names) {
    const bytes = await storage.get(NAMESPACE, name);
    if (bytes === undefined) continue;
    let rv: ReferenceValue;
    try {
      rv = decodeReferenceValue(name, bytes);
    } catch (e) {
      out.push({ name, error: (e as Error).message });
      continue;
    }
    out.push({ name, expiration: rv.expiration, value: rv.value });
  }
  return out;
}

/** Removes the record; false when there was none. Throws RvpsError for a name the RVPS never stores. */
export async function expireReferenceValue(storage: KvStorage, name: string): Promise<boolean> {
  checkReferenceValueName(name);
  return storage.delete(NAMESPACE, name);
}
