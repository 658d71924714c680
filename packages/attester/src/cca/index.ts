// guest-components' `cca` attester: the realm challenge (the report data, at most 64 bytes,
// zero-padded to 64) goes to configfs-tsm's `arm_cca_guest` provider, whose outblob is the CCA
// attestation token (the RMM's CBOR collection of a platform and a realm token). The evidence is
// `{"token": [byte, …]}`, the bytes as JSON numbers as serde writes a Vec<u8>, which is what
// trustee's cca verifier reads. Upstream probes only on aarch64; the provider name alone says the
// kernel is a CCA realm's, so detection here looks at the provider on any architecture.
import { join } from 'node:path';
import {
  type Attester,
  AttesterError,
  type AttesterModule,
  EvidenceCollectionFailed,
  type PlatformContext,
  type PlatformOptions,
} from '../attester.js';
import {
  BROKER_TSM_REPORT_ROOT,
  DEFAULT_TSM_REPORT_ROOT,
  probeTsmProvider,
  requestTsmReport,
} from '../configfs-tsm.js';

export const CCA_TSM_PROVIDER = 'arm_cca_guest';
/** The RSI challenge is 64 bytes; shorter report data is zero-padded, as upstream. */
export const CCA_CHALLENGE_SIZE = 64;

export interface CcaEvidence {
  readonly token: number[];
}

export interface CcaAttesterOptions extends PlatformOptions {
  /** configfs-tsm report root; default `BROKER_TSM_REPORT_ROOT`, else the kernel's under `root`. */
  readonly tsmReportRoot?: string;
  /** Bound on waiting for configfs-tsm attributes (see configfs-tsm.ts). */
  readonly attributeWaitMs?: number;
}

type Env = Readonly<Record<string, string | undefined>>;

function envRoot(env: Env): string | undefined {
  const v = env[BROKER_TSM_REPORT_ROOT];
  return v !== undefined && v.trim() !== '' ? v : undefined;
}

export class CcaAttester implements Attester {
  readonly tee = 'cca' as const;
  readonly #options: CcaAttesterOptions;

  constructor(options: CcaAttesterOptions = {}) {
    this.#options = options;
  }

  get tsmReportRoot(): string {
    return (
      this.#options.tsmReportRoot ??
      envRoot(this.#options.env ?? process.env) ??
      join(this.#options.root ?? '/', DEFAULT_TSM_REPORT_ROOT)
    );
  }

  async getEvidence(reportData: Uint8Array): Promise<CcaEvidence> {
    if (reportData.length > CCA_CHALLENGE_SIZE) {
      throw new AttesterError(`CCA Attester: Challenge size must be ${CCA_CHALLENGE_SIZE} bytes or less.`);
    }
    const challenge = Buffer.alloc(CCA_CHALLENGE_SIZE);
    challenge.set(reportData);
    const { outblob } = await requestTsmReport({
      root: this.tsmReportRoot,
      provider: CCA_TSM_PROVIDER,
      inblob: challenge,
      ...(this.#options.attributeWaitMs !== undefined && { attributeWaitMs: this.#options.attributeWaitMs }),
    });
    if (outblob.length === 0) throw new EvidenceCollectionFailed('CCA Attester: the CCA token is empty');
    return { token: [...outblob] };
  }
}

async function detect(ctx: PlatformContext): Promise<{ detected: boolean; reason: string }> {
  const root = envRoot(ctx.env) ?? DEFAULT_TSM_REPORT_ROOT;
  const provider = await probeTsmProvider({ root });
  return provider === CCA_TSM_PROVIDER
    ? { detected: true, reason: `configfs-tsm at ${root} has the ${CCA_TSM_PROVIDER} provider` }
    : {
        detected: false,
        reason:
          provider === undefined
            ? `no configfs-tsm report root at ${root}`
            : `configfs-tsm at ${root} has the ${provider} provider`,
      };
}

export const ccaModule: AttesterModule = {
  tee: 'cca',
  detect,
  create: (options) => new CcaAttester(options),
};
