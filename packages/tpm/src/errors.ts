import { commandName } from './constants.js';
import { type DecodedResponseCode, decodeResponseCode } from './rc.js';

/**
 * What failed. A TPM's answer keeps its numeric base response code (compare it with `TPM_RC`);
 * the package's own failures carry a string.
 */
export type TpmErrorCode =
  /** The TPM answered with a non-zero response code: its base code (`TpmError`). */
  | number
  /** Bytes that should hold a TPM structure or response do not (`TpmParseError`). */
  | 'PARSE_FAILED'
  /** The transport to the TPM failed (`TpmTransportError`). */
  | 'TRANSPORT_FAILED'
  /** A caller passed a value this package cannot marshal (`TpmUsageError`). */
  | 'USAGE_INVALID'
  /** swtpm could not be started (`SwtpmLaunchError`). */
  | 'SWTPM_LAUNCH_FAILED';

/** Base class of every error this package throws; callers branch on `code` or on the class. */
export class TpmLibraryError extends Error {
  override readonly name: string = 'TpmLibraryError';
  readonly code: TpmErrorCode;
  constructor(code: TpmErrorCode, message?: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/**
 * The TPM answered a command with a non-zero response code. `rc` is the raw
 * code; `decoded` says what it means (format, error name, which handle,
 * parameter or session it blames).
 */
export class TpmError extends TpmLibraryError {
  override readonly name: string = 'TpmError';
  readonly rc: number;
  readonly commandCode: number;
  readonly command: string;
  readonly decoded: DecodedResponseCode;
  /** The base error code: the response code without its handle/parameter/session number. */
  declare readonly code: number;

  constructor(rc: number, commandCode: number) {
    const decoded = decodeResponseCode(rc);
    const command = commandName(commandCode);
    super(
      decoded.code,
      `${command} failed: TPM_RC 0x${(rc >>> 0).toString(16).padStart(3, '0')} (${decoded.text})`,
    );
    this.rc = rc >>> 0;
    this.commandCode = commandCode;
    this.command = command;
    this.decoded = decoded;
  }
}

/**
 * Bytes that should hold a TPM structure or response do not: truncated,
 * oversize, trailing data, an unknown selector, or a value out of range.
 * `offset` is where the parser stopped within the outermost buffer.
 */
export class TpmParseError extends TpmLibraryError {
  override readonly name: string = 'TpmParseError';
  readonly structure: string;
  readonly offset: number;

  constructor(structure: string, offset: number, message: string) {
    super('PARSE_FAILED', `malformed ${structure} at byte ${offset}: ${message}`);
    this.structure = structure;
    this.offset = offset;
  }
}

/** The transport to the TPM failed: device or socket error, closed connection, oversize response. */
export class TpmTransportError extends TpmLibraryError {
  override readonly name: string = 'TpmTransportError';
  constructor(message?: string, options?: { cause?: unknown }) {
    super('TRANSPORT_FAILED', message, options);
  }
}

/** A caller passed a value this package cannot marshal (wrong size, out of range). */
export class TpmUsageError extends TpmLibraryError {
  override readonly name: string = 'TpmUsageError';
  constructor(message?: string, options?: { cause?: unknown }) {
    super('USAGE_INVALID', message, options);
  }
}

/** swtpm could not be started: missing program, no free ports, or it exited before serving. */
export class SwtpmLaunchError extends TpmLibraryError {
  override readonly name: string = 'SwtpmLaunchError';
  constructor(message?: string, options?: { cause?: unknown }) {
    super('SWTPM_LAUNCH_FAILED', message, options);
  }
}
