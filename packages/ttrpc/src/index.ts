export {
  formatTtrpcAddress,
  InvalidTtrpcAddress,
  isUnixAddress,
  parseTtrpcAddress,
  type TcpAddress,
  type TtrpcAddress,
  type UnixAddress,
} from './address.js';
export { type CallOptions, type ConnectOptions, TtrpcClient, type TtrpcClientOptions } from './client.js';
export { Code, codeName, type StatusCode } from './codes.js';
export {
  ProtoDecodeError,
  ProtoEncodeError,
  ProtoSchemaError,
  type StatusDetail,
  TtrpcClosedError,
  TtrpcConnectError,
  TtrpcError,
  type TtrpcErrorCode,
  TtrpcLibraryError,
  TtrpcProtocolError,
} from './errors.js';
export {
  DEFAULT_MAX_MESSAGE_SIZE,
  encodeFrame,
  Flag,
  FrameDecoder,
  type FrameEvent,
  type FrameHeader,
  HEADER_LENGTH,
  MessageType,
} from './frame.js';
export { silentLogger, type TtrpcLogger } from './logger.js';
export { defineProto, type MessageCodec, messageCodec, type ProtoRoot } from './proto.js';
export {
  type CallContext,
  type CloseOptions,
  type ListenOptions,
  type Metadata,
  type ServiceMethods,
  statusFromError,
  TtrpcServer,
  type TtrpcServerOptions,
  type UnaryHandler,
  type UnixListenOptions,
} from './server.js';
export { clientMethod, serverMethod } from './typed.js';
