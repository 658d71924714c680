/**
 * The opt-in that makes named KBS plugins reachable through `GET /cdh/plugin/<plugin>/<path>?<query>`.
 * Off by default: every container of the pod can call this API without a credential, and a plugin
 * call may do more than read (nebula-ca signs a new certificate on every call).
 */
import { ApiServerError, type ApiServerErrorCode } from './errors.js';

/** A plugin name as the data hub accepts it in a `kbs+<plugin>://` scheme. */
const PLUGIN_NAME = /^[a-z0-9][a-z0-9.-]{0,63}$/;

/** The data hub refuses longer resource URIs; the plugin route refuses them before calling it. */
export const MAX_PLUGIN_URI_LENGTH = 4096;

/** The plugin that `/cdh/resource` already serves; it is not a name of the plugin route. */
export const RESOURCE_PLUGIN = 'resource';

/** `--plugins` (or the `plugins` option) names something that cannot be an allowed KBS plugin. */
export class PluginListError extends ApiServerError {
  override readonly code: ApiServerErrorCode = 'PLUGINS_INVALID';
  override readonly name: string = 'PluginListError';
}

export function isPluginName(name: string): boolean {
  return PLUGIN_NAME.test(name);
}

/** Checks a list of allowed plugins; returns it without repeats. Throws PluginListError. */
export function checkPluginNames(names: readonly string[]): string[] {
  const out: string[] = [];
  for (const name of names) {
    const shown = JSON.stringify(name.slice(0, 80));
    if (name === RESOURCE_PLUGIN) {
      throw new PluginListError(
        `"resource" is not a plugin to allow: resources are always served at /cdh/resource/<path>`,
      );
    }
    if (!isPluginName(name)) {
      throw new PluginListError(`${shown} is not a KBS plugin name (lower-case [a-z0-9][a-z0-9.-]*)`);
    }
    if (!out.includes(name)) out.push(name);
  }
  return out;
}

/** `--plugins nebula-ca,external`: comma-separated names, none empty. Throws PluginListError. */
export function parsePluginList(text: string): string[] {
  const names = text.split(',');
  if (names.some((n) => n === '')) {
    throw new PluginListError(
      `${JSON.stringify(text.slice(0, 80))} has an empty plugin name: list names separated by commas, e.g. nebula-ca,external`,
    );
  }
  return checkPluginNames(names);
}
