// `[[plugins]] name = "sample"`: its one config key, `item` (required string), read and kept (trustee
// kbs/src/plugins/implementations/sample.rs). The plugin itself is in sample.ts.
import type { Section } from '@broker/cli';

export const SAMPLE_PLUGIN_NAME = 'sample';

export interface SamplePluginConfig {
  readonly item: string;
}

/** The `sample` entry of `[[plugins]]` (its `name` already read). */
export function parseSamplePlugin(p: Section): SamplePluginConfig {
  const item = p.string('item');
  p.finish();
  return { item };
}
