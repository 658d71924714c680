// Small images built and pushed with @broker/image, for the flow A end-to-end test and the demo.
import { buildImage, buildLayer, parseImageReference, pushImage, RegistryClient } from '@broker/image';

/**
 * Builds a one-layer image holding `files` (path → text) and pushes it to `reference` (`host/repo:tag`)
 * over plain http, as loopback registries speak. Resolves with the manifest digest.
 */
export async function publishImage(
  reference: string,
  files: Readonly<Record<string, string>>,
): Promise<string> {
  const ref = parseImageReference(reference);
  if (ref.tag === undefined || ref.digest !== undefined)
    throw new Error(`publishImage needs a host/repo:tag reference, not ${reference}`);
  const layer = await buildLayer(Object.entries(files).map(([name, content]) => ({ name, content })));
  const image = buildImage({ layers: [layer], cmd: ['/bin/sh'] });
  const client = new RegistryClient({ insecure: () => true });
  try {
    return await pushImage(client, { domain: ref.domain, path: ref.path }, ref.tag, image);
  } finally {
    client.close();
  }
}
