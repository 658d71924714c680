/**
 * The sealed-secret payload (the JWS payload), as guest-components'
 * `Secret` serializes it: `version` first, then serde's internally tagged
 * `type`, then the fields of the variant in declaration order. Field names
 * are upstream's snake_case, kept verbatim in the types because they are
 * the wire format.
 *
 * `provider_settings` and `annotations` are serde_json maps. Their members
 * are written in insertion order (serde_json with `preserve_order`, which
 * upstream's dependency tree enables). Integer-like member names are the
 * one difference: JavaScript objects list them first.
 */
import { SealedSecretError } from './errors.js';
import { isJsonMap, type JsonMap, type JsonValue, parseStrictJson } from './json.js';

/** The only payload version upstream unseals. */
export const SEALED_SECRET_VERSION = '0.1.0';

/** Encryption of `encrypted_data` under the DEK (crypto's `WrapType`). */
export type WrapType = 'A256GCM' | 'A256CTR';
export const WRAP_TYPES: readonly WrapType[] = Object.freeze(['A256GCM', 'A256CTR'] as const);

/** A pointer to a secret kept by a provider (`kbs`: `name` is the KBS resource URI). */
export interface VaultSecret {
  readonly version: string;
  readonly type: 'vault';
  readonly name: string;
  readonly provider: string;
  readonly provider_settings: JsonMap;
  readonly annotations: JsonMap;
}

/** A secret encrypted under a DEK that a key provider unwraps. Binary fields are standard base64. */
export interface EnvelopeSecret {
  readonly version: string;
  readonly type: 'envelope';
  readonly key_id: string;
  readonly encrypted_key: string;
  readonly encrypted_data: string;
  readonly wrap_type: WrapType;
  readonly iv: string;
  readonly provider: string;
  readonly provider_settings: JsonMap;
  readonly annotations: JsonMap;
}

export type SealedSecretPayload = VaultSecret | EnvelopeSecret;

/** The payload JSON is not a `Secret`; the reason says which field. */
export class PayloadShapeError extends SealedSecretError {
  override readonly name: string = 'PayloadShapeError';
  override readonly code = 'PAYLOAD_SHAPE_INVALID';
}

function str(obj: Record<string, unknown>, key: string): string {
  if (!Object.hasOwn(obj, key)) throw new PayloadShapeError(`missing field \`${key}\``);
  const v = obj[key];
  if (typeof v !== 'string') throw new PayloadShapeError(`field \`${key}\` must be a string`);
  return v;
}

function map(obj: Record<string, unknown>, key: string): JsonMap {
  if (!Object.hasOwn(obj, key)) throw new PayloadShapeError(`missing field \`${key}\``);
  const v = obj[key];
  if (!isJsonMap(v)) throw new PayloadShapeError(`field \`${key}\` must be a JSON object`);
  return v;
}

/**
 * Reads a payload from parsed JSON with serde's rules for `Secret`: every
 * field present and of its type, members unknown to the variant ignored.
 * The version is not checked here: upstream parses any version and refuses
 * it only when unsealing.
 */
export function payloadFromJson(value: JsonValue): SealedSecretPayload {
  if (!isJsonMap(value)) throw new PayloadShapeError('expected a JSON object');
  const version = str(value, 'version');
  if (!Object.hasOwn(value, 'type')) throw new PayloadShapeError('missing field `type`');
  const type = value.type;
  if (type === 'vault') {
    return {
      version,
      type,
      name: str(value, 'name'),
      provider: str(value, 'provider'),
      provider_settings: map(value, 'provider_settings'),
      annotations: map(value, 'annotations'),
    };
  }
  if (type === 'envelope') {
    const wrapType = str(value, 'wrap_type');
    if (!(WRAP_TYPES as readonly string[]).includes(wrapType)) {
      throw new PayloadShapeError('unknown variant of `wrap_type`, expected `A256GCM` or `A256CTR`');
    }
    return {
      version,
      type,
      key_id: str(value, 'key_id'),
      encrypted_key: str(value, 'encrypted_key'),
      encrypted_data: str(value, 'encrypted_data'),
      wrap_type: wrapType as WrapType,
      iv: str(value, 'iv'),
      provider: str(value, 'provider'),
      provider_settings: map(value, 'provider_settings'),
      annotations: map(value, 'annotations'),
    };
  }
  throw new PayloadShapeError('unknown variant of `type`, expected `envelope` or `vault`');
}

/** Parses payload bytes (UTF-8 JSON). Throws `PayloadShapeError` or a JSON error. */
export function parsePayload(bytes: Uint8Array | string): SealedSecretPayload {
  const text = typeof bytes === 'string' ? bytes : new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  return payloadFromJson(parseStrictJson(text));
}

/**
 * The payload as upstream's `serde_json::to_string(&secret)` writes it:
 * compact, fields in upstream's order. Extra members of the object are not
 * written, as serde would not know them.
 */
export function serializePayload(payload: SealedSecretPayload): string {
  const j = JSON.stringify;
  const head = `{"version":${j(payload.version)},"type":${j(payload.type)}`;
  const tail = `"provider":${j(payload.provider)},"provider_settings":${j(payload.provider_settings)},"annotations":${j(payload.annotations)}}`;
  if (payload.type === 'vault') return `${head},"name":${j(payload.name)},${tail}`;
  return (
    `${head},"key_id":${j(payload.key_id)},"encrypted_key":${j(payload.encrypted_key)},` +
    `"encrypted_data":${j(payload.encrypted_data)},"wrap_type":${j(payload.wrap_type)},"iv":${j(payload.iv)},${tail}`
  );
}

/** A vault payload pointing at a KBS resource, as `secret seal … vault --provider kbs` makes. */
export function vaultPayload(
  name: string,
  options: { provider?: string; providerSettings?: JsonMap; annotations?: JsonMap } = {},
): VaultSecret {
  return {
    version: SEALED_SECRET_VERSION,
    type: 'vault',
    name,
    provider: options.provider ?? 'kbs',
    provider_settings: options.providerSettings ?? {},
    annotations: options.annotations ?? {},
  };
}
