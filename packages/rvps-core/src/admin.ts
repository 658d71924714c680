// The operator's view of the built-in RVPS's store (the console's reference values): every stored record
// with its expiration and provenance, and expiring one now (removing it: the next appraisal no longer
// finds it). A record whose expiration has passed is not handed to policies either (see rvps.ts).
import type { KvStorage } from '@broker/kv-storage';
import { checkReferenceValueName } from './message.js';
import { decodeReferenceValue, isExpired, type ReferenceValue } from './reference-value.js';

const NAMESPACE = 'reference_value';
/** Records listed at most; a larger store is cut at this many (sorted by name). */
export const MAX_LISTED_REFERENCE_VALUES = 1000;

export interface ListedReferenceValue {
  readonly name: string;
  readonly expiration?: string;
  readonly value?: unknown;
  /** Whether the expiration has passed: policies no longer see the value. */
  readonly expired?: boolean;
  /** Where it came from, when the registering message said (`image_tag`, `initdata_digest`, …). */
  readonly provenance?: Readonly<Record<string, string>>;
  /** Why the stored record cannot be read back (it is listed all the same). */
  readonly error?: string;
}

export async function listReferenceValues(
  storage: KvStorage,
  now: () => Date = () => new Date(),
): Promise<ListedReferenceValue[]> {
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
    out.push({
      name,
      expiration: rv.expiration,
      value: rv.value,
      expired: isExpired(rv, now()),
      ...(rv.provenance !== undefined && { provenance: rv.provenance }),
    });
  }
  return out;
}

/** The whole stored record of one name (expired or not); undefined when there is none or it is unreadable. */
export async function readReferenceValue(
  storage: KvStorage,
  name: string,
): Promise<ReferenceValue | undefined> {
  try {
    checkReferenceValueName(name);
    const bytes = await storage.get(NAMESPACE, name);
    return bytes === undefined ? undefined : decodeReferenceValue(name, bytes);
  } catch {
    return undefined;
  }
}

/** Removes the record; false when there was none. Throws RvpsError for a name the RVPS never stores. */
export async function expireReferenceValue(storage: KvStorage, name: string): Promise<boolean> {
  checkReferenceValueName(name);
  return storage.delete(NAMESPACE, name);
}
