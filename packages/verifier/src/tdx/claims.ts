// trustee's TDX claims (deps/verifier/src/tdx/claims.rs): the quote header and body fields as
// lower-case hex, the TD attribute flags, report_data and init_data (= MR_CONFIG_ID) in hex, the
// PCK's platform instance id, and the event log entries when one was sent.
import type { EventLogEntry } from './ccel.js';
import type { PckPlatform } from './pck.js';
import type { TdxQuote } from './quote.js';

export interface TdAttributeClaims {
  readonly debug: boolean;
  readonly septve_disable: boolean;
  readonly protection_keys: boolean;
  readonly key_locker: boolean;
  readonly perfmon: boolean;
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** The named TD attribute bits (TDX module ABI): bit 0 DEBUG, 28, 30, 31, 63. */
export function tdAttributes(attrs: Uint8Array): TdAttributeClaims {
  const v = Buffer.from(attrs).readBigUInt64LE(0);
  const bit = (n: bigint) => (v & (1n << n)) !== 0n;
  return {
    debug: bit(0n),
    septve_disable: bit(28n),
    protection_keys: bit(30n),
    key_locker: bit(31n),
    perfmon: bit(63n),
  };
}

/** The `quote` claim: `header`, `body` (and `type`, `size` for v5). */
export function quoteClaims(quote: TdxQuote): Record<string, unknown> {
  const h = quote.header;
  const version = Buffer.alloc(2);
  version.writeUInt16LE(quote.version);
  const att = Buffer.alloc(2);
  att.writeUInt16LE(h.attKeyType);
  const tee = Buffer.alloc(4);
  tee.writeUInt32LE(h.teeType);
  const b = quote.body;
  const body: Record<string, string> = {
    tcb_svn: hex(b.teeTcbSvn),
    mr_seam: hex(b.mrSeam),
    mrsigner_seam: hex(b.mrSignerSeam),
    seam_attributes: hex(b.seamAttributes),
    td_attributes: hex(b.tdAttributes),
    xfam: hex(b.xfam),
    mr_td: hex(b.mrTd),
    mr_config_id: hex(b.mrConfigId),
    mr_owner: hex(b.mrOwner),
    mr_owner_config: hex(b.mrOwnerConfig),
    rtmr_0: hex(b.rtmrs[0]),
    rtmr_1: hex(b.rtmrs[1]),
    rtmr_2: hex(b.rtmrs[2]),
    rtmr_3: hex(b.rtmrs[3]),
    report_data: hex(b.reportData),
    ...(b.teeTcbSvn2 !== undefined ? { tee_tcb_svn2: hex(b.teeTcbSvn2) } : {}),
    ...(b.mrServiceTd !== undefined ? { mr_servicetd: hex(b.mrServiceTd) } : {}),
  };
  const out: Record<string, unknown> = {
    header: {
      version: hex(version),
      att_key_type: hex(att),
      tee_type: hex(tee),
      reserved: hex(h.reserved),
      vendor_id: hex(h.vendorId),
      user_data: hex(h.userData),
    },
    body,
  };
  if (quote.v5Type !== undefined && quote.v5Size !== undefined) {
    const t = Buffer.alloc(2);
    t.writeUInt16LE(quote.v5Type);
    out.type = hex(t);
    out.size = hex(quote.v5Size);
  }
  return out;
}

/** The claims of one TD (without the collateral claims). */
export function tdxClaims(
  quote: TdxQuote,
  platform: PckPlatform,
  eventLog: readonly EventLogEntry[] | undefined,
): Record<string, unknown> {
  return {
    ...(eventLog !== undefined ? { uefi_event_logs: eventLog } : {}),
    quote: quoteClaims(quote),
    td_attributes: tdAttributes(quote.body.tdAttributes),
    report_data: hex(quote.body.reportData),
    init_data: hex(quote.body.mrConfigId),
    ...(platform.platformInstanceId !== undefined
      ? { platform_instance_id: hex(platform.platformInstanceId) }
      : {}),
  };
}
