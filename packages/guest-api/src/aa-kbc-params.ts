/**
 * `aa_kbc_params`: `<kbc>::<uri>`, which kata gives the guest components in the environment
 * (`AA_KBC_PARAMS`) or on the kernel command line (`agent.aa_kbc_params=`). The attestation agent and
 * the confidential data hub both read it (guest-components' `AaKbcParams`).
 */

export const AA_KBC_PARAMS_ENV = 'AA_KBC_PARAMS';
/** Kernel parameter carrying `<kbc>::<uri>` (kata's `agent.aa_kbc_params`). */
export const AA_KBC_PARAMS_CMDLINE_KEY = 'agent.aa_kbc_params';

export interface AaKbcParams {
  /** `cc_kbc` names the KBS protocol; upstream's default is `offline_fs_kbc`. */
  readonly kbc: string;
  readonly uri: string;
}

/** The value of `key=` on a kernel command line (parameters split at white space), if present. */
export function kernelCmdlineValue(cmdline: string, key: string): string | undefined {
  const prefix = `${key}=`;
  return cmdline
    .split(/[ \t\n\r\f\v]+/)
    .find((p) => p.startsWith(prefix))
    ?.slice(prefix.length);
}

/** Where `aa_kbc_params` is found: env `AA_KBC_PARAMS` first, then the kernel command line. */
export function findAaKbcParams(
  env: Readonly<Record<string, string | undefined>>,
  cmdline: string,
): { readonly value: string; readonly from: 'env' | 'cmdline' } | undefined {
  const fromEnv = env[AA_KBC_PARAMS_ENV];
  if (fromEnv !== undefined) return { value: fromEnv, from: 'env' };
  const fromCmdline = kernelCmdlineValue(cmdline, AA_KBC_PARAMS_CMDLINE_KEY);
  return fromCmdline === undefined ? undefined : { value: fromCmdline, from: 'cmdline' };
}

/**
 * `<kbc>::<uri>` with exactly one `::` (upstream `AaKbcParams::try_from`); undefined otherwise, and
 * the caller says so in its own error (`aaKbcParamsFormatMessage`). One addition: a `::` inside
 * brackets in the URI, as in `cc_kbc::http://[fd00::1]:8080`, is part of an IPv6 address and not a
 * separator, so a KBS reached by IPv6 address can be named (upstream refuses every such value).
 */
export function splitAaKbcParams(value: string): AaKbcParams | undefined {
  const sep = value.indexOf('::');
  if (sep < 0) return undefined;
  const uri = value.slice(sep + 2);
  if (uri.replace(/\[[^\]]*\]/g, '').includes('::')) return undefined;
  return { kbc: value.slice(0, sep), uri };
}

/** Upstream's wording for a malformed value, which is shown bounded and with control characters escaped. */
export function aaKbcParamsFormatMessage(value: string): string {
  return `illegal aa_kbc_params format: ${JSON.stringify(value.slice(0, 256)).slice(1, -1)}`;
}
