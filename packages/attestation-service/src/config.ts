// trustee's attestation service configuration JSON (attestation-service/src/config.rs), read unchanged:
// `storage_backend`, `rvps_config`, `attestation_token_broker`, `verifier_config`. The last three are
// the same tables the KBS's built-in service reads under `[attestation_service]`, so they go through
// its parser; unknown keys are ignored with a warning, as trustee ignores them.
import { readFileSync, statSync } from 'node:fs';
import { type AttestationServiceConfig, parseAttestationServiceConfig } from '@broker/attestation';
import { parseStorageBackend, type StorageBackendSettings } from '@broker/rvps-core';
import { AttestationServiceError } from './errors.js';

/** trustee's grpc-as default listen address. */
export const DEFAULT_AS_SOCKET = '127.0.0.1:3000';
/** The address trustee's restful-as image listens on (its command line has no default). */
export const DEFAULT_RESTFUL_AS_SOCKET = '0.0.0.0:8080';
/** trustee's default remote RVPS. */
export const DEFAULT_GRPC_RVPS_ADDRESS = '127.0.0.1:50003';
const MAX_CONFIG_BYTES = 1024 * 1024;

export class AsConfigError extends AttestationServiceError {
  override readonly name: string = 'AsConfigError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('CONFIG_INVALID', message, options);
  }
}

export type AsRvpsSettings =
  | { readonly type: 'BuiltIn' }
  /** `address` always has a scheme (`http://` is added when missing, as trustee does). */
  | { readonly type: 'GrpcRemote'; readonly address: string };

export interface AsSettings {
  readonly service: AttestationServiceConfig;
  readonly storage: StorageBackendSettings;
  readonly rvps: AsRvpsSettings;
  readonly warnings: readonly string[];
}

const KNOWN = ['storage_backend', 'rvps_config', 'attestation_token_broker', 'verifier_config'];

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function remoteRvps(section: Record<string, unknown>, warnings: string[]): AsRvpsSettings {
  for (const k of Object.keys(section)) {
    if (k !== 'type' && k !== 'address')
      warnings.push(`rvps_config.${k} is not a GrpcRemote setting; ignored`);
  }
  const address = section.address ?? DEFAULT_GRPC_RVPS_ADDRESS;
  if (typeof address !== 'string' || address === '') {
    throw new AsConfigError('rvps_config.address must be a non-empty string');
  }
  return { type: 'GrpcRemote', address: /^[a-z]+:\/\//.test(address) ? address : `http://${address}` };
}

export function parseAsConfig(doc: unknown): AsSettings {
  if (!isObject(doc)) throw new AsConfigError('the configuration must be a JSON object');
  const warnings: string[] = [];
  for (const k of Object.keys(doc))
    if (!KNOWN.includes(k)) warnings.push(`${k} is not an attestation service setting; ignored`);
  const storage = parseStorageBackend(doc.storage_backend, 'storage_backend.', warnings);
  const rvpsSection = doc.rvps_config;
  let rvps: AsRvpsSettings = { type: 'BuiltIn' };
  const table: Record<string, unknown> = {};
  for (const k of ['attestation_token_broker', 'verifier_config'])
    if (doc[k] !== undefined) table[k] = doc[k];
  if (isObject(rvpsSection) && rvpsSection.type === 'GrpcRemote') {
    rvps = remoteRvps(rvpsSection, warnings);
  } else if (rvpsSection !== undefined) {
    table.rvps_config = rvpsSection;
  }
  let service: AttestationServiceConfig;
  try {
    service = parseAttestationServiceConfig(table, warnings);
  } catch (e) {
    throw new AsConfigError((e as Error).message.replace(/\[attestation_service\]\.?/g, '').trim(), {
      cause: e,
    });
  }
  if (service.rvps.type === 'BuiltIn' && service.rvps.storageType !== undefined) {
    warnings.push(
      `rvps_config.storage_type is not used: the built-in RVPS keeps reference values in storage_backend (${storage.storageType})`,
    );
  }
  return { service, storage, rvps, warnings };
}

export function loadAsConfig(path: string): AsSettings {
  let text: string;
  try {
    if (statSync(path).size > MAX_CONFIG_BYTES)
      throw new AsConfigError(`larger than ${MAX_CONFIG_BYTES} bytes`);
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new AsConfigError(`${path}: ${(e as Error).message}`, { cause: e });
  }
  try {
    return parseAsConfig(JSON.parse(text));
  } catch (e) {
    throw new AsConfigError(`${path}: ${(e as Error).message}`, { cause: e });
  }
}
