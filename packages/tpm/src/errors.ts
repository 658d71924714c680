import { commandName } from './constants.js';
import { type DecodedResponseCode, decodeResponseCode } from './rc.js';

/** Base class of every error this package throws. */
export class TpmLibraryError extends Error {
  override readonly name: string = 'TpmLibraryError';
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

  constructor(rc: number, commandCode: number) {
    const decoded = decodeResponseCode(rc);
    const command = commandName(commandCode);
    super(`${command} failed: TPM_RC 0x${(rc >>> 0).toString(16).padStart(3, '0')} (${decoded.text})`);
    this.rc = rc >>> 0;
    this.commandCode = commandCode;
    this.command = command;
    this.decoded = decoded;
  }

  /** The base error code: the response code without its handle/parameter/session number. */
  get code(): number {
    return this.decoded.code;
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
    super(`malformed ${structure} at byte ${offset}: ${message}`);
    this.structure = structure;
    this.offset = offset;
  }
}

/** The transport to the TPM failed: device or socket error, closed connection, oversize response. */
export class TpmTransportError extends TpmLibraryError {
  override readonly name: string = 'TpmTransportError';
}

/** A caller passed a value this package cannot marshal (wrong size, out of range). */
export class TpmUsageError extends TpmLibraryError {
  override readonly name: string = 'TpmUsageError';
}

/** swtpm could not be started: missing program, no free ports, or it exited before serving. */
export class SwtpmLaunchError extends TpmLibraryError {
  override readonly name: string = 'SwtpmLaunchError';
}
