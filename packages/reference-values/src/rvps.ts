// The RVPS sample message (trustee `rvps`): `{"version":"0.1.0","type":"sample","payload":
// std-base64(JSON {name: [values]})}`, what `kbs-client config set-reference-value`-style admin calls
// and `rvps-tool register` send; with this project's optional `provenance` member (what the values were
// made from: image tag, initdata digest), which our RVPS keeps with each value and the KBS console shows,
// and trustee's RVPS ignores (its message type has no such field and serde skips unknown members).
import type { ReferenceValues } from './values.js';

export const RVPS_MESSAGE_VERSION = '0.1.0';

export interface RvpsSampleMessage {
  readonly version: typeof RVPS_MESSAGE_VERSION;
  readonly type: 'sample';
  /** Standard base64 (with padding) of the JSON provenance. */
  readonly payload: string;
  /** What the values were made from (`image_tag`, `initdata_digest`, …). */
  readonly provenance?: Readonly<Record<string, string>>;
}

/** The RVPS refuses a message whose provenance has more members or longer values than these. */
export const MAX_PROVENANCE_MEMBERS = 16;
export const MAX_PROVENANCE_VALUE_LENGTH = 256;

/**
 * The provenance members that are given and fit what the RVPS accepts (a longer value, such as a very
 * long image reference, is left out rather than cut or refused); undefined when none is left.
 */
export function messageProvenance(
  members: Readonly<Record<string, string | undefined>>,
): Readonly<Record<string, string>> | undefined {
  const kept = Object.entries(members).filter(
    (e): e is [string, string] =>
      e[1] !== undefined && e[1].length > 0 && e[1].length <= MAX_PROVENANCE_VALUE_LENGTH,
  );
  return kept.length === 0 ? undefined : Object.fromEntries(kept.slice(0, MAX_PROVENANCE_MEMBERS));
}

/** The provenance JSON, names sorted so the output is reproducible. */
export function sampleProvenance(values: ReferenceValues): string {
  const sorted: Record<string, readonly string[]> = {};
  for (const name of Object.keys(values).sort()) sorted[name] = values[name] ?? [];
  return JSON.stringify(sorted);
}

export function rvpsSampleMessage(
  values: ReferenceValues,
  provenance?: Readonly<Record<string, string>>,
): RvpsSampleMessage {
  return {
    version: RVPS_MESSAGE_VERSION,
    type: 'sample',
    payload: Buffer.from(sampleProvenance(values), 'utf8').toString('base64'),
    ...(provenance !== undefined && Object.keys(provenance).length > 0 && { provenance }),
  };
}
