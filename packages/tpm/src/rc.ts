/**
 * TPM_RC decoding (TPM 2.0 Library Part 2, "Response Code Details").
 *
 * Format 1 (bit 7 set) codes blame a handle, a parameter or a session by
 * number; format 0 codes are plain errors (bit 8, TPM 2.0), warnings
 * (bit 11) or vendor codes (bit 10). Bits 16..23 hold the TSS layer that
 * produced the code when a resource manager or TCTI answered, not the TPM.
 */

const RC_VER1 = 0x100;
const RC_FMT1 = 0x080;
const RC_WARN = 0x900;

const FORMAT0_ERRORS: ReadonlyMap<number, readonly [string, string]> = new Map([
  [0x000, ['INITIALIZE', 'TPM not initialized by TPM2_Startup or already initialized']],
  [0x001, ['FAILURE', 'commands not being accepted because of a TPM failure']],
  [0x003, ['SEQUENCE', 'improper use of a sequence handle']],
  [0x00b, ['PRIVATE', 'not currently used']],
  [0x019, ['HMAC', 'not currently used']],
  [0x020, ['DISABLED', 'the command is disabled']],
  [0x021, ['EXCLUSIVE', 'command failed because audit sequence required exclusivity']],
  [0x024, ['AUTH_TYPE', 'authorization handle is not correct for command']],
  [0x025, ['AUTH_MISSING', 'command requires an authorization session for handle and it is not present']],
  [0x026, ['POLICY', 'policy failure in math operation or an invalid authPolicy value']],
  [0x027, ['PCR', 'PCR check fail']],
  [0x028, ['PCR_CHANGED', 'PCR have changed since checked']],
  [0x02d, ['UPGRADE', 'the TPM is in field upgrade mode']],
  [0x02e, ['TOO_MANY_CONTEXTS', 'context ID counter is at maximum']],
  [0x02f, ['AUTH_UNAVAILABLE', 'authValue or authPolicy is not available for selected entity']],
  [0x030, ['REBOOT', 'a _TPM_Init and Startup(CLEAR) is required before the TPM can resume operation']],
  [0x031, ['UNBALANCED', 'the protection algorithms (hash and symmetric) are not reasonably balanced']],
  [0x042, ['COMMAND_SIZE', 'command commandSize value is inconsistent with contents of the command buffer']],
  [0x043, ['COMMAND_CODE', 'command code not supported']],
  [0x044, ['AUTHSIZE', 'the value of authorizationSize is out of range or the number of octets is wrong']],
  [
    0x045,
    [
      'AUTH_CONTEXT',
      'use of an authorization session with a context command or another command that cannot have one',
    ],
  ],
  [0x046, ['NV_RANGE', 'NV offset+size is out of range']],
  [0x047, ['NV_SIZE', 'requested allocation size is larger than allowed']],
  [0x048, ['NV_LOCKED', 'NV access locked']],
  [0x049, ['NV_AUTHORIZATION', 'NV access authorization fails in command actions']],
  [
    0x04a,
    [
      'NV_UNINITIALIZED',
      'an NV Index is used before being initialized or the state saved by TPM2_Shutdown(STATE) could not be restored',
    ],
  ],
  [0x04b, ['NV_SPACE', 'insufficient space for NV allocation']],
  [0x04c, ['NV_DEFINED', 'NV Index or persistent object already defined']],
  [0x050, ['BAD_CONTEXT', 'context in TPM2_ContextLoad() is not valid']],
  [0x051, ['CPHASH', 'cpHash value already set or not correct for use']],
  [0x052, ['PARENT', 'handle for parent is not a valid parent']],
  [0x053, ['NEEDS_TEST', 'some function needs testing']],
  [0x054, ['NO_RESULT', 'internal function cannot process a request due to an unspecified problem']],
  [0x055, ['SENSITIVE', 'the sensitive area did not unmarshal correctly after decryption']],
]);

const FORMAT1_ERRORS: ReadonlyMap<number, readonly [string, string]> = new Map([
  [0x001, ['ASYMMETRIC', 'asymmetric algorithm not supported or not correct']],
  [0x002, ['ATTRIBUTES', 'inconsistent attributes']],
  [0x003, ['HASH', 'hash algorithm not supported or not appropriate']],
  [0x004, ['VALUE', 'value is out of range or is not correct for the context']],
  [0x005, ['HIERARCHY', 'hierarchy is not enabled or is not correct for the use']],
  [0x007, ['KEY_SIZE', 'key size is not supported']],
  [0x008, ['MGF', 'mask generation function not supported']],
  [0x009, ['MODE', 'mode of operation not supported']],
  [0x00a, ['TYPE', 'the type of the value is not appropriate for the use']],
  [0x00b, ['HANDLE', 'the handle is not correct for the use']],
  [0x00c, ['KDF', 'unsupported key derivation function or function not appropriate for use']],
  [0x00d, ['RANGE', 'value was out of allowed range']],
  [0x00e, ['AUTH_FAIL', 'the authorization HMAC check failed and DA counter incremented']],
  [0x00f, ['NONCE', 'invalid nonce size or nonce value mismatch']],
  [0x010, ['PP', 'authorization requires assertion of PP']],
  [0x012, ['SCHEME', 'unsupported or incompatible scheme']],
  [0x015, ['SIZE', 'structure is the wrong size']],
  [0x016, ['SYMMETRIC', 'unsupported symmetric algorithm or key size, or not appropriate for instance']],
  [0x017, ['TAG', 'incorrect structure tag']],
  [0x018, ['SELECTOR', 'union selector is incorrect']],
  [
    0x01a,
    [
      'INSUFFICIENT',
      'the TPM was unable to unmarshal a value because there were not enough octets in the input buffer',
    ],
  ],
  [0x01b, ['SIGNATURE', 'the signature is not valid']],
  [0x01c, ['KEY', 'key fields are not compatible with the selected use']],
  [0x01d, ['POLICY_FAIL', 'a policy check failed']],
  [0x01f, ['INTEGRITY', 'integrity check failed']],
  [0x020, ['TICKET', 'invalid ticket']],
  [0x021, ['RESERVED_BITS', 'reserved bits not set to zero as required']],
  [0x022, ['BAD_AUTH', 'authorization failure without DA implications']],
  [0x023, ['EXPIRED', 'the policy has expired']],
  [0x024, ['POLICY_CC', 'the commandCode in the policy is not the commandCode of the command']],
  [0x025, ['BINDING', 'public and sensitive portions of an object are not cryptographically bound']],
  [0x026, ['CURVE', 'curve not supported']],
  [0x027, ['ECC_POINT', 'point is not on the required curve']],
]);

const WARNINGS: ReadonlyMap<number, readonly [string, string]> = new Map<number, readonly [string, string]>([
  [0x001, ['CONTEXT_GAP', 'gap for context ID is too large']],
  [0x002, ['OBJECT_MEMORY', 'out of memory for object contexts']],
  [0x003, ['SESSION_MEMORY', 'out of memory for session contexts']],
  [0x004, ['MEMORY', 'out of shared object/session memory or need space for internal operations']],
  [
    0x005,
    [
      'SESSION_HANDLES',
      'out of session handles; a session must be flushed before a new session may be created',
    ],
  ],
  [
    0x006,
    [
      'OBJECT_HANDLES',
      'out of object handles; the handle space for objects is depleted and a reboot is required',
    ],
  ],
  [0x007, ['LOCALITY', 'bad locality']],
  [
    0x008,
    [
      'YIELDED',
      'the TPM has suspended operation on the command; forward progress was made and the command may be retried',
    ],
  ],
  [0x009, ['CANCELED', 'the command was canceled']],
  [0x00a, ['TESTING', 'TPM is performing self-tests']],
  ...[0, 1, 2, 3, 4, 5, 6].map((i): [number, readonly [string, string]] => [
    0x010 + i,
    [
      `REFERENCE_H${i}`,
      `the ${ordinal(i)} handle in the handle area references a transient object or session that is not loaded`,
    ],
  ]),
  ...[0, 1, 2, 3, 4, 5, 6].map((i): [number, readonly [string, string]] => [
    0x018 + i,
    [
      `REFERENCE_S${i}`,
      `the ${ordinal(i)} authorization session handle references a session that is not loaded`,
    ],
  ]),
  [0x020, ['NV_RATE', 'the TPM is rate-limiting accesses to prevent wearout of NV']],
  [
    0x021,
    [
      'LOCKOUT',
      'authorizations for objects subject to DA protection are not allowed at this time because the TPM is in DA lockout mode',
    ],
  ],
  [0x022, ['RETRY', 'the TPM was not able to start the command']],
  [0x023, ['NV_UNAVAILABLE', 'the command may require writing of NV and NV is not current accessible']],
]);

function ordinal(i: number): string {
  return ['1st', '2nd', '3rd', '4th', '5th', '6th', '7th'][i] ?? `${i + 1}th`;
}

/** TSS layers found in bits 16..23 when the code did not come from the TPM itself. */
const LAYERS: ReadonlyMap<number, string> = new Map([
  [0, 'tpm'],
  [6, 'esys'],
  [7, 'sys'],
  [8, 'mu'],
  [10, 'tcti'],
  [11, 'resource manager (kernel)'],
  [12, 'resource manager (user)'],
]);

export type ResponseCodeKind = 'success' | 'error' | 'warning' | 'vendor' | 'tpm1.2' | 'layer';

/** What a TPM_RC means. */
export interface DecodedResponseCode {
  readonly rc: number;
  readonly kind: ResponseCodeKind;
  /** 0 for format-0 codes, 1 for format-1 codes (which blame a handle, parameter or session). */
  readonly format: 0 | 1;
  /** The code without the handle/parameter/session number, e.g. 0x08b for TPM_RC_HANDLE. */
  readonly code: number;
  /** `TPM_RC_<NAME>`, or undefined for codes not in the specification. */
  readonly name: string | undefined;
  readonly description: string;
  /** Format 1 only: 1-based number of the handle, parameter or session blamed; 0 means unspecified. */
  readonly handle?: number;
  readonly parameter?: number;
  readonly session?: number;
  /** TSS layer that produced a non-TPM code (bits 16..23). */
  readonly layer?: string;
  /** One line for logs, e.g. `TPM_RC_HANDLE, handle 1: the handle is not correct for the use`. */
  readonly text: string;
}

/** Decodes a TPM response code into its meaning. */
export function decodeResponseCode(rcIn: number): DecodedResponseCode {
  const rc = rcIn >>> 0;
  if (rc === 0) {
    return {
      rc,
      kind: 'success',
      format: 0,
      code: 0,
      name: 'TPM_RC_SUCCESS',
      description: 'success',
      text: 'TPM_RC_SUCCESS',
    };
  }
  const layerId = (rc >>> 16) & 0xff;
  if (layerId !== 0 || rc > 0xffffff) {
    const layer = LAYERS.get(layerId) ?? `layer ${layerId}`;
    const inner = decodeResponseCode(rc & 0xffff);
    return {
      ...inner,
      rc,
      kind: 'layer',
      layer,
      text: `${layer}: ${inner.text}`,
    };
  }
  if ((rc & RC_FMT1) !== 0) {
    const number = rc & 0x3f;
    const code = RC_FMT1 | number;
    const entry = FORMAT1_ERRORS.get(number);
    const name = entry ? `TPM_RC_${entry[0]}` : undefined;
    const description = entry?.[1] ?? 'unknown format-1 error';
    const n = (rc >>> 8) & 0xf;
    let where: { handle?: number; parameter?: number; session?: number };
    let whereText: string;
    if ((rc & 0x40) !== 0) {
      where = { parameter: n };
      whereText = n === 0 ? 'a parameter' : `parameter ${n}`;
    } else if ((n & 0x8) !== 0) {
      where = { session: n & 0x7 };
      whereText = (n & 0x7) === 0 ? 'a session' : `session ${n & 0x7}`;
    } else {
      where = { handle: n };
      whereText = n === 0 ? 'a handle' : `handle ${n}`;
    }
    return {
      rc,
      kind: 'error',
      format: 1,
      code,
      name,
      description,
      ...where,
      text: `${name ?? `format-1 error 0x${code.toString(16)}`}, ${whereText}: ${description}`,
    };
  }
  if ((rc & RC_VER1) === 0) {
    return {
      rc,
      kind: 'tpm1.2',
      format: 0,
      code: rc,
      name: undefined,
      description: 'TPM 1.2 response code',
      text: `TPM 1.2 response code 0x${rc.toString(16)}`,
    };
  }
  if ((rc & 0x400) !== 0) {
    return {
      rc,
      kind: 'vendor',
      format: 0,
      code: rc & 0xfff,
      name: undefined,
      description: 'vendor-defined response code',
      text: `vendor response code 0x${rc.toString(16)}`,
    };
  }
  const number = rc & 0x7f;
  const isWarning = (rc & 0x800) !== 0;
  const entry = (isWarning ? WARNINGS : FORMAT0_ERRORS).get(number);
  const name = entry ? `TPM_RC_${entry[0]}` : undefined;
  const description = entry?.[1] ?? (isWarning ? 'unknown warning' : 'unknown error');
  const code = (isWarning ? RC_WARN : RC_VER1) | number;
  return {
    rc,
    kind: isWarning ? 'warning' : 'error',
    format: 0,
    code,
    name,
    description,
    text: `${name ?? `${isWarning ? 'warning' : 'error'} 0x${code.toString(16)}`}: ${description}`,
  };
}

/** TPM_RC base codes callers test for (compare with `TpmError.code`). */
export const TPM_RC = Object.freeze({
  SUCCESS: 0x000,
  INITIALIZE: 0x100,
  FAILURE: 0x101,
  COMMAND_CODE: 0x143,
  NV_RANGE: 0x146,
  NV_SIZE: 0x147,
  NV_LOCKED: 0x148,
  NV_AUTHORIZATION: 0x149,
  NV_UNINITIALIZED: 0x14a,
  NV_SPACE: 0x14b,
  NV_DEFINED: 0x14c,
  VALUE: 0x084,
  HANDLE: 0x08b,
  SIZE: 0x095,
  AUTH_FAIL: 0x08e,
  BAD_AUTH: 0x0a2,
  ATTRIBUTES: 0x082,
  SCHEME: 0x092,
  KEY: 0x09c,
  TESTING: 0x90a,
  RETRY: 0x922,
  YIELDED: 0x908,
  LOCKOUT: 0x921,
} as const);
