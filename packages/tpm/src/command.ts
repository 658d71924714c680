import { COMMAND_HANDLES, commandName, MAX_DIGEST_SIZE, TPM_RH, TPM_ST, TPMA_SESSION } from './constants.js';
import { TpmError, TpmParseError, TpmUsageError } from './errors.js';
import { TpmReader, TpmWriter } from './marshal.js';

/** TPM commands and responses fit in a few KiB; nothing bigger is accepted. */
export const MAX_COMMAND_SIZE = 64 * 1024;
export const HEADER_SIZE = 10;
/** Most authorization sessions a command may carry. */
export const MAX_SESSIONS = 3;
/** TPM2B_NONCE / TPM2B_AUTH capacity. */
export const MAX_AUTH_SIZE = MAX_DIGEST_SIZE;

/** One authorization in a command (TPMS_AUTH_COMMAND) or a response (TPMS_AUTH_RESPONSE, handle unset). */
export interface AuthSession {
  readonly handle: number;
  readonly nonce: Uint8Array;
  readonly attributes: number;
  readonly hmac: Uint8Array;
}

export interface ResponseSession {
  readonly nonce: Uint8Array;
  readonly attributes: number;
  readonly hmac: Uint8Array;
}

/**
 * A password authorization (TPM_RS_PW): the authValue in clear, which is
 * what these commands need for objects and hierarchies whose auth is
 * empty or known. The session is not kept (no continueSession bit needed,
 * but the TPM echoes it, so it is set as TSS stacks do).
 */
export function passwordSession(auth: Uint8Array = new Uint8Array()): AuthSession {
  if (auth.length > MAX_AUTH_SIZE) throw new TpmUsageError(`password longer than ${MAX_AUTH_SIZE} bytes`);
  return { handle: TPM_RH.PW, nonce: new Uint8Array(), attributes: TPMA_SESSION.continueSession, hmac: auth };
}

export interface CommandParts {
  readonly code: number;
  readonly handles?: readonly number[];
  readonly sessions?: readonly AuthSession[];
  readonly parameters?: Uint8Array;
}

/** Frames a command: header, handles, authorization area (when sessions are given), parameters. */
export function marshalCommand(parts: CommandParts): Uint8Array {
  const sessions = parts.sessions ?? [];
  if (sessions.length > MAX_SESSIONS) throw new TpmUsageError(`at most ${MAX_SESSIONS} sessions`);
  const w = new TpmWriter();
  w.u16(sessions.length > 0 ? TPM_ST.SESSIONS : TPM_ST.NO_SESSIONS)
    .u32(0)
    .u32(parts.code);
  for (const h of parts.handles ?? []) w.u32(h >>> 0);
  if (sessions.length > 0) {
    const auth = new TpmWriter();
    for (const s of sessions) {
      auth.u32(s.handle >>> 0);
      auth.tpm2b(s.nonce, MAX_AUTH_SIZE, 'session nonce');
      auth.u8(s.attributes);
      auth.tpm2b(s.hmac, MAX_AUTH_SIZE, 'session hmac');
    }
    w.u32(auth.length).bytes(auth.finish());
  }
  if (parts.parameters) w.bytes(parts.parameters);
  if (w.length > MAX_COMMAND_SIZE) throw new TpmUsageError(`command of ${w.length} bytes is too large`);
  w.patchU32(2, w.length);
  return w.finish();
}

export interface ParsedResponse {
  readonly handles: readonly number[];
  readonly parameters: Uint8Array;
  readonly sessions: readonly ResponseSession[];
}

/** Reads the header of a response or command: tag, size (checked against the buffer) and code. */
export function readHeader(
  bytes: Uint8Array,
  what: string,
): { readonly tag: number; readonly size: number; readonly code: number } {
  const r = new TpmReader(bytes, what);
  const tag = r.u16(`${what} tag`);
  const size = r.u32(`${what} size`);
  const code = r.u32(`${what} code`);
  if (size !== bytes.length) r.fail(`header size ${size} does not match the ${bytes.length} bytes received`);
  return { tag, size, code };
}

function readSessions(r: TpmReader, count: number): ResponseSession[] {
  const out: ResponseSession[] = [];
  for (let i = 0; i < count; i++) {
    const nonce = r.tpm2b(`TPMS_AUTH_RESPONSE[${i}].nonce`, MAX_AUTH_SIZE);
    const attributes = r.u8(`TPMS_AUTH_RESPONSE[${i}].sessionAttributes`);
    const hmac = r.tpm2b(`TPMS_AUTH_RESPONSE[${i}].hmac`, MAX_AUTH_SIZE);
    out.push({ nonce, attributes, hmac });
  }
  return out;
}

/**
 * Splits a response to command `code` that was sent with `sessionCount`
 * sessions. A non-zero response code throws `TpmError`; every size is
 * checked, and the session area must hold exactly one entry per session.
 */
export function parseResponse(
  bytes: Uint8Array,
  code: number,
  options: { readonly responseHandles?: number; readonly sessionCount?: number } = {},
): ParsedResponse {
  const what = `${commandName(code)} response`;
  const { tag, code: rc } = readHeader(bytes, what);
  if (rc !== 0) {
    if (bytes.length !== HEADER_SIZE) {
      throw new TpmParseError(
        what,
        HEADER_SIZE,
        `error response carries ${bytes.length - HEADER_SIZE} extra byte(s)`,
      );
    }
    throw new TpmError(rc, code);
  }
  const sessionCount = options.sessionCount ?? 0;
  const expectedTag = sessionCount > 0 ? TPM_ST.SESSIONS : TPM_ST.NO_SESSIONS;
  const r = new TpmReader(bytes.subarray(HEADER_SIZE), what, HEADER_SIZE);
  if (tag !== expectedTag) {
    r.fail(`tag 0x${tag.toString(16)} where 0x${expectedTag.toString(16)} was expected`);
  }
  const handles: number[] = [];
  for (let i = 0; i < (options.responseHandles ?? 0); i++) handles.push(r.u32(`handle ${i}`));
  if (sessionCount === 0) {
    const parameters = r.bytes(r.remaining, 'parameters');
    return { handles, parameters, sessions: [] };
  }
  const parameterSize = r.u32('parameterSize');
  if (parameterSize > r.remaining)
    r.fail(`parameterSize ${parameterSize} exceeds the ${r.remaining} bytes left`);
  const parameters = r.bytes(parameterSize, 'parameters');
  const sessions = readSessions(r, sessionCount);
  r.end(what);
  return { handles, parameters, sessions };
}

/** A command taken apart, as an interposer sees it. */
export interface DecodedCommand {
  readonly tag: number;
  readonly code: number;
  readonly handles: readonly number[];
  readonly sessions: readonly AuthSession[];
  readonly parameters: Uint8Array;
}

/**
 * Splits a command into handles, sessions and parameters. The handle count
 * comes from `COMMAND_HANDLES`, or from `handleCount` for commands this
 * package does not know; an unknown command without it is an error.
 */
export function decodeCommand(bytes: Uint8Array, handleCount?: number): DecodedCommand {
  if (bytes.length > MAX_COMMAND_SIZE) {
    throw new TpmParseError('command', 0, `${bytes.length} bytes exceed the limit of ${MAX_COMMAND_SIZE}`);
  }
  const { tag, code } = readHeader(bytes, 'command');
  const r: TpmReader = new TpmReader(bytes.subarray(HEADER_SIZE), 'command', HEADER_SIZE);
  const count = handleCount ?? COMMAND_HANDLES.get(code)?.handles;
  if (count === undefined) r.fail(`unknown command code 0x${code.toString(16)}: handle count not given`);
  const handles: number[] = [];
  for (let i = 0; i < count; i++) handles.push(r.u32(`handle ${i}`));
  const sessions: AuthSession[] = [];
  if (tag === TPM_ST.SESSIONS) {
    const authSize = r.u32('authorizationSize');
    if (authSize > r.remaining) r.fail(`authorizationSize ${authSize} exceeds the ${r.remaining} bytes left`);
    const a = new TpmReader(r.bytes(authSize, 'authorization area'), 'command', r.offset - authSize);
    while (a.remaining > 0) {
      if (sessions.length === MAX_SESSIONS) a.fail(`more than ${MAX_SESSIONS} sessions`);
      const handle = a.u32('session handle');
      const nonce = a.tpm2b('session nonce', MAX_AUTH_SIZE);
      const attributes = a.u8('session attributes');
      const hmac = a.tpm2b('session hmac', MAX_AUTH_SIZE);
      sessions.push({ handle, nonce, attributes, hmac });
    }
    if (sessions.length === 0) r.fail('TPM_ST_SESSIONS command without a session');
  } else if (tag !== TPM_ST.NO_SESSIONS) {
    r.fail(`tag 0x${tag.toString(16)} is neither TPM_ST_SESSIONS nor TPM_ST_NO_SESSIONS`);
  }
  return { tag, code, handles, sessions, parameters: r.bytes(r.remaining, 'parameters') };
}

/**
 * Frames a response. A non-zero `rc` gives the bare 10-byte error
 * response; otherwise handles, then (with sessions) parameterSize,
 * parameters and the session area.
 */
export function marshalResponse(parts: {
  readonly rc?: number;
  readonly handles?: readonly number[];
  readonly parameters?: Uint8Array;
  readonly sessions?: readonly ResponseSession[];
}): Uint8Array {
  const w = new TpmWriter();
  const rc = (parts.rc ?? 0) >>> 0;
  const sessions = parts.sessions ?? [];
  const withSessions = rc === 0 && sessions.length > 0;
  w.u16(withSessions ? TPM_ST.SESSIONS : TPM_ST.NO_SESSIONS)
    .u32(0)
    .u32(rc);
  if (rc === 0) {
    for (const h of parts.handles ?? []) w.u32(h >>> 0);
    const params = parts.parameters ?? new Uint8Array();
    if (withSessions) w.u32(params.length);
    w.bytes(params);
    for (const s of withSessions ? sessions : []) {
      w.tpm2b(s.nonce, MAX_AUTH_SIZE, 'session nonce');
      w.u8(s.attributes);
      w.tpm2b(s.hmac, MAX_AUTH_SIZE, 'session hmac');
    }
  }
  w.patchU32(2, w.length);
  return w.finish();
}

/** The response a password session gets back: empty nonce and hmac, the attributes echoed. */
export function passwordResponseSession(s: AuthSession): ResponseSession {
  return {
    nonce: new Uint8Array(),
    attributes: s.attributes & TPMA_SESSION.continueSession,
    hmac: new Uint8Array(),
  };
}
