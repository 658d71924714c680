// TCB status of a TDX platform from its collateral, in the order Intel's quote verification
// library applies it:
//  1. the QE report matches the TD QE identity (MRSIGNER, ISVPRODID, MISCSELECT and ATTRIBUTES
//     under their masks), and the QE's ISVSVN picks a QE TCB level;
//  2. the TCB info is the one for the PCK's FMSPC and PCE id;
//  3. the TDX module in the quote matches `tdxModule` (MRSIGNER_SEAM, SEAM_ATTRIBUTES under the
//     mask) and, for module major versions above 0, the `TDX_<nn>` module identity, whose levels
//     rate the module's ISVSVN (TEE_TCB_SVN[0]);
//  4. the first TCB level whose SGX components and PCESVN the PCK certifies, and whose TDX
//     components TEE_TCB_SVN reaches (bytes 2..15 only when the module major version is set),
//     gives the platform status;
//  5. the statuses converge: an out-of-date QE or module makes an up-to-date platform OutOfDate,
//     a configuration-needing one OutOfDateConfigurationNeeded; Revoked anywhere is fatal;
//  6. a TDX 1.5 quote (v5 body type 3) also carries TEE_TCB_SVN2, the TCB the TD runs on after a
//     TD-preserving module update: steps 3-5 again with it give the current TCB, and a launch TCB
//     that is out of date while the current one is not becomes TDRelaunchAdvised
//     (TDRelaunchAdvisedConfigurationNeeded when either needs configuration). Other quotes' current
//     TCB is the launch TCB.
import { VerificationError } from '../errors.js';
import type { IsvTcbLevel, QeIdentity, TcbStatus, TdxTcbInfo, TdxTcbLevel } from './collateral.js';
import type { PckPlatform } from './pck.js';
import type { QeReport, TdReportBody } from './quote.js';

/** A TCB level's statuses, and the two an evaluation adds for a TD that should be relaunched. */
export type EvaluatedTcbStatus = TcbStatus | 'TDRelaunchAdvised' | 'TDRelaunchAdvisedConfigurationNeeded';

/** The TCB the TD runs on now (DCAP's supplemental data from minor version 5). */
export interface CurrentTcb {
  readonly status: TcbStatus;
  readonly advisoryIds: readonly string[];
  readonly tcbDate: string;
}

export interface TcbEvaluation {
  readonly status: EvaluatedTcbStatus;
  readonly advisoryIds: readonly string[];
  /** The matched platform level's tcbDate. */
  readonly tcbDate: string;
  readonly platformStatus: TcbStatus;
  readonly qeStatus: TcbStatus;
  readonly moduleStatus?: TcbStatus;
  readonly current: CurrentTcb;
}

function masked(value: Uint8Array, mask: Uint8Array): Buffer {
  const out = Buffer.alloc(Math.min(value.length, mask.length));
  for (let i = 0; i < out.length; i++) out[i] = value[i]! & mask[i]!;
  return out;
}

function qeMismatch(msg: string): VerificationError {
  return new VerificationError('QE_IDENTITY_MISMATCH', `QE report ${msg}`);
}

/** Step 1: the QE is Intel's TD QE; returns its TCB level. */
export function evaluateQe(qe: QeReport, identity: QeIdentity): IsvTcbLevel {
  if (!qe.mrSigner.equals(identity.mrSigner)) throw qeMismatch('MRSIGNER differs from the QE identity');
  if (qe.isvProdId !== identity.isvProdId) {
    throw qeMismatch(`ISVPRODID ${qe.isvProdId} differs from the QE identity's ${identity.isvProdId}`);
  }
  if (
    !masked(qe.miscSelect, identity.miscSelectMask).equals(
      masked(identity.miscSelect, identity.miscSelectMask),
    )
  ) {
    throw qeMismatch('MISCSELECT differs from the QE identity');
  }
  if (
    !masked(qe.attributes, identity.attributesMask).equals(
      masked(identity.attributes, identity.attributesMask),
    )
  ) {
    throw qeMismatch('ATTRIBUTES differ from the QE identity');
  }
  const level = identity.tcbLevels.find((l) => qe.isvSvn >= l.isvSvn);
  if (level === undefined) {
    throw new VerificationError(
      'TCB_NOT_SUPPORTED',
      `QE ISVSVN ${qe.isvSvn} is below every QE identity TCB level`,
    );
  }
  return level;
}

/** Step 3: the TDX module; returns the module identity's level when one applies. */
export function evaluateModule(
  body: TdReportBody,
  info: TdxTcbInfo,
  teeTcbSvn: Uint8Array = body.teeTcbSvn,
): IsvTcbLevel | undefined {
  const major = teeTcbSvn[1]!;
  let expect = info.tdxModule;
  let levels: readonly IsvTcbLevel[] | undefined;
  if (major > 0 && info.tdxModuleIdentities.length > 0) {
    const id = `TDX_${major.toString(16).toUpperCase().padStart(2, '0')}`;
    const identity = info.tdxModuleIdentities.find((m) => m.id.toUpperCase() === id);
    if (identity === undefined) {
      throw new VerificationError('TCB_NOT_SUPPORTED', `TCB info has no TDX module identity ${id}`);
    }
    expect = identity;
    levels = identity.tcbLevels;
  }
  if (!body.mrSignerSeam.equals(expect.mrSigner)) {
    throw new VerificationError('TCB_NOT_SUPPORTED', 'TDX module MRSIGNER_SEAM differs from the TCB info');
  }
  if (
    !masked(body.seamAttributes, expect.attributesMask).equals(
      masked(expect.attributes, expect.attributesMask),
    )
  ) {
    throw new VerificationError('TCB_NOT_SUPPORTED', 'TDX module SEAM_ATTRIBUTES differ from the TCB info');
  }
  if (levels === undefined) return undefined;
  const svn = teeTcbSvn[0]!;
  const level = levels.find((l) => svn >= l.isvSvn);
  if (level === undefined) {
    throw new VerificationError(
      'TCB_NOT_SUPPORTED',
      `TDX module ISVSVN ${svn} is below every module TCB level`,
    );
  }
  return level;
}

/** Step 4: the first TCB level the platform reaches. */
export function matchTcbLevel(
  pck: PckPlatform,
  body: TdReportBody,
  info: TdxTcbInfo,
  teeTcbSvn: Uint8Array = body.teeTcbSvn,
): TdxTcbLevel {
  const from = teeTcbSvn[1]! > 0 ? 2 : 0;
  for (const level of info.tcbLevels) {
    if (level.sgxComponents.some((svn, i) => (pck.tcbComponents[i] ?? 0) < svn)) continue;
    if (pck.pceSvn < level.pceSvn) continue;
    let ok = true;
    for (let i = from; i < 16; i++) if (teeTcbSvn[i]! < level.tdxComponents[i]!) ok = false;
    if (ok) return level;
  }
  throw new VerificationError('TCB_NOT_SUPPORTED', 'the platform TCB is below every level of the TCB info');
}

/** Step 5: Intel's convergence of a platform status with a QE or module status. */
export function converge(platform: TcbStatus, other: TcbStatus): TcbStatus {
  if (other === 'Revoked' || platform === 'Revoked') return 'Revoked';
  if (other === 'OutOfDate' || other === 'OutOfDateConfigurationNeeded') {
    if (platform === 'UpToDate' || platform === 'SWHardeningNeeded') return 'OutOfDate';
    if (platform === 'ConfigurationNeeded' || platform === 'ConfigurationAndSWHardeningNeeded') {
      return 'OutOfDateConfigurationNeeded';
    }
  }
  return platform;
}

function needsConfiguration(s: EvaluatedTcbStatus): boolean {
  return (
    s === 'ConfigurationNeeded' ||
    s === 'OutOfDateConfigurationNeeded' ||
    s === 'ConfigurationAndSWHardeningNeeded' ||
    s === 'TDRelaunchAdvisedConfigurationNeeded'
  );
}

/** Step 6: a launch TCB out of date under a current one that is not asks for a relaunch. */
export function relaunchStatus(launch: TcbStatus, current: TcbStatus): EvaluatedTcbStatus {
  if (launch !== 'OutOfDate' && launch !== 'OutOfDateConfigurationNeeded') return launch;
  if (
    current !== 'UpToDate' &&
    current !== 'SWHardeningNeeded' &&
    current !== 'ConfigurationNeeded' &&
    current !== 'ConfigurationAndSWHardeningNeeded'
  ) {
    return launch;
  }
  return needsConfiguration(launch) || needsConfiguration(current)
    ? 'TDRelaunchAdvisedConfigurationNeeded'
    : 'TDRelaunchAdvised';
}

/** Steps 3-5 for one TEE_TCB_SVN. */
function evaluateSvn(
  pck: PckPlatform,
  body: TdReportBody,
  qeLevel: IsvTcbLevel,
  info: TdxTcbInfo,
  svn: Uint8Array,
  which: string,
) {
  const moduleLevel = evaluateModule(body, info, svn);
  const level = matchTcbLevel(pck, body, info, svn);
  let status = converge(level.tcbStatus, qeLevel.tcbStatus);
  if (moduleLevel !== undefined) status = converge(status, moduleLevel.tcbStatus);
  const advisoryIds = [
    ...new Set([...level.advisoryIds, ...(moduleLevel?.advisoryIds ?? []), ...qeLevel.advisoryIds]),
  ];
  if (status === 'Revoked') {
    throw new VerificationError('TCB_REVOKED', `the platform, QE or TDX module ${which} TCB is revoked`);
  }
  return { status, advisoryIds, level, moduleLevel };
}

/** Steps 2-6, given the QE's level from step 1. */
export function evaluateTcb(
  pck: PckPlatform,
  body: TdReportBody,
  qeLevel: IsvTcbLevel,
  info: TdxTcbInfo,
): TcbEvaluation {
  if (!info.fmspc.equals(pck.fmspc)) {
    throw new VerificationError(
      'COLLATERAL_MISMATCH',
      `TCB info is for FMSPC ${info.fmspc.toString('hex')}, the PCK certifies ${pck.fmspc.toString('hex')}`,
    );
  }
  if (!info.pceId.equals(pck.pceId)) {
    throw new VerificationError('COLLATERAL_MISMATCH', 'TCB info PCE id differs from the PCK certificate');
  }
  const launch = evaluateSvn(pck, body, qeLevel, info, body.teeTcbSvn, 'launch');
  const now =
    body.teeTcbSvn2 === undefined
      ? launch
      : evaluateSvn(pck, body, qeLevel, info, body.teeTcbSvn2, 'current');
  return {
    status: relaunchStatus(launch.status, now.status),
    advisoryIds: launch.advisoryIds,
    tcbDate: launch.level.tcbDate,
    platformStatus: launch.level.tcbStatus,
    qeStatus: qeLevel.tcbStatus,
    ...(launch.moduleLevel !== undefined ? { moduleStatus: launch.moduleLevel.tcbStatus } : {}),
    current: { status: now.status, advisoryIds: now.advisoryIds, tcbDate: now.level.tcbDate },
  };
}
