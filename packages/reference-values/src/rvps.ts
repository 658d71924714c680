// The RVPS sample message (trustee `rvps`): `{"version":"0.1.0","type":"sample","payload":
// std-base64(JSON {name: [values]})}`, what `kbs-client config set-reference-value`-style admin calls
// and `rvps-tool register` send.
import type { ReferenceValues } from './values.js';

export const RVPS_MESSAGE_VERSION = '0.1.0';

export interface RvpsSampleMessage {
  readonly version: typeof RVPS_MESSAGE_VERSION;
  readonly type: 'sample';
  /** Standard base64 (with padding) of the JSON provenance. */
  readonly payload: string;
}

/** The provenance JSON, names sorted so the output is reproducible. */
export function sampleProvenance(values: ReferenceValues): string {
  const sorted: Record<string, readonly string[]> = {};
  for (const name of Object.keys(values).sort()) sorted[name] = values[name] ?? [];
  return JSON.stringify(sorted);
}

export function rvpsSampleMessage(values: ReferenceValues): RvpsSampleMessage {
  return {
    version: RVPS_MESSAGE_VERSION,
    type: 'sample',
    payload: Buffer.from(sampleProvenance(values), 'utf8').toString('base64'),
  };
}
