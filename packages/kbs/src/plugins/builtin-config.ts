// Which `[[plugins]]` names are built-in client plugins besides `resource` and `external`, and how each
// entry is parsed. Names are trustee's PluginsConfig aliases and variants. The configuration parser reads
// only this; builtin-registry.ts starts the plugins.
import { ConfigError, type Section } from '@broker/cli';
import { NEBULA_CA_PLUGIN_NAME, type NebulaCaPluginConfig, parseNebulaCaPlugin } from './nebula-ca-config.js';
import {
  PROVISIONER_PLUGIN_NAME,
  type ProvisionerPluginConfig,
  parseProvisionerPlugin,
} from './provisioner-config.js';
import { parseSamplePlugin, SAMPLE_PLUGIN_NAME, type SamplePluginConfig } from './sample-config.js';

export interface BuiltinPluginsConfig {
  readonly sample?: SamplePluginConfig;
  readonly nebulaCa?: NebulaCaPluginConfig;
  readonly provisioner?: ProvisionerPluginConfig;
}

export const BUILTIN_PLUGIN_NAMES: readonly string[] = [
  SAMPLE_PLUGIN_NAME,
  NEBULA_CA_PLUGIN_NAME,
  PROVISIONER_PLUGIN_NAME,
];

/**
 * Parses a `[[plugins]]` entry named `name` into `into`; undefined when `name` is not one of these
 * plugins. Each may be configured once.
 */
export function parseBuiltinPlugin(
  name: string,
  p: Section,
  into: BuiltinPluginsConfig,
): BuiltinPluginsConfig | undefined {
  const once = (set: boolean, plugin: string) => {
    if (set) throw new ConfigError(`${p.where} the ${plugin} plugin is configured twice`);
  };
  if (name === 'sample' || name === 'Sample') {
    once(into.sample !== undefined, 'sample');
    return { ...into, sample: parseSamplePlugin(p) };
  }
  if (name === 'nebula-ca' || name === 'NebulaCaPlugin') {
    once(into.nebulaCa !== undefined, 'nebula-ca');
    return { ...into, nebulaCa: parseNebulaCaPlugin(p) };
  }
  if (name === 'provisioner' || name === 'Provisioner') {
    once(into.provisioner !== undefined, 'provisioner');
    return { ...into, provisioner: parseProvisionerPlugin(p) };
  }
  return undefined;
}
