/**
 * Error classes of the ttrpc package. A failed call always rejects with a
 * `TtrpcError` (or subclass) so callers switch on `code` without parsing text;
 * `message` is the peer's status message verbatim because upstream clients
 * and tests match on it. Every error of the package is a `TtrpcLibraryError`:
 * a call's status keeps its numeric gRPC code (callers compare it with `Code`),
 * the failures that are no call's status carry a string code.
 */
import { Code, codeName } from './codes.js';

export type TtrpcErrorCode =
  /** A call's gRPC status, the peer's or one produced locally (`TtrpcError` and its subclasses). */
  | number
  /** An endpoint address that is not `unix://…` or `tcp://host:port` (`InvalidTtrpcAddress`). */
  | 'ADDRESS_INVALID'
  /** `.proto` text that does not parse or names types that do not exist (`ProtoSchemaError`). */
  | 'PROTO_SCHEMA_INVALID'
  /** Bytes that are not a valid encoding of a message (`ProtoDecodeError`). */
  | 'PROTO_DECODE_FAILED'
  /** A value that does not fit a message (`ProtoEncodeError`). */
  | 'PROTO_ENCODE_FAILED'
  /** A service registered twice on one server. */
  | 'SERVICE_DUPLICATE'
  /** The server is closing or closed and takes no new listener. */
  | 'SERVER_CLOSED'
  /** The socket path is taken by a file that is not a socket. */
  | 'SOCKET_PATH_TAKEN';

/** Base class of the ttrpc package's errors; callers branch on `code` or on the class. */
export class TtrpcLibraryError extends Error {
  override readonly name: string = 'TtrpcLibraryError';
  readonly code: TtrpcErrorCode;
  constructor(code: TtrpcErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** A `google.protobuf.Any` from `google.rpc.Status.details`, kept as raw bytes. */
export interface StatusDetail {
  readonly type_url: string;
  readonly value: Uint8Array;
}

/** A non-OK ttrpc status, either received from the peer or produced locally (deadline, size cap). */
export class TtrpcError extends TtrpcLibraryError {
  override readonly name: string = 'TtrpcError';
  declare readonly code: number;
  readonly details: readonly StatusDetail[];
  constructor(
    code: number,
    message: string,
    options?: { details?: readonly StatusDetail[]; cause?: unknown },
  ) {
    super(code, message, options?.cause === undefined ? undefined : { cause: options.cause });
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
export class ProtoSchemaError extends TtrpcLibraryError {
  override readonly name: string = 'ProtoSchemaError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('PROTO_SCHEMA_INVALID', message, options);
  }
}

/** Bytes are not a valid encoding of the named protobuf message. */
export class ProtoDecodeError extends TtrpcLibraryError {
  override readonly name: string = 'ProtoDecodeError';
  readonly typeName: string;
  constructor(typeName: string, message: string, options?: { cause?: unknown }) {
    super('PROTO_DECODE_FAILED', `${typeName}: ${message}`, options);
    this.typeName = typeName;
  }
}

/** A value does not fit the named protobuf message (wrong member type). */
export class ProtoEncodeError extends TtrpcLibraryError {
  override readonly name: string = 'ProtoEncodeError';
  readonly typeName: string;
  constructor(typeName: string, message: string, options?: { cause?: unknown }) {
    super('PROTO_ENCODE_FAILED', `${typeName}: ${message}`, options);
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
