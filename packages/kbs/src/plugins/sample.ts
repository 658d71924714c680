// `[[plugins]] name = "sample"` (trustee kbs/src/plugins/implementations/sample.rs): the example of a
// built-in client plugin. Its one config key, `item` (required string), is read and kept, not used.
// Every method and path under `/kbs/v0/sample/` answers the fixed body `sample plugin response`, behind
// admin credentials (its validate_auth is true), never encrypted.
import type { BuiltinPlugin } from './builtin.js';
import { SAMPLE_PLUGIN_NAME, type SamplePluginConfig } from './sample-config.js';

export const SAMPLE_PLUGIN_RESPONSE = 'sample plugin response';

export class SamplePlugin implements BuiltinPlugin {
  readonly name = SAMPLE_PLUGIN_NAME;
  private readonly reply = new TextEncoder().encode(SAMPLE_PLUGIN_RESPONSE);

  constructor(readonly config: SamplePluginConfig) {}

  async handle(): Promise<Uint8Array> {
    return this.reply;
  }

  validateAuth(): boolean {
    return true;
  }

  encrypted(): boolean {
    return false;
  }
}
