// Which `[[plugins]]` names are built-in client plugins besides `resource` and `external`, how each
// entry is parsed, and how the KBS starts them. Names are trustee's PluginsConfig aliases and variants.
import { ConfigError, type Section } from '@broker/cli';
import type { KvStorage } from '@broker/kv-storage';
import { type BuiltinPlugin, type BuiltinPluginDeps, BuiltinPluginHost } from './builtin.js';
import { NEBULA_CA_PLUGIN_NAME, NebulaCaPlugin } from './nebula-ca.js';
import { type NebulaCaPluginConfig, parseNebulaCaPlugin } from './nebula-ca-config.js';
import {
  PROVISIONER_PLUGIN_NAME,
  ProvisionerPlugin,
  type ProvisionerPluginConfig,
  parseProvisionerPlugin,
} from './provisioner.js';
import { parseSamplePlugin, SAMPLE_PLUGIN_NAME, SamplePlugin, type SamplePluginConfig } from './sample.js';

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

/** Starts the configured plugins (trustee's PluginManager); undefined when none is configured. */
export async function startBuiltinPlugins(
  config: BuiltinPluginsConfig | undefined,
  deps: BuiltinPluginDeps & { readonly storage: KvStorage },
): Promise<BuiltinPluginHost | undefined> {
  if (config === undefined) return undefined;
  const plugins = new Map<string, BuiltinPlugin>();
  if (config.sample !== undefined) plugins.set(SAMPLE_PLUGIN_NAME, new SamplePlugin(config.sample));
  if (config.provisioner !== undefined) {
    // Its keys live in the KBS's storage backend, namespace `provisioner`, as trustee's.
    plugins.set(PROVISIONER_PLUGIN_NAME, new ProvisionerPlugin(config.provisioner, deps.storage));
  }
  if (config.nebulaCa !== undefined) {
    try {
      const nebula = await NebulaCaPlugin.start(config.nebulaCa, { logger: deps.logger });
      plugins.set(NEBULA_CA_PLUGIN_NAME, nebula);
    } catch (e) {
      throw new Error(`Initialize 'nebula-ca' plugin failed: ${(e as Error).message}`, { cause: e });
    }
  }
  return plugins.size === 0 ? undefined : new BuiltinPluginHost(plugins, deps);
}
