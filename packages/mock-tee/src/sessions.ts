// HMAC authorization sessions, as far as the paravisor needs them to answer reads of the HCL report
// index itself (tpm2-tools authorizes with an HMAC session even for an empty password). The
// paravisor watches the traffic between guest and swtpm and keeps, for each unsalted HMAC session,
// its hash and the TPM's latest nonce. Such a session's key is empty when it is also unbound, and
// its HMACs then depend only on the nonces, the parameters and the entity's authValue.
//
// TPM 2.0 Library Part 1, "Session-based authorizations": cpHash = H(commandCode ‖ names ‖
// parameters), rpHash = H(responseCode ‖ commandCode ‖ parameters), and
// HMAC = HMAC(sessionKey ‖ authValue, pHash ‖ nonceNewer ‖ nonceOlder ‖ sessionAttributes).
import { createHash, createHmac } from 'node:crypto';
import {
  decodeCommand,
  hashSize,
  nodeHashName,
  parseResponse,
  TPM_ALG,
  TPM_CC,
  TPM_RH,
  TPMA_SESSION,
  TpmReader,
} from '@broker/tpm';
import { HANDLE_COUNTS } from './command-handles.js';

/** Commands whose responses carry a handle before the parameters. */
export const RESPONSE_HANDLE_COUNTS: ReadonlyMap<number, number> = new Map([
  [0x131, 1], // CreatePrimary
  [0x157, 1], // Load
  [0x15b, 1], // HMAC_Start
  [0x161, 1], // ContextLoad
  [0x167, 1], // LoadExternal
  [0x176, 1], // StartAuthSession
  [0x186, 1], // HashSequenceStart
  [0x191, 1], // CreateLoaded
]);

const TPM_SE_HMAC = 0x00;
const TPM_CC_START_AUTH_SESSION = 0x176;
const HMAC_SESSION_FIRST = 0x02000000;
const HMAC_SESSION_LAST = 0x02ffffff;
/** A TPM has a few session slots; more tracked than this means handles are being reused oddly. */
const MAX_TRACKED = 64;

export interface TrackedSession {
  readonly handle: number;
  readonly authHash: number;
  /** The TPM's nonce from its last response for this session. */
  readonly nonceTpm: Uint8Array;
}

function rcOf(response: Uint8Array): number {
  return response.length >= 10
    ? Buffer.from(response.buffer, response.byteOffset, response.length).readUInt32BE(6)
    : -1;
}

export class SessionTracker {
  readonly #sessions = new Map<number, TrackedSession>();

  /** The unsalted, unbound HMAC session with this handle, if one is open. */
  get(handle: number): TrackedSession | undefined {
    return this.#sessions.get(handle);
  }

  get size(): number {
    return this.#sessions.size;
  }

  /** Forget everything (the TPM was reset). */
  clear(): void {
    this.#sessions.clear();
  }

  /** Records a new TPM nonce for a session (after an exchange the paravisor made itself). */
  update(handle: number, nonceTpm: Uint8Array, continueSession: boolean): void {
    const s = this.#sessions.get(handle);
    if (s === undefined) return;
    if (continueSession) this.#sessions.set(handle, { ...s, nonceTpm: Uint8Array.from(nonceTpm) });
    else this.#sessions.delete(handle);
  }

  /** Learns from one command and swtpm's response to it. Malformed exchanges teach nothing. */
  observe(command: Uint8Array, response: Uint8Array): void {
    if (rcOf(response) !== 0) return;
    try {
      const code = Buffer.from(command.buffer, command.byteOffset, command.length).readUInt32BE(6);
      if (code === TPM_CC_START_AUTH_SESSION) this.#started(command, response);
      else if (code === TPM_CC.FlushContext) this.#flushed(command);
      else this.#used(code, command, response);
    } catch {
      // Not ours to judge: swtpm answered it.
    }
  }

  #started(command: Uint8Array, response: Uint8Array): void {
    const cmd = decodeCommand(command, 2);
    const [tpmKey, bind] = cmd.handles;
    const r = new TpmReader(cmd.parameters, 'TPM2_StartAuthSession parameters');
    r.tpm2b('nonceCaller', 64);
    r.tpm2b('encryptedSalt', 1024);
    const sessionType = r.u8('sessionType');
    const symAlg = r.u16('symmetric.algorithm');
    if (symAlg !== TPM_ALG.NULL) {
      r.u16('symmetric.keyBits');
      r.u16('symmetric.mode');
    }
    const authHash = r.u16('authHash');
    const resp = parseResponse(response, TPM_CC_START_AUTH_SESSION, {
      responseHandles: 1,
      sessionCount: cmd.sessions.length,
    });
    const handle = resp.handles[0]!;
    const nonceTpm = new TpmReader(resp.parameters, 'TPM2_StartAuthSession response').tpm2b('nonceTPM', 64);
    this.#sessions.delete(handle);
    // Only sessions whose key is empty: no salt (tpmKey NULL) and no bind entity.
    if (
      tpmKey !== TPM_RH.NULL ||
      bind !== TPM_RH.NULL ||
      sessionType !== TPM_SE_HMAC ||
      hashSize(authHash) === undefined ||
      handle < HMAC_SESSION_FIRST ||
      handle > HMAC_SESSION_LAST
    ) {
      return;
    }
    if (this.#sessions.size >= MAX_TRACKED) this.#sessions.delete(this.#sessions.keys().next().value!);
    this.#sessions.set(handle, { handle, authHash, nonceTpm: Uint8Array.from(nonceTpm) });
  }

  #flushed(command: Uint8Array): void {
    const cmd = decodeCommand(command, 0);
    const handle = new TpmReader(cmd.parameters, 'TPM2_FlushContext parameters').u32('flushHandle');
    this.#sessions.delete(handle);
  }

  #used(code: number, command: Uint8Array, response: Uint8Array): void {
    const count = HANDLE_COUNTS.get(code);
    if (count === undefined) return;
    const cmd = decodeCommand(command, count);
    if (cmd.sessions.length === 0 || !cmd.sessions.some((s) => this.#sessions.has(s.handle))) return;
    const resp = parseResponse(response, code, {
      responseHandles: RESPONSE_HANDLE_COUNTS.get(code) ?? 0,
      sessionCount: cmd.sessions.length,
    });
    cmd.sessions.forEach((s, i) => {
      const answered = resp.sessions[i];
      if (answered !== undefined) {
        this.update(s.handle, answered.nonce, (s.attributes & TPMA_SESSION.continueSession) !== 0);
      }
    });
  }
}

function digest(alg: number, ...parts: Uint8Array[]): Buffer {
  const h = createHash(nodeHashName(alg)!);
  for (const p of parts) h.update(p);
  return h.digest();
}

const u32 = (v: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(v >>> 0, 0);
  return b;
};

/** cpHash: H(commandCode ‖ name of each handle ‖ parameters). */
export function commandParameterHash(
  alg: number,
  code: number,
  names: readonly Uint8Array[],
  parameters: Uint8Array,
): Buffer {
  return digest(alg, u32(code), ...names, parameters);
}

/** rpHash of a successful response: H(TPM_RC_SUCCESS ‖ commandCode ‖ parameters). */
export function responseParameterHash(alg: number, code: number, parameters: Uint8Array): Buffer {
  return digest(alg, u32(0), u32(code), parameters);
}

/** A session HMAC: HMAC(key, pHash ‖ nonceNewer ‖ nonceOlder ‖ attributes). */
export function sessionHmac(
  alg: number,
  key: Uint8Array,
  pHash: Uint8Array,
  nonceNewer: Uint8Array,
  nonceOlder: Uint8Array,
  attributes: number,
): Buffer {
  return createHmac(nodeHashName(alg)!, key)
    .update(pHash)
    .update(nonceNewer)
    .update(nonceOlder)
    .update(Uint8Array.of(attributes))
    .digest();
}

/** The Name of a permanent handle (a hierarchy): the handle itself. */
export function permanentHandleName(handle: number): Buffer {
  return u32(handle);
}
