/**
 * Debian packages as the images' base: downloaded by apt from the machine's own sources (whatever
 * mirror the machine is set up with), cached by file name, and read without installing them.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';
import { ImageBuildError } from './errors.js';
import { tarEntries } from './tar.js';

export interface DebianPackage {
  readonly name: string;
  readonly version: string;
  /** Debian architecture (`all` for architecture-independent packages). */
  readonly architecture: string;
  readonly file: string;
  readonly sha256: string;
}

export interface DebFile {
  readonly type: 'file' | 'directory' | 'symlink';
  readonly mode: number;
  readonly data?: Buffer;
  readonly linkname?: string;
}

const MAX_DEB_TAR_BYTES = 256 * 1024 * 1024;

function run(cmd: string, args: readonly string[], cwd?: string): string {
  try {
    return execFileSync(cmd, args, {
      encoding: 'utf8',
      cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
      maxBuffer: 16 * 1024 * 1024,
    });
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    throw new ImageBuildError(
      'DEBIAN_PACKAGE',
      `${cmd} ${args.join(' ')} failed: ${(err.stderr ?? err.message).trim().split('\n').slice(-3).join(' ')}`,
      { cause: e },
    );
  }
}

/** apt's candidate version of `name:arch`. */
function candidateVersion(name: string, arch: string): { version: string; architecture: string } {
  const text = run('apt-cache', ['show', '--no-all-versions', `${name}:${arch}`]);
  const field = (f: string) => new RegExp(`^${f}: (.+)$`, 'm').exec(text)?.[1]?.trim();
  const version = field('Version');
  const architecture = field('Architecture');
  if (version === undefined || architecture === undefined)
    throw new ImageBuildError(
      'DEBIAN_PACKAGE',
      `apt knows no ${name}:${arch}${arch === 'amd64' ? '' : ` (is ${arch} enabled? dpkg --add-architecture ${arch} && apt-get update)`}`,
    );
  return { version, architecture };
}

/**
 * `name` for Debian architecture `arch`, downloaded into `cacheDir` unless a file of apt's candidate
 * version is there already (so two builds on one day read the same bytes).
 */
export function debianPackage(name: string, arch: string, cacheDir: string): DebianPackage {
  mkdirSync(cacheDir, { recursive: true });
  const { version, architecture } = candidateVersion(name, arch);
  const file = join(cacheDir, `${name}_${version.replace(/:/g, '%3a')}_${architecture}.deb`);
  if (!existsSync(file)) {
    // Downloaded into a folder of this build's own, then renamed into the cache: builds that run at
    // once (the tests run several) never read each other's half-written files.
    const staging = mkdtempSync(join(cacheDir, '.download-'));
    try {
      run('apt-get', ['download', '-qq', `${name}:${arch}`], staging);
      renameSync(join(staging, basename(file)), file);
    } finally {
      rmSync(staging, { recursive: true, force: true });
    }
  }
  if (!existsSync(file))
    throw new ImageBuildError('DEBIAN_PACKAGE', `apt-get download ${name}:${arch} did not write ${file}`);
  const sha256 = run('sha256sum', [file]).split(' ')[0] ?? '';
  return { name, version, architecture, file, sha256 };
}

/** The files of a package's data archive, by path without the leading `./` or `/`. */
export async function debFiles(pkg: DebianPackage): Promise<Map<string, DebFile>> {
  let tarBytes: Buffer;
  try {
    tarBytes = execFileSync('dpkg-deb', ['--fsys-tarfile', pkg.file], {
      maxBuffer: MAX_DEB_TAR_BYTES,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (e) {
    throw new ImageBuildError('DEBIAN_PACKAGE', `cannot read ${pkg.file}: ${(e as Error).message}`, {
      cause: e,
    });
  }
  const files = new Map<string, DebFile>();
  for (const { header, data } of await tarEntries(tarBytes)) {
    const path = header.name.replace(/^\.?\//, '').replace(/\/$/, '');
    if (path === '') continue;
    const mode = (header.mode ?? 0o644) & 0o7777;
    if (header.type === 'directory') files.set(path, { type: 'directory', mode });
    else if (header.type === 'symlink')
      files.set(path, { type: 'symlink', mode, linkname: header.linkname ?? '' });
    else if (header.type === 'file') files.set(path, { type: 'file', mode, data });
  }
  return files;
}

/** The package's copyright file, which goes into the image beside what the package gave it. */
export function copyrightPath(pkg: DebianPackage): string {
  return `usr/share/doc/${pkg.name}/copyright`;
}
