/**
 * Errors of the sandbox agent. Every one is a `TtrpcError` whose `code` is the gRPC status the caller
 * (kata's shim, or the policy gate in front of this agent) receives, so handlers just throw them.
 */
import { Code, TtrpcError } from '@broker/ttrpc';

export type SandboxAgentCode =
  | typeof Code.INVALID_ARGUMENT
  | typeof Code.NOT_FOUND
  | typeof Code.ALREADY_EXISTS
  | typeof Code.FAILED_PRECONDITION
  | typeof Code.UNIMPLEMENTED
  | typeof Code.INTERNAL
  | typeof Code.UNAVAILABLE
  /** What a handler's plain failure answered before it had a class: kept for those (programming errors). */
  | typeof Code.UNKNOWN;

export class SandboxAgentError extends TtrpcError {
  override readonly name: string = 'SandboxAgentError';
  declare readonly code: SandboxAgentCode;
  constructor(code: SandboxAgentCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

/** The RPC exists in kata's agent.proto but this agent does not implement it. */
export class UnimplementedRpc extends SandboxAgentError {
  override readonly name: string = 'UnimplementedRpc';
  constructor(readonly rpc: string) {
    super(Code.UNIMPLEMENTED, `${rpc} is not implemented by sandbox-agent`);
  }
}

/** A path, id or option in a request is not acceptable (escapes the agent's roots, bad id, …). */
export class InvalidRequest extends SandboxAgentError {
  override readonly name: string = 'InvalidRequest';
  constructor(message: string, options?: { cause?: unknown }) {
    super(Code.INVALID_ARGUMENT, message, options);
  }
}

/** A storage driver this agent does not handle. */
export class UnsupportedStorage extends SandboxAgentError {
  override readonly name: string = 'UnsupportedStorage';
  constructor(readonly driver: string) {
    super(Code.UNIMPLEMENTED, `storage driver ${JSON.stringify(driver)} is not supported by sandbox-agent`);
  }
}

/** No such container or process (kata answers INVALID_ARGUMENT for a container, NOT_FOUND for an exec). */
export class NotFound extends SandboxAgentError {
  override readonly name: string = 'NotFound';
  constructor(code: typeof Code.INVALID_ARGUMENT | typeof Code.NOT_FOUND, message: string) {
    super(code, message);
  }
}

/** The request is valid but the sandbox or container is not in a state that allows it. */
export class WrongState extends SandboxAgentError {
  override readonly name: string = 'WrongState';
  constructor(message: string) {
    super(Code.FAILED_PRECONDITION, message);
  }
}

/** runc, mount or the data hub failed. */
export class RuntimeFailed extends SandboxAgentError {
  override readonly name: string = 'RuntimeFailed';
  constructor(message: string, options?: { cause?: unknown }) {
    super(Code.INTERNAL, message, options);
  }
}
