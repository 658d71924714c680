// `[[plugins]] name = "nebula-ca"` (trustee nebula_ca.rs NebulaCaPluginConfig, kbs/docs/config.md):
// `work_dir`, `nebula_cert_bin_path`, and the `nebula-cert ca` settings used when the plugin has to
// create its CA. trustee's code reads those from `ca_config`, its docs say `[plugins.self_signed_ca]`:
// either name is accepted (not both).
import { ConfigError, type Section } from '@broker/cli';

export const NEBULA_CA_PLUGIN_NAME = 'nebula-ca';
export const DEFAULT_NEBULA_WORK_DIR = '/opt/confidential-containers/kbs/nebula-ca';
/** Looked up in $PATH, as trustee. */
export const DEFAULT_NEBULA_CERT_BIN = 'nebula-cert';
export const DEFAULT_NEBULA_CA_NAME = 'Trustee Nebula CA plugin';

export interface SelfSignedNebulaCaConfig {
  readonly name: string;
  readonly argonIterations?: number;
  readonly argonMemory?: number;
  readonly argonParallelism?: number;
  readonly curve?: string;
  readonly duration?: string;
  readonly groups?: string;
  readonly ips?: string;
  readonly outQr?: string;
  readonly subnets?: string;
}

export interface NebulaCaPluginConfig {
  readonly workDir: string;
  readonly nebulaCertBinPath: string;
  readonly ca: SelfSignedNebulaCaConfig;
}

const U32 = 0xffff_ffff;

function parseCaSection(s: Section | undefined): SelfSignedNebulaCaConfig {
  if (s === undefined) return { name: DEFAULT_NEBULA_CA_NAME };
  const opt = <T>(key: keyof SelfSignedNebulaCaConfig, v: T | undefined) =>
    v === undefined ? {} : { [key]: v };
  const ca: SelfSignedNebulaCaConfig = {
    name: s.string('name', DEFAULT_NEBULA_CA_NAME),
    ...opt('argonIterations', s.optInt('argon_iterations', 0, U32)),
    ...opt('argonMemory', s.optInt('argon_memory', 0, U32)),
    ...opt('argonParallelism', s.optInt('argon_parallelism', 0, U32)),
    ...opt('curve', s.optString('curve')),
    ...opt('duration', s.optString('duration')),
    ...opt('groups', s.optString('groups')),
    ...opt('ips', s.optString('ips')),
    ...opt('outQr', s.optString('out_qr')),
    ...opt('subnets', s.optString('subnets')),
  };
  s.finish();
  if (ca.name === '') throw new ConfigError(`${s.where} name must not be empty`);
  return ca;
}

/** The `nebula-cert ca` arguments before the output paths, in trustee's order. */
export function caArguments(ca: SelfSignedNebulaCaConfig): string[] {
  const args = ['-name', ca.name];
  const add = (flag: string, v: string | number | undefined) => {
    if (v !== undefined) args.push(flag, String(v));
  };
  add('-argon-iterations', ca.argonIterations);
  add('-argon-memory', ca.argonMemory);
  add('-argon-parallelism', ca.argonParallelism);
  add('-curve', ca.curve);
  add('-duration', ca.duration);
  add('-groups', ca.groups);
  add('-ips', ca.ips);
  add('-out-qr', ca.outQr);
  add('-subnets', ca.subnets);
  return args;
}

/** The `nebula-ca` entry of `[[plugins]]` (its `name` already read). */
export function parseNebulaCaPlugin(p: Section): NebulaCaPluginConfig {
  const workDir = p.string('work_dir', DEFAULT_NEBULA_WORK_DIR);
  const nebulaCertBinPath = p.string('nebula_cert_bin_path', DEFAULT_NEBULA_CERT_BIN);
  if (p.has('ca_config') && p.has('self_signed_ca')) {
    throw new ConfigError(`${p.where} set ca_config or self_signed_ca (the same settings), not both`);
  }
  const caSection = p.optSection(p.has('self_signed_ca') ? 'self_signed_ca' : 'ca_config');
  const ca = parseCaSection(caSection);
  p.finish();
  if (workDir === '') throw new ConfigError(`${p.where} work_dir must not be empty`);
  if (nebulaCertBinPath === '') throw new ConfigError(`${p.where} nebula_cert_bin_path must not be empty`);
  return { workDir, nebulaCertBinPath, ca };
}
