// `[[plugins]] name = "provisioner"`: `key_length`, the length of the generated keys (trustee
// kbs/src/plugins/implementations/provisioner/). The plugin itself is in provisioner.ts.
import type { Section } from '@broker/cli';

export const PROVISIONER_PLUGIN_NAME = 'provisioner';

export const DEFAULT_KEY_LENGTH = 32;
/** Shortest key accepted: 16 alphanumeric characters carry about 95 bits. */
export const MIN_KEY_LENGTH = 16;
export const MAX_KEY_LENGTH = 4096;

export interface ProvisionerPluginConfig {
  /** Length of the generated key, in alphanumeric characters (trustee's `key_length`, default 32). */
  readonly keyLength: number;
}

/** The `provisioner` entry of `[[plugins]]` (its `name` already read). */
export function parseProvisionerPlugin(p: Section): ProvisionerPluginConfig {
  const keyLength = p.optInt('key_length', MIN_KEY_LENGTH, MAX_KEY_LENGTH) ?? DEFAULT_KEY_LENGTH;
  p.finish();
  return { keyLength };
}
