/**
 * The policy input of each request, as the kata agent builds it (`src/agent/src/rpc.rs`):
 * the serde JSON of the decoded request, except CopyFile, which is first reduced to a
 * `PolicyCopyFileRequest` (no `data`, the file type spelled out, a symlink's target as text).
 */

import type { AgentProtoProfile } from './agent-proto.js';
import { AgentPolicyError, type AgentPolicyErrorCode } from './errors.js';
import { decodeRequest, toPolicyJson, type WireValue } from './wire.js';

const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;
const S_IFLNK = 0o120000;

export type FileType = 'Unknown' | 'Regular' | 'Directory' | 'Symlink';

/** kata's `FileType::from(file_mode)`: the S_IFMT bits, anything else `Unknown`. */
export function fileTypeOf(mode: number): FileType {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return 'Regular';
    case S_IFDIR:
      return 'Directory';
    case S_IFLNK:
      return 'Symlink';
    default:
      return 'Unknown';
  }
}

export interface PolicyCopyFileRequest {
  path: string;
  file_type: FileType;
  symlink_target: string | null;
  file_size: number | bigint;
  file_mode: number;
  dir_mode: number;
  uid: number;
  gid: number;
  offset: number | bigint;
}

/**
 * A CopyFile request could not be reduced (a symlink target that is not UTF-8). The agent answers
 * INTERNAL with anyhow's `{:?}` of its context chain, which is this message.
 */
export class CopyFileInputError extends AgentPolicyError {
  override readonly code: AgentPolicyErrorCode = 'COPY_FILE_INPUT_INVALID';
  override readonly name: string = 'CopyFileInputError';
  constructor() {
    super('parsing CopyFileRequest for policy\n\nCaused by:\n    invalid symlink content');
  }
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Reduces a decoded `CopyFileRequest` to kata's `PolicyCopyFileRequest`. */
export function copyFilePolicyInput(req: { [key: string]: WireValue }): PolicyCopyFileRequest {
  const mode = req.file_mode as number;
  const fileType = fileTypeOf(mode);
  let symlinkTarget: string | null = null;
  if (fileType === 'Symlink') {
    try {
      symlinkTarget = strictUtf8.decode(req.data as Uint8Array);
    } catch {
      throw new CopyFileInputError();
    }
  }
  return {
    path: req.path as string,
    file_type: fileType,
    symlink_target: symlinkTarget,
    file_size: req.file_size as number | bigint,
    file_mode: mode,
    dir_mode: req.dir_mode as number,
    uid: req.uid as number,
    gid: req.gid as number,
    offset: req.offset as number | bigint,
  };
}

/**
 * The policy input for already-decoded request fields. Under the `3.3` profile CopyFile is not reduced:
 * agents before 3.29 gave the policy the whole request, `data` included.
 */
export function policyInputOf(
  requestType: string,
  decoded: { [key: string]: WireValue },
  profile: AgentProtoProfile = 'current',
): unknown {
  if (requestType === 'CopyFileRequest' && profile === 'current') return copyFilePolicyInput(decoded);
  return toPolicyJson(decoded);
}

/**
 * Decodes request bytes and builds the policy input. Throws `RequestDecodeError` for bytes that are not
 * an acceptable encoding and `CopyFileInputError` for an unreadable symlink target.
 */
export function policyInputFromBytes(
  requestType: string,
  bytes: Uint8Array,
  profile: AgentProtoProfile = 'current',
): unknown {
  return policyInputOf(requestType, decodeRequest(requestType, bytes, profile), profile);
}
