/**
 * TPM 2.0 constants (TCG TPM 2.0 Library, Part 2: Structures). Only the
 * values this package marshals or checks are listed; names follow the spec
 * without the `TPM_`/`TPM2_` prefix.
 */

/** TPM_ST: structure tags. */
export const TPM_ST = Object.freeze({
  RSP_COMMAND: 0x00c4,
  NULL: 0x8000,
  NO_SESSIONS: 0x8001,
  SESSIONS: 0x8002,
  ATTEST_NV: 0x8014,
  ATTEST_COMMAND_AUDIT: 0x8015,
  ATTEST_SESSION_AUDIT: 0x8016,
  ATTEST_CERTIFY: 0x8017,
  ATTEST_QUOTE: 0x8018,
  ATTEST_TIME: 0x8019,
  ATTEST_CREATION: 0x801a,
  ATTEST_NV_DIGEST: 0x801c,
  CREATION: 0x8021,
  VERIFIED: 0x8022,
  AUTH_SECRET: 0x8023,
  HASHCHECK: 0x8024,
  AUTH_SIGNED: 0x8025,
} as const);

/** TPM_CC: command codes of the commands this package sends. */
export const TPM_CC = Object.freeze({
  NV_UndefineSpace: 0x00000122,
  EvictControl: 0x00000120,
  NV_DefineSpace: 0x0000012a,
  CreatePrimary: 0x00000131,
  NV_Write: 0x00000137,
  SelfTest: 0x00000143,
  Startup: 0x00000144,
  Shutdown: 0x00000145,
  NV_Read: 0x0000014e,
  Load: 0x00000157,
  Quote: 0x00000158,
  Sign: 0x0000015d,
  FlushContext: 0x00000165,
  NV_ReadPublic: 0x00000169,
  ReadPublic: 0x00000173,
  GetCapability: 0x0000017a,
  GetRandom: 0x0000017b,
  PCR_Read: 0x0000017e,
  PCR_Extend: 0x00000182,
} as const);

export type TpmCommandName = keyof typeof TPM_CC;

const COMMAND_NAMES: ReadonlyMap<number, TpmCommandName> = new Map(
  (Object.entries(TPM_CC) as [TpmCommandName, number][]).map(([name, code]) => [code, name]),
);

/** `TPM2_<name>` for a known command code, else the code in hex. */
export function commandName(code: number): string {
  const name = COMMAND_NAMES.get(code);
  return name === undefined ? `command 0x${code.toString(16).padStart(8, '0')}` : `TPM2_${name}`;
}

/**
 * Number of handles in the handle area of each command this package knows,
 * and how many of them need an authorization session (always the first
 * ones). Interposers use it to split a command they did not build.
 */
export const COMMAND_HANDLES: ReadonlyMap<
  number,
  { readonly handles: number; readonly authHandles: number }
> = new Map([
  [TPM_CC.NV_UndefineSpace, { handles: 2, authHandles: 1 }],
  [TPM_CC.EvictControl, { handles: 2, authHandles: 1 }],
  [TPM_CC.NV_DefineSpace, { handles: 1, authHandles: 1 }],
  [TPM_CC.CreatePrimary, { handles: 1, authHandles: 1 }],
  [TPM_CC.NV_Write, { handles: 2, authHandles: 1 }],
  [TPM_CC.SelfTest, { handles: 0, authHandles: 0 }],
  [TPM_CC.Startup, { handles: 0, authHandles: 0 }],
  [TPM_CC.Shutdown, { handles: 0, authHandles: 0 }],
  [TPM_CC.NV_Read, { handles: 2, authHandles: 1 }],
  [TPM_CC.Load, { handles: 1, authHandles: 1 }],
  [TPM_CC.Quote, { handles: 1, authHandles: 1 }],
  [TPM_CC.Sign, { handles: 1, authHandles: 1 }],
  [TPM_CC.FlushContext, { handles: 0, authHandles: 0 }],
  [TPM_CC.NV_ReadPublic, { handles: 1, authHandles: 0 }],
  [TPM_CC.ReadPublic, { handles: 1, authHandles: 0 }],
  [TPM_CC.GetCapability, { handles: 0, authHandles: 0 }],
  [TPM_CC.GetRandom, { handles: 0, authHandles: 0 }],
  [TPM_CC.PCR_Read, { handles: 0, authHandles: 0 }],
  [TPM_CC.PCR_Extend, { handles: 1, authHandles: 1 }],
]);

/** Handles returned in the response handle area (CreatePrimary and Load return one). */
export const RESPONSE_HANDLES: ReadonlyMap<number, number> = new Map([
  [TPM_CC.CreatePrimary, 1],
  [TPM_CC.Load, 1],
]);

/** TPM_ALG_ID values. */
export const TPM_ALG = Object.freeze({
  ERROR: 0x0000,
  RSA: 0x0001,
  TDES: 0x0003,
  SHA1: 0x0004,
  HMAC: 0x0005,
  AES: 0x0006,
  MGF1: 0x0007,
  KEYEDHASH: 0x0008,
  XOR: 0x000a,
  SHA256: 0x000b,
  SHA384: 0x000c,
  SHA512: 0x000d,
  NULL: 0x0010,
  SM3_256: 0x0012,
  SM4: 0x0013,
  RSASSA: 0x0014,
  RSAES: 0x0015,
  RSAPSS: 0x0016,
  OAEP: 0x0017,
  ECDSA: 0x0018,
  ECDH: 0x0019,
  ECDAA: 0x001a,
  SM2: 0x001b,
  ECSCHNORR: 0x001c,
  ECMQV: 0x001d,
  KDF1_SP800_56A: 0x0020,
  KDF2: 0x0021,
  KDF1_SP800_108: 0x0022,
  ECC: 0x0023,
  SYMCIPHER: 0x0025,
  CAMELLIA: 0x0026,
  SHA3_256: 0x0027,
  SHA3_384: 0x0028,
  SHA3_512: 0x0029,
  CTR: 0x0040,
  OFB: 0x0041,
  CBC: 0x0042,
  CFB: 0x0043,
  ECB: 0x0044,
} as const);

const ALG_NAMES: ReadonlyMap<number, string> = new Map(
  Object.entries(TPM_ALG).map(([name, id]) => [id, name.toLowerCase()]),
);

/** Lower-case algorithm name (`sha256`, `rsassa`), or hex for unknown ids. */
export function algName(alg: number): string {
  return ALG_NAMES.get(alg) ?? `alg 0x${alg.toString(16).padStart(4, '0')}`;
}

/** Hash algorithms: digest size and node:crypto name. */
const HASHES: ReadonlyMap<number, { readonly size: number; readonly node: string }> = new Map([
  [TPM_ALG.SHA1, { size: 20, node: 'sha1' }],
  [TPM_ALG.SHA256, { size: 32, node: 'sha256' }],
  [TPM_ALG.SHA384, { size: 48, node: 'sha384' }],
  [TPM_ALG.SHA512, { size: 64, node: 'sha512' }],
  [TPM_ALG.SM3_256, { size: 32, node: 'sm3' }],
  [TPM_ALG.SHA3_256, { size: 32, node: 'sha3-256' }],
  [TPM_ALG.SHA3_384, { size: 48, node: 'sha3-384' }],
  [TPM_ALG.SHA3_512, { size: 64, node: 'sha3-512' }],
]);

/** Digest size of a TPM hash algorithm, or undefined when `alg` is not a hash. */
export function hashSize(alg: number): number | undefined {
  return HASHES.get(alg)?.size;
}

/** node:crypto name of a TPM hash algorithm, or undefined when `alg` is not a hash. */
export function nodeHashName(alg: number): string | undefined {
  return HASHES.get(alg)?.node;
}

/** Largest digest any supported hash produces (sizeof TPMU_HA). */
export const MAX_DIGEST_SIZE = 64;

/** TPM_ECC_CURVE values. */
export const TPM_ECC = Object.freeze({
  NONE: 0x0000,
  NIST_P192: 0x0001,
  NIST_P224: 0x0002,
  NIST_P256: 0x0003,
  NIST_P384: 0x0004,
  NIST_P521: 0x0005,
  BN_P256: 0x0010,
  BN_P638: 0x0011,
  SM2_P256: 0x0020,
} as const);

/** Permanent and range handles. */
export const TPM_RH = Object.freeze({
  OWNER: 0x40000001,
  NULL: 0x40000007,
  /** TPM_RS_PW: the password authorization session. */
  PW: 0x40000009,
  LOCKOUT: 0x4000000a,
  ENDORSEMENT: 0x4000000b,
  PLATFORM: 0x4000000c,
} as const);

/** First handle of each handle range (TPM_HT in the top byte). */
export const TPM_HR = Object.freeze({
  PCR: 0x00000000,
  HMAC_SESSION: 0x02000000,
  POLICY_SESSION: 0x03000000,
  NV_INDEX: 0x01000000,
  PERMANENT: 0x40000000,
  TRANSIENT: 0x80000000,
  PERSISTENT: 0x81000000,
} as const);

/** TPM_SU: Startup and Shutdown types. */
export const TPM_SU = Object.freeze({ CLEAR: 0x0000, STATE: 0x0001 } as const);

/** TPM_CAP: capability selectors for GetCapability. */
export const TPM_CAP = Object.freeze({
  ALGS: 0x00000000,
  HANDLES: 0x00000001,
  COMMANDS: 0x00000002,
  PCRS: 0x00000005,
  TPM_PROPERTIES: 0x00000006,
  ECC_CURVES: 0x00000008,
} as const);

/** TPM_PT: fixed properties (PT_FIXED = 0x100) used here. */
export const TPM_PT = Object.freeze({
  FAMILY_INDICATOR: 0x00000100,
  REVISION: 0x00000102,
  MANUFACTURER: 0x00000105,
  VENDOR_STRING_1: 0x00000106,
  FIRMWARE_VERSION_1: 0x0000010b,
  FIRMWARE_VERSION_2: 0x0000010c,
  INPUT_BUFFER: 0x0000010d,
  PCR_COUNT: 0x00000112,
  NV_INDEX_MAX: 0x00000117,
  MAX_COMMAND_SIZE: 0x0000011e,
  MAX_RESPONSE_SIZE: 0x0000011f,
  MAX_DIGEST: 0x00000120,
  NV_BUFFER_MAX: 0x0000012c,
} as const);

/** TPMA_OBJECT bits. */
export const TPMA_OBJECT = Object.freeze({
  fixedTPM: 1 << 1,
  stClear: 1 << 2,
  fixedParent: 1 << 4,
  sensitiveDataOrigin: 1 << 5,
  userWithAuth: 1 << 6,
  adminWithPolicy: 1 << 7,
  noDA: 1 << 10,
  encryptedDuplication: 1 << 11,
  restricted: 1 << 16,
  decrypt: 1 << 17,
  sign: 1 << 18,
  x509sign: 1 << 19,
} as const);

/** TPMA_NV bits (the TPM_NT field, bits 4..7, is kept apart). */
export const TPMA_NV = Object.freeze({
  PPWRITE: 1 << 0,
  OWNERWRITE: 1 << 1,
  AUTHWRITE: 1 << 2,
  POLICYWRITE: 1 << 3,
  POLICY_DELETE: 1 << 10,
  WRITELOCKED: 1 << 11,
  WRITEALL: 1 << 12,
  WRITEDEFINE: 1 << 13,
  WRITE_STCLEAR: 1 << 14,
  GLOBALLOCK: 1 << 15,
  PPREAD: 1 << 16,
  OWNERREAD: 1 << 17,
  AUTHREAD: 1 << 18,
  POLICYREAD: 1 << 19,
  NO_DA: 1 << 25,
  ORDERLY: 1 << 26,
  CLEAR_STCLEAR: 1 << 27,
  READLOCKED: 1 << 28,
  WRITTEN: 1 << 29,
  PLATFORMCREATE: 1 << 30,
  READ_STCLEAR: 2 ** 31,
} as const);

/** TPM_NT: NV index types (TPMA_NV bits 4..7). */
export const TPM_NT = Object.freeze({
  ORDINARY: 0x0,
  COUNTER: 0x1,
  BITS: 0x2,
  EXTEND: 0x4,
  PIN_FAIL: 0x8,
  PIN_PASS: 0x9,
} as const);

/** TPMA_SESSION bits. */
export const TPMA_SESSION = Object.freeze({
  continueSession: 0x01,
  auditExclusive: 0x02,
  auditReset: 0x04,
  decrypt: 0x20,
  encrypt: 0x40,
  audit: 0x80,
} as const);

/** TPM_GENERATED_VALUE: the magic of every TPMS_ATTEST the TPM signs ("\xffTCG"). */
export const TPM_GENERATED_VALUE = 0xff544347;
