// The `resource` plugin's kvstorage backend (trustee plugins/implementations/resource/kv_storage.rs):
// resources are the values of keys `<repo>/<type>/<tag>` in the `repository` namespace.

import type { KvStorage } from '@broker/kv-storage';
import { formatResourcePath, type ResourcePath } from '@broker/protocol';
import { KbsServiceError } from './errors.js';

const NAMESPACE = 'repository';

/** A failure inside the plugin; the KBS answers PluginInternalError. */
export class ResourcePluginError extends KbsServiceError {
  override readonly name: string = 'ResourcePluginError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('RESOURCE_PLUGIN_FAILED', message, options);
  }
}

export class ResourceRepository {
  constructor(private readonly storage: KvStorage) {}

  async read(p: ResourcePath): Promise<Uint8Array> {
    const key = formatResourcePath(p);
    const v = await this.storage.get(NAMESPACE, key);
    if (v === undefined) throw new ResourcePluginError(`resource not found: ${key}`);
    return v;
  }

  async write(p: ResourcePath, data: Uint8Array): Promise<void> {
    await this.storage.set(NAMESPACE, formatResourcePath(p), data, { overwrite: true });
  }

  async delete(p: ResourcePath): Promise<void> {
    const key = formatResourcePath(p);
    if (!(await this.storage.delete(NAMESPACE, key)))
      throw new ResourcePluginError(`resource not found: ${key}`);
  }
}
