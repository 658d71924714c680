// `broker-images`: what `make images` runs (scripts/images.mjs bundles and starts it).
import { execFileSync } from 'node:child_process';
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type CommandIo, processIo, runCommand, UsageError } from '@broker/cli';
import { buildImages } from './build.js';
import { ImageBuildError } from './errors.js';
import { IMAGES, imageNamed } from './images.js';
import { PLATFORMS, platformNamed } from './platform.js';
import { DEFAULT_REPOSITORY_PREFIX, IMAGES_VERSION } from './version.js';

export { DEFAULT_REPOSITORY_PREFIX, IMAGES_VERSION };

const HELP = `Usage: broker-images [OPTIONS]

Builds broker's container images as OCI image layouts, each an index over its platforms, tagged with
the version: ${IMAGES.map((i) => i.name).join(', ')}. Needs \`make build\` first (dist/bin, dist/sea). The
base comes from Debian packages that apt downloads from the machine's own sources.

Options:
      --out <DIR>          Where the layouts go [default: dist/images]
      --cache <DIR>        Downloaded Debian and npm packages, kept between builds [default: dist/image-cache]
      --platform <LIST>    Comma-separated platforms [default: ${PLATFORMS.map((p) => `linux/${p.architecture}`).join(',')}]
      --image <NAME>       Build only this image (repeatable) [default: all]
      --sign-key <FILE>    PEM private key (EC P-256, RSA or Ed25519): sign each image in cosign's format
                           [default: the IMAGE_SIGN_KEY environment variable, else unsigned]
      --repository <PREFIX>  The images' repository prefix, which signatures name [default: ${DEFAULT_REPOSITORY_PREFIX}]
  -h, --help               Print help
  -V, --version            Print version

Time stamps come from SOURCE_DATE_EPOCH, else the commit's time; org.opencontainers.image.revision from
BROKER_IMAGE_REVISION, else the commit (for a source tree without git); org.opencontainers.image.source
from BROKER_IMAGE_SOURCE, else the web address of the git remote "origin".`;

function git(root: string, args: string[]): string | undefined {
  try {
    return execFileSync('git', args, {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return undefined;
  }
}

function createdTime(root: string, env: Readonly<Record<string, string | undefined>>): Date {
  const epoch = env.SOURCE_DATE_EPOCH ?? git(root, ['log', '-1', '--format=%ct']);
  if (epoch === undefined || !/^\d+$/.test(epoch))
    throw new ImageBuildError('SOURCE_DATE', 'no time stamp: set SOURCE_DATE_EPOCH (not a git checkout)');
  return new Date(Number(epoch) * 1000);
}

/**
 * The web address of a git remote (`https://…`, or `git@host:owner/repo.git` as https), for
 * `org.opencontainers.image.source`; undefined for a local path or anything else that is not one.
 */
export function sourceUrl(remote: string | undefined): string | undefined {
  if (remote === undefined) return undefined;
  const https = /^https:\/\/[^\s@/]+\/[^\s]+$/.exec(remote);
  const scp = /^[\w.-]+@([\w.-]+):([\w./-]+)$/.exec(remote);
  const url = https !== null ? remote : scp !== null ? `https://${scp[1]}/${scp[2]}` : undefined;
  return url?.replace(/\.git$/, '');
}

function readKey(path: string): KeyObject {
  try {
    return createPrivateKey(readFileSync(path));
  } catch (e) {
    throw new ImageBuildError('SIGNING_KEY', `cannot read the signing key ${path}: ${(e as Error).message}`, {
      cause: e,
    });
  }
}

export function imagesMain(argv: string[], root: string, io: CommandIo = processIo): Promise<number> {
  const env = io.env ?? process.env;
  return runCommand(
    {
      name: 'broker-images',
      version: IMAGES_VERSION,
      help: HELP,
      options: {
        out: { type: 'string' },
        cache: { type: 'string' },
        platform: { type: 'string' },
        image: { type: 'string', multiple: true },
        'sign-key': { type: 'string' },
        repository: { type: 'string' },
      },
    },
    argv,
    async ({ values }) => {
      const platforms = (values.platform ?? PLATFORMS.map((p) => `linux/${p.architecture}`).join(','))
        .split(',')
        .map((p) => {
          const [os, arch] = p.trim().split('/');
          if (os !== 'linux' || arch === undefined)
            throw new UsageError(`--platform: ${p} is not linux/<arch>`);
          try {
            return platformNamed(arch);
          } catch (e) {
            throw new UsageError(`--platform: ${(e as Error).message}`);
          }
        });
      const images = (values.image ?? []).map((n) => {
        try {
          return imageNamed(n);
        } catch (e) {
          throw new UsageError(`--image: ${(e as Error).message}`);
        }
      });
      const keyPath = values['sign-key'] ?? (env.IMAGE_SIGN_KEY || undefined);
      const revision = env.BROKER_IMAGE_REVISION || git(root, ['rev-parse', 'HEAD']) || 'unknown';
      const source = env.BROKER_IMAGE_SOURCE || sourceUrl(git(root, ['remote', 'get-url', 'origin']));
      const outDir = resolve(values.out ?? join(root, 'dist/images'));
      const summaries = await buildImages({
        root,
        outDir,
        cacheDir: resolve(values.cache ?? join(root, 'dist/image-cache')),
        platforms,
        ...(images.length > 0 && { images }),
        version: IMAGES_VERSION,
        revision,
        created: createdTime(root, env),
        ...(source !== undefined && { source }),
        ...(keyPath !== undefined && { signingKey: readKey(keyPath) }),
        repositoryPrefix: values.repository ?? DEFAULT_REPOSITORY_PREFIX,
        log: (line) => io.err(`${line}\n`),
      });
      const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
      io.out(`images in ${outDir} (${IMAGES_VERSION}, ${revision.slice(0, 12)}):\n`);
      for (const s of summaries) {
        const sizes = s.platforms
          .map((p) => `${p.architecture} ${mib(p.compressedBytes)} (${mib(p.uncompressedBytes)} unpacked)`)
          .join(', ');
        io.out(
          `  ${s.name.padEnd(20)} ${s.indexDigest}  ${sizes}; SBOM ${s.sbomPackages} packages${s.signatures.length > 0 ? `; ${s.signatures.length} signatures` : ''}\n`,
        );
      }
      if (source === undefined)
        io.err(
          'no source URL for org.opencontainers.image.source: set BROKER_IMAGE_SOURCE or a git remote "origin"\n',
        );
      return 0;
    },
    io,
  );
}
