/**
 * Error classes of the ttrpc package. A failed call always rejects with a
 * `TtrpcError` (or subclass) so callers switch on `code` without parsing text;
 * `message` is the peer's status message verbatim because upstream clients
 * and tests match on it.
 */
import { Code, codeName } from './codes.js';

/** A `google.protobuf.Any` from `google.rpc.Status.details`, kept as raw bytes. */
export interface StatusDetail {
  readonly type_url: string;
  readonly value: Uint8Array;
}

/** A non-OK ttrpc status, either received from the peer or produced locally (deadline, size cap). */
export class TtrpcError extends Error {
  override readonly name: string = 'TtrpcError';
  readonly code: number;
  readonly details: readonly StatusDetail[];
  constructor(
    code: number,
    message: string,
    options?: { details?: readonly StatusDetail[]; cause?: unknown },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options?.details ?? [];
  }
  /** Upper-case gRPC name of `code`, for logs. */
  get codeName(): string {
    return codeName(this.code);
  }
}

/**
 * The connection is gone (closed locally, closed by the peer, or failed).
 * Pending and later calls reject with this; callers may reconnect and retry.
 */
export class TtrpcClosedError extends TtrpcError {
  override readonly name: string = 'TtrpcClosedError';
  constructor(message = 'ttrpc: closed', options?: { cause?: unknown }) {
    super(Code.UNAVAILABLE, message, options);
  }
}

/** The peer broke the framing or envelope rules (undecodable response, wrong message type). */
export class TtrpcProtocolError extends TtrpcError {
  override readonly name: string = 'TtrpcProtocolError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(Code.INTERNAL, message, options);
  }
}

/** `.proto` text could not be parsed or references types that do not exist. */
export class ProtoSchemaError extends Error {
  override readonly name: string = 'ProtoSchemaError';
}

/** Bytes are not a valid encoding of the named protobuf message. */
export class ProtoDecodeError extends Error {
  override readonly name: string = 'ProtoDecodeError';
  readonly typeName: string;
  constructor(typeName: string, message: string, options?: { cause?: unknown }) {
    super(`${typeName}: ${message}`, options);
    this.typeName = typeName;
  }
}

/** A value does not fit the named protobuf message (wrong member type). */
export class ProtoEncodeError extends Error {
  override readonly name: string = 'ProtoEncodeError';
  readonly typeName: string;
  constructor(typeName: string, message: string, options?: { cause?: unknown }) {
    super(`${typeName}: ${message}`, options);
    this.typeName = typeName;
  }
}

/** The transport could not be opened (no such socket, refused, timed out). */
export class TtrpcConnectError extends TtrpcError {
  override readonly name: string = 'TtrpcConnectError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(Code.UNAVAILABLE, message, options);
  }
}
