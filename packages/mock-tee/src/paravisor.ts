// The paravisor's part of the vTPM, between the guest and swtpm. Every guest command goes to swtpm,
// one at a time, except that:
//
// - commands naming the platform hierarchy are refused (TPM_RC_HIERARCHY), as after firmware
//   hands over to the OS: the platform is the paravisor's, and with it a guest could rewrite the
//   HCL report index or reset the vTPM's state;
// - NV_ReadPublic and NV_Read of the HCL report index (0x01400001) are answered from the report the
//   paravisor holds, because swtpm's index size limit (2048 bytes) is below the report's 2600. The
//   read's authorization is still decided by swtpm, on the same read of a one-byte stand-in index
//   with the same attributes: password sessions are passed through, and unsalted, unbound HMAC
//   sessions (tpm2-tools' default) are checked here and re-signed for the stand-in so that swtpm
//   checks them too and the session's nonces stay in step. Other session kinds get
//   TPM_RC_AUTH_UNAVAILABLE;
// - after a successful NV_Write to the user-data index (0x01400002) the paravisor reads the user data
//   back and issues a fresh HCL report before the guest sees the write's response, so the guest's
//   next read returns a report over its data.
import { type KeyObject, timingSafeEqual } from 'node:crypto';
import {
  type AuthSession,
  type DecodedCommand,
  decodeCommand,
  marshalCommand,
  marshalNvRead,
  marshalNvReadPublicResponse,
  marshalNvReadResponse,
  marshalResponse,
  type NvPublic,
  nvName,
  parseNvReadParameters,
  parseResponse,
  type ResponseSession,
  TPM_CC,
  TPM_RH,
  TPMA_NV,
  TPMA_SESSION,
  Tpm,
  type TpmTransport,
} from '@broker/tpm';
import type { Logger } from 'pino';
import { HANDLE_COUNTS } from './command-handles.js';
import { MockTeeError } from './errors.js';
import {
  createHclReport,
  HCL_REPORT_NV_INDEX,
  HCL_REPORT_NV_SIZE,
  HCL_USER_DATA_NV_INDEX,
  USER_DATA_SIZE,
  type VmConfiguration,
} from './hcl.js';
import { hclReportStandIn } from './provision.js';
import type { HardwareRoots } from './roots.js';
import {
  commandParameterHash,
  permanentHandleName,
  responseParameterHash,
  SessionTracker,
  sessionHmac,
  type TrackedSession,
} from './sessions.js';
import { errorResponse } from './stream-server.js';

const HEADER_SIZE = 10;
const TPM_ST_SESSIONS = 0x8002;
const TPM_RH_PLATFORM_NV = 0x4000000d;
/** TPM_RC_HIERARCHY for handle N is this plus N << 8. */
const TPM_RC_HIERARCHY = 0x085;
const TPM_RC_COMMAND_CODE = 0x143;
const TPM_RC_COMMAND_SIZE = 0x142;
const TPM_RC_AUTH_CONTEXT = 0x145;
const TPM_RC_AUTH_UNAVAILABLE = 0x12f;
const TPM_RC_NV_RANGE = 0x146;
const TPM_RC_NV_AUTHORIZATION = 0x149;
const TPM_RC_NV_UNINITIALIZED = 0x14a;
/** TPM_RC_AUTH_FAIL blamed on session 1. */
const TPM_RC_AUTH_FAIL_S1 = 0x08e | 0x800 | 0x100;
/** TPM_RC_VALUE on parameter 1 (NV_Read's size). */
const TPM_RC_VALUE_P1 = 0x084 | 0x040 | 0x100;
/** swtpm's TPM_PT_NV_BUFFER_MAX: the largest NV_Read a guest may ask for. */
export const NV_BUFFER_MAX = 1024;

/** What the paravisor puts in each report besides the user data. */
export interface ParavisorIdentity {
  readonly roots: Pick<HardwareRoots, 'chipId' | 'tcb' | 'vcekPrivateKey'>;
  readonly akPublic: KeyObject;
  readonly ekPublic: KeyObject;
  readonly vmConfiguration: VmConfiguration;
  /** SNP launch measurement (48 bytes). */
  readonly measurement: Uint8Array;
  /** SNP REPORT_ID (32 bytes). */
  readonly reportId: Uint8Array;
}

/** Runs tasks one after another: swtpm takes one command at a time, on one connection. */
class Serializer {
  #tail: Promise<unknown> = Promise.resolve();

  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(task, task);
    this.#tail = result.catch(() => undefined);
    return result;
  }
}

function rcOf(response: Uint8Array): number | undefined {
  if (response.length < HEADER_SIZE) return undefined;
  return Buffer.from(response.buffer, response.byteOffset, response.length).readUInt32BE(6);
}

export interface ParavisorOptions {
  /** The one connection to swtpm; the paravisor owns it. */
  readonly upstream: TpmTransport;
  readonly logger: Logger;
  /** Called with each new report (e.g. to keep a copy in the state folder). */
  readonly onReport?: (report: Buffer) => void;
}

export class Paravisor {
  readonly #upstream: TpmTransport;
  readonly #tpm: Tpm;
  readonly #lock = new Serializer();
  readonly #log: Logger;
  readonly #onReport: ((report: Buffer) => void) | undefined;
  readonly #virtualPublic: NvPublic;
  readonly #virtualName: Uint8Array;
  readonly #sessions = new SessionTracker();
  #standInName: Uint8Array | undefined;
  #identity: ParavisorIdentity | undefined;
  #report: Buffer | undefined;
  #reports = 0;

  constructor(options: ParavisorOptions) {
    this.#upstream = options.upstream;
    this.#tpm = new Tpm(options.upstream);
    this.#log = options.logger;
    this.#onReport = options.onReport;
    this.#virtualPublic = {
      ...hclReportStandIn(),
      attributes: hclReportStandIn().attributes | TPMA_NV.WRITTEN,
      dataSize: HCL_REPORT_NV_SIZE,
    };
    this.#virtualName = nvName(this.#virtualPublic);
  }

  /** The HCL report guests currently read (undefined before the first one). */
  get report(): Buffer | undefined {
    return this.#report;
  }

  /** How many reports were issued since start. */
  get reportCount(): number {
    return this.#reports;
  }

  setIdentity(identity: ParavisorIdentity): void {
    this.#identity = identity;
  }

  /**
   * After a vTPM reset and provisioning (inside `exclusive`): sessions are gone, and the stand-in
   * index's Name is read back for the HMAC sessions that read the report.
   */
  async afterReset(tpm: Tpm): Promise<void> {
    this.#sessions.clear();
    this.#standInName = (await tpm.nvReadPublic(HCL_REPORT_NV_INDEX)).name;
  }

  /** Exclusive use of swtpm between guest commands (provisioning, boot, reports). */
  exclusive<T>(task: (tpm: Tpm) => Promise<T>): Promise<T> {
    return this.#lock.run(() => task(this.#tpm));
  }

  /** Issues a report over the current user data; call inside `exclusive`. */
  async issueReport(tpm: Tpm): Promise<Buffer> {
    const identity = this.#identity;
    if (identity === undefined)
      throw new MockTeeError('PROVISIONING_FAILED', 'no paravisor identity before the first report');
    const userData = await readUserData(tpm);
    const { report } = createHclReport({ ...identity, userData });
    this.#report = report;
    this.#reports++;
    this.#onReport?.(report);
    return report;
  }

  /** One guest command in, its response out. Never throws for bad input; upstream failures do throw. */
  async handle(command: Buffer): Promise<Uint8Array> {
    if (command.length < HEADER_SIZE || command.readUInt32BE(2) !== command.length) {
      return errorResponse(TPM_RC_COMMAND_SIZE);
    }
    const code = command.readUInt32BE(6);
    const count = HANDLE_COUNTS.get(code);
    if (count === undefined) return errorResponse(TPM_RC_COMMAND_CODE);
    const handles: number[] = [];
    for (let i = 0; i < count && HEADER_SIZE + 4 * (i + 1) <= command.length; i++) {
      handles.push(command.readUInt32BE(HEADER_SIZE + 4 * i));
    }
    const platformAt = handles.findIndex((h) => h === TPM_RH.PLATFORM || h === TPM_RH_PLATFORM_NV);
    if (platformAt >= 0) {
      this.#log.info({ code }, 'guest command naming the platform hierarchy refused');
      return errorResponse(TPM_RC_HIERARCHY + ((platformAt + 1) << 8));
    }
    if (code === TPM_CC.NV_ReadPublic && handles[0] === HCL_REPORT_NV_INDEX) {
      return this.#readPublicReport(command);
    }
    if (code === TPM_CC.NV_Read && handles[1] === HCL_REPORT_NV_INDEX) {
      return this.#lock.run(() => this.#readReport(command));
    }
    return this.#lock.run(async () => {
      const response = await this.#forward(command);
      if (code === TPM_CC.NV_Write && handles[1] === HCL_USER_DATA_NV_INDEX && rcOf(response) === 0) {
        try {
          await this.issueReport(this.#tpm);
        } catch (err) {
          // The write itself succeeded; the guest will read the previous report.
          this.#log.error(
            { err: (err as Error).message },
            'HCL report not refreshed after a user-data write',
          );
        }
      }
      return response;
    });
  }

  #readPublicReport(command: Buffer): Uint8Array {
    // Audit and encryption sessions would need the session keys; guests send none here.
    if (command.readUInt16BE(0) === TPM_ST_SESSIONS) return errorResponse(TPM_RC_AUTH_CONTEXT);
    if (command.length !== HEADER_SIZE + 4) return errorResponse(0x095 | 0x040 | 0x100); // TPM_RC_SIZE
    return marshalResponse({
      parameters: marshalNvReadPublicResponse(this.#virtualPublic, this.#virtualName),
    });
  }

  async #readReport(command: Buffer): Promise<Uint8Array> {
    let decoded: DecodedCommand;
    let size: number;
    let offset: number;
    try {
      decoded = decodeCommand(command, 2);
      ({ size, offset } = parseNvReadParameters(decoded.parameters));
    } catch {
      // Malformed: swtpm answers it as any TPM would, against the stand-in.
      return this.#forward(command);
    }
    const { sessions } = decoded;
    if (sessions.length === 0) return this.#forward(command);
    if (size > NV_BUFFER_MAX) return errorResponse(TPM_RC_VALUE_P1);
    if (offset + size > HCL_REPORT_NV_SIZE) return errorResponse(TPM_RC_NV_RANGE);
    const report = this.#report;
    if (report === undefined) return errorResponse(TPM_RC_NV_UNINITIALIZED);
    const data = report.subarray(offset, offset + size);
    if (sessions.every((s) => s.handle === TPM_RH.PW)) return this.#readWithPasswords(decoded, data);
    const session = sessions.length === 1 ? sessions[0] : undefined;
    const tracked = session !== undefined ? this.#sessions.get(session.handle) : undefined;
    // Parameter encryption and audit would need more than the nonces; policy sessions a policy engine.
    if (
      session === undefined ||
      tracked === undefined ||
      (session.attributes & ~TPMA_SESSION.continueSession) !== 0
    ) {
      return errorResponse(TPM_RC_AUTH_UNAVAILABLE);
    }
    return this.#readWithHmacSession(decoded, session, tracked, data);
  }

  /** Passwords: swtpm checks them on the same read of the stand-in; the data is the report's. */
  async #readWithPasswords(decoded: DecodedCommand, data: Uint8Array): Promise<Uint8Array> {
    const probe = marshalCommand({
      code: TPM_CC.NV_Read,
      handles: decoded.handles,
      sessions: decoded.sessions,
      parameters: marshalNvRead(1, 0),
    });
    const answer = await this.#upstream.send(probe);
    if (rcOf(answer) !== 0) return answer;
    const { sessions } = parseResponse(answer, TPM_CC.NV_Read, { sessionCount: decoded.sessions.length });
    return marshalResponse({ parameters: marshalNvReadResponse(data), sessions });
  }

  /**
   * An unsalted, unbound HMAC session (tpm2-tools' default): its key is the entity's authValue, empty
   * for the owner and for this index. The guest's HMAC is checked over the index as guests see it;
   * swtpm then runs the same read of the stand-in in the same session (HMAC recomputed), so the
   * session's nonces stay in step with swtpm, and the response is signed over the report's bytes.
   */
  async #readWithHmacSession(
    decoded: DecodedCommand,
    session: AuthSession,
    tracked: TrackedSession,
    data: Uint8Array,
  ): Promise<Uint8Array> {
    const [authHandle] = decoded.handles as [number, number];
    const standIn = this.#standInName;
    if (standIn === undefined) return errorResponse(TPM_RC_AUTH_UNAVAILABLE);
    let guestAuthName: Uint8Array;
    let probeAuthName: Uint8Array;
    if (authHandle === HCL_REPORT_NV_INDEX) {
      guestAuthName = this.#virtualName;
      probeAuthName = standIn;
    } else if (authHandle === TPM_RH.OWNER) {
      guestAuthName = probeAuthName = permanentHandleName(authHandle);
    } else {
      return errorResponse(TPM_RC_NV_AUTHORIZATION);
    }
    const alg = tracked.authHash;
    const noKey = new Uint8Array();
    const guestCp = commandParameterHash(
      alg,
      TPM_CC.NV_Read,
      [guestAuthName, this.#virtualName],
      decoded.parameters,
    );
    const want = sessionHmac(alg, noKey, guestCp, session.nonce, tracked.nonceTpm, session.attributes);
    if (want.length !== session.hmac.length || !timingSafeEqual(want, session.hmac)) {
      return errorResponse(TPM_RC_AUTH_FAIL_S1);
    }
    const probeParameters = marshalNvRead(1, 0);
    const probeCp = commandParameterHash(alg, TPM_CC.NV_Read, [probeAuthName, standIn], probeParameters);
    const probe = marshalCommand({
      code: TPM_CC.NV_Read,
      handles: decoded.handles,
      sessions: [
        {
          ...session,
          hmac: sessionHmac(alg, noKey, probeCp, session.nonce, tracked.nonceTpm, session.attributes),
        },
      ],
      parameters: probeParameters,
    });
    const answer = await this.#forward(probe);
    if (rcOf(answer) !== 0) return answer;
    const [answered] = parseResponse(answer, TPM_CC.NV_Read, { sessionCount: 1 }).sessions as [
      ResponseSession,
    ];
    const parameters = marshalNvReadResponse(data);
    const rpHash = responseParameterHash(alg, TPM_CC.NV_Read, parameters);
    return marshalResponse({
      parameters,
      sessions: [
        {
          nonce: answered.nonce,
          attributes: answered.attributes,
          hmac: sessionHmac(alg, noKey, rpHash, answered.nonce, session.nonce, answered.attributes),
        },
      ],
    });
  }

  /** Sends a command to swtpm, keeping track of the sessions it uses. */
  async #forward(command: Uint8Array): Promise<Uint8Array> {
    const response = await this.#upstream.send(command);
    this.#sessions.observe(command, response);
    return response;
  }
}

/**
 * The user data as the paravisor reads it: up to 64 bytes of index 0x01400002, with owner
 * authorization, else the index's own (empty) authorization.
 */
async function readUserData(tpm: Tpm): Promise<Uint8Array> {
  const { nvPublic } = await tpm.nvReadPublic(HCL_USER_DATA_NV_INDEX);
  const size = Math.min(nvPublic.dataSize, USER_DATA_SIZE);
  if (size === 0) return new Uint8Array();
  try {
    return await tpm.nvRead(TPM_RH.OWNER, HCL_USER_DATA_NV_INDEX, size, 0);
  } catch {
    return tpm.nvRead(HCL_USER_DATA_NV_INDEX, HCL_USER_DATA_NV_INDEX, size, 0);
  }
}
