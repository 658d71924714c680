// In-process runs of the image commands and a manifest's layers, as the encrypted-image tests use them.
import { type Descriptor, parseManifest, RegistryClient } from '@broker/image';
import type { imagePullMain } from '@broker/image-tools';

type ImageMain = typeof imagePullMain;

/** Runs `image-pull` or `image-policy` in this process, capturing what it writes. */
export async function runImageCli(
  main: ImageMain,
  args: string[],
): Promise<{ status: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const status = await main(args, {
    stdout: (s: string) => {
      out += s;
    },
    stderr: (s: string) => {
      err += s;
    },
    env: {},
  } as unknown as Parameters<ImageMain>[1]);
  return { status, out, err };
}

/** The layers of `host/path:tag` in a plain-http registry. */
export async function imageLayers(host: string, path: string, tag = 'v1'): Promise<readonly Descriptor[]> {
  const client = new RegistryClient({ insecure: () => true });
  try {
    const m = await client.getManifest({ domain: host, path }, tag);
    const manifest = parseManifest(m.bytes, m.contentType);
    if (manifest.kind !== 'manifest')
      throw new Error(`${host}/${path}:${tag} is not a single-platform manifest`);
    return manifest.layers;
  } finally {
    client.close();
  }
}
