// Reference values as people write them by hand, turned into RVPS messages: besides the RVPS message
// (`{"version","type","payload"}`) and a list of them, trustee-operator's `rvps-reference-values`
// ConfigMap form `{"<name>": {"expiration": …, "value": …}}` and the older list form
// `[{"name", "expired", "hash-value": [{"alg", "value"}]}]` (or `[{"name", "expiration", "value"}]`).
// The hand-written values become one `sample` message, so they are registered, checked and stored
// exactly as the admin API's are (with a fresh expiration stamp, now + 12 months).
import { RvpsError } from './errors.js';
import { RVPS_MESSAGE_VERSION } from './message.js';
import { decodeReferenceValue } from './reference-value.js';

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** An RVPS message has a `type` and a `payload`; hand-written values have neither. */
function isRvpsMessage(v: unknown): boolean {
  return isObject(v) && Object.hasOwn(v, 'payload') && Object.hasOwn(v, 'type');
}

function handWrittenValue(name: string, entry: unknown): unknown {
  if (!isObject(entry)) {
    throw new RvpsError(
      'PAYLOAD_MALFORMED',
      `reference value ${JSON.stringify(name)} must be an object with "value" (or "hash-value")`,
    );
  }
  // The operator's form may leave out the expiration; the stored record always has one.
  const withExpiration =
    entry.expiration === undefined && entry.expired === undefined
      ? { ...entry, expiration: '1970-01-01T00:00:00Z' }
      : entry;
  try {
    return decodeReferenceValue(name, Buffer.from(JSON.stringify(withExpiration), 'utf8')).value;
  } catch (e) {
    throw new RvpsError(
      'PAYLOAD_MALFORMED',
      (e as Error).message.replace('stored reference value', 'reference value'),
      {
        cause: e,
      },
    );
  }
}

function sampleMessage(values: readonly (readonly [string, unknown])[]): Record<string, string> {
  const payload: Record<string, unknown> = {};
  for (const [name, value] of values) {
    if (Object.hasOwn(payload, name)) {
      throw new RvpsError('PAYLOAD_MALFORMED', `reference value ${JSON.stringify(name)} is given twice`);
    }
    Object.defineProperty(payload, name, { value, enumerable: true, writable: true, configurable: true });
  }
  return {
    version: RVPS_MESSAGE_VERSION,
    type: 'sample',
    payload: Buffer.from(JSON.stringify(payload), 'utf8').toString('base64'),
  };
}

/** The RVPS messages a reference-values document holds, in order. Throws RvpsError for other shapes. */
export function referenceValueMessages(doc: unknown): unknown[] {
  if (isRvpsMessage(doc)) return [doc];
  if (Array.isArray(doc)) {
    const messages: unknown[] = [];
    const values: [string, unknown][] = [];
    doc.forEach((item, i) => {
      if (isRvpsMessage(item)) messages.push(item);
      else if (isObject(item) && typeof item.name === 'string')
        values.push([item.name, handWrittenValue(item.name, item)]);
      else {
        throw new RvpsError(
          'PAYLOAD_MALFORMED',
          `entry ${i} is neither an RVPS message nor a reference value with a "name"`,
        );
      }
    });
    return values.length === 0 ? messages : [...messages, sampleMessage(values)];
  }
  if (isObject(doc)) {
    const values = Object.entries(doc).map(([name, entry]) => [name, handWrittenValue(name, entry)] as const);
    return values.length === 0 ? [] : [sampleMessage(values)];
  }
  throw new RvpsError('MESSAGE_MALFORMED', 'reference values must be a JSON object or a list');
}
