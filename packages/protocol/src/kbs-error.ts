/**
 * trustee's KBS error variants, their HTTP status and the JSON error body
 * `{"type": ".../errors/<Variant>", "detail": "<Display>"}`.
 */
import { ProtocolError, ProtocolLibraryError } from './errors.js';

export type KbsErrorKind =
  | 'AdminAuthInitialization'
  | 'AdminAuthAccess'
  | 'AttestationError'
  | 'JweError'
  | 'TokenNotFound'
  | 'TokenVerifierError'
  | 'PolicyDeny'
  | 'ParsePolicyError'
  | 'PolicyEngineError'
  | 'RvpsError'
  | 'InvalidRequestPath'
  | 'PluginManagerInitialization'
  | 'PluginNotFound'
  | 'PluginInternalError'
  | 'SerdeError'
  | 'HTTPFailed'
  | 'HTTPSFailed'
  | 'StorageBackendInitialization'
  | 'PrometheusError';

export const KBS_ERROR_TYPE_PREFIX = 'https://github.com/confidential-containers/kbs/errors';

/**
 * trustee's Display wording per variant: the template (`{}` marks the one
 * parameter upstream interpolates) and the text used when no parameter is
 * given. Variants whose source error is not part of the upstream message stay
 * terse on purpose: details go to the log, not the client.
 */
const DETAILS: Readonly<Record<KbsErrorKind, readonly [template: string, bare: string]>> = Object.freeze({
  AdminAuthInitialization: [
    'failed to initialize [admin] configuration: {}',
    'failed to initialize [admin] configuration',
  ],
  AdminAuthAccess: ['admin access denied for endpoint {}', 'admin access denied'],
  AttestationError: ['Attestation error: {}', 'Attestation error'],
  HTTPFailed: ['HTTP initialization failed', 'HTTP initialization failed'],
  HTTPSFailed: ['HTTPS initialization failed', 'HTTPS initialization failed'],
  InvalidRequestPath: ['Request path {} is invalid', 'Request path is invalid'],
  JweError: ['JWE failed', 'JWE failed'],
  PluginManagerInitialization: ['PluginManager initialization failed', 'PluginManager initialization failed'],
  PluginNotFound: ['Plugin {} not found', 'Plugin not found'],
  PluginInternalError: ['Plugin internal error', 'Plugin internal error'],
  PolicyDeny: ['Access denied by policy', 'Access denied by policy'],
  ParsePolicyError: ['Failed to parse policy: {}', 'Failed to parse policy'],
  PolicyEngineError: ['Policy engine error: {}', 'Policy engine error'],
  RvpsError: ['RVPS configuration failed: {}', 'RVPS configuration failed'],
  SerdeError: ['Serialize/Deserialize failed', 'Serialize/Deserialize failed'],
  StorageBackendInitialization: [
    'Storage backend initialization failed: {}',
    'Storage backend initialization failed',
  ],
  TokenNotFound: ['Attestation Token not found', 'Attestation Token not found'],
  TokenVerifierError: ['Token Verifier error', 'Token Verifier error'],
  PrometheusError: ['Prometheus error', 'Prometheus error'],
});

export const KBS_ERROR_KINDS: readonly KbsErrorKind[] = Object.freeze(Object.keys(DETAILS) as KbsErrorKind[]);

export function isKbsErrorKind(s: unknown): s is KbsErrorKind {
  return typeof s === 'string' && Object.hasOwn(DETAILS, s);
}

/** Only these two are 404; every other error is 401, which makes guests re-attest. */
export function kbsErrorStatus(kind: KbsErrorKind): 401 | 404 {
  return kind === 'InvalidRequestPath' || kind === 'PluginNotFound' ? 404 : 401;
}

/**
 * trustee's detail text for `kind`. `arg` fills the parameter of the
 * parameterised variants (path, plugin name, cause…); the others ignore it.
 */
export function formatKbsErrorDetail(kind: KbsErrorKind, arg?: string): string {
  const [template, bare] = DETAILS[kind];
  return arg === undefined || !template.includes('{}') ? bare : template.replace('{}', arg);
}

export interface KbsErrorBody {
  type: string;
  detail: string;
}

export class KbsError extends ProtocolLibraryError {
  override readonly name: string = 'KbsError';
  readonly kind: KbsErrorKind;
  readonly detail: string;
  readonly status: 401 | 404;
  /**
   * @param detail the client-visible detail; defaults to trustee's wording
   *   for `kind`. Never put secrets or internal state here.
   */
  constructor(kind: KbsErrorKind, detail?: string, options?: { cause?: unknown }) {
    const d = detail ?? formatKbsErrorDetail(kind);
    super('KBS_ERROR', `${kind}: ${d}`, options);
    this.kind = kind;
    this.detail = d;
    this.status = kbsErrorStatus(kind);
  }
}

/** The response body for an error, keys in upstream's order. */
export function kbsErrorBody(err: KbsError): KbsErrorBody {
  return { type: `${KBS_ERROR_TYPE_PREFIX}/${err.kind}`, detail: err.detail };
}

export interface ParsedKbsErrorBody extends KbsErrorBody {
  /** The variant when `type` is one of trustee's, else null (another server or a newer KBS). */
  kind: KbsErrorKind | null;
}

const MAX_ERROR_DETAIL_LENGTH = 64 * 1024;

/** Client side: parse an error body received from a KBS. */
export function parseKbsErrorBody(json: unknown): ParsedKbsErrorBody {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new ProtocolError('error', 'must be a JSON object');
  }
  const { type, detail } = json as Record<string, unknown>;
  if (typeof type !== 'string' || type.length > 1024)
    throw new ProtocolError('error.type', 'must be a string');
  if (typeof detail !== 'string') throw new ProtocolError('error.detail', 'must be a string');
  const prefix = `${KBS_ERROR_TYPE_PREFIX}/`;
  const variant = type.startsWith(prefix) ? type.slice(prefix.length) : null;
  return {
    type,
    detail: detail.length > MAX_ERROR_DETAIL_LENGTH ? `${detail.slice(0, MAX_ERROR_DETAIL_LENGTH)}…` : detail,
    kind: isKbsErrorKind(variant) ? variant : null,
  };
}
