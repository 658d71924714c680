// How the KBS starts the configured built-in client plugins (trustee's PluginManager); their
// configuration is read by builtin-config.ts.
import type { KvStorage } from '@broker/kv-storage';
import { KbsServiceError } from '../errors.js';
import { type BuiltinPlugin, type BuiltinPluginDeps, BuiltinPluginHost } from './builtin.js';
import type { BuiltinPluginsConfig } from './builtin-config.js';
import { NebulaCaPlugin } from './nebula-ca.js';
import { NEBULA_CA_PLUGIN_NAME } from './nebula-ca-config.js';
import { ProvisionerPlugin } from './provisioner.js';
import { PROVISIONER_PLUGIN_NAME } from './provisioner-config.js';
import { SamplePlugin } from './sample.js';
import { SAMPLE_PLUGIN_NAME } from './sample-config.js';

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
      throw new KbsServiceError(
        'PLUGIN_INIT_FAILED',
        `Initialize 'nebula-ca' plugin failed: ${(e as Error).message}`,
        { cause: e },
      );
    }
  }
  return plugins.size === 0 ? undefined : new BuiltinPluginHost(plugins, deps);
}
