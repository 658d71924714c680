/**
 * The base layer every image shares on a platform: the shared libraries the Node runtime loads (and
 * nothing else of their packages), CA certificates, a non-root user, and the packages' copyright
 * files. No shell, no package manager.
 */
import { posix } from 'node:path';
import type { LayerEntry } from '@broker/image';
import { copyrightPath, type DebFile, type DebianPackage, debFiles, debianPackage } from './debian.js';
import { elfLinking } from './elf.js';
import { ImageBuildError } from './errors.js';
import type { ImagePlatform } from './platform.js';

/** The images' user: numeric, so that `runAsNonRoot` can check it without a passwd lookup. */
export const IMAGE_USER = {
  name: 'nonroot',
  uid: 65532,
  gid: 65532,
  // Inside the image (the folder distroless images give their non-root user too).
  home: posix.join('/home', 'nonroot'),
} as const;

/** Where the CA bundle is, as on Debian. */
export const CA_BUNDLE_PATH = '/etc/ssl/certs/ca-certificates.crt';

export interface BaseLayer {
  readonly entries: readonly LayerEntry[];
  /** The Debian packages that gave files, in the order they were read. */
  readonly packages: readonly DebianPackage[];
}

interface Loaded {
  readonly pkg: DebianPackage;
  readonly files: Map<string, DebFile>;
}

class PackageSet {
  readonly loaded = new Map<string, Loaded>();
  constructor(
    private readonly platform: ImagePlatform,
    private readonly cacheDir: string,
  ) {}

  async load(name: string, arch: string = this.platform.debian): Promise<Loaded> {
    const known = this.loaded.get(name);
    if (known !== undefined) return known;
    const pkg = debianPackage(name, arch, this.cacheDir);
    const loaded = { pkg, files: await debFiles(pkg) };
    this.loaded.set(name, loaded);
    // Debian lets a package's doc folder be a link to the one of a package it depends on (libgcc-s1 →
    // gcc-12-base): that package's copyright is the one that applies, so it comes along.
    const doc = loaded.files.get(`usr/share/doc/${name}`);
    if (doc?.type === 'symlink' && doc.linkname !== undefined && !doc.linkname.includes('/'))
      await this.load(doc.linkname, arch);
    return loaded;
  }

  /** The library `soname` in the loaded packages: its real file (links followed) and where it was. */
  find(soname: string): { pkg: Loaded; realName: string; data: Buffer } | undefined {
    for (const pkg of this.loaded.values()) {
      for (const dir of [`lib/${this.platform.triplet}`, `usr/lib/${this.platform.triplet}`]) {
        let path = `${dir}/${soname}`;
        for (let hops = 0; hops < 8; hops++) {
          const f = pkg.files.get(path);
          if (f === undefined) break;
          if (f.type === 'file' && f.data !== undefined)
            return { pkg, realName: posix.basename(path), data: f.data };
          if (f.type !== 'symlink' || f.linkname === undefined) break;
          path = f.linkname.startsWith('/')
            ? f.linkname.slice(1)
            : posix.normalize(posix.join(posix.dirname(path), f.linkname));
        }
      }
    }
    return undefined;
  }
}

const LIBRARY_PACKAGES = ['libc6', 'libgcc-s1', 'libstdc++6'];

/**
 * The base layer for `platform`, holding what `executable` (an ELF for that platform) loads. `mtime`
 * is every entry's time stamp, for reproducible layers.
 */
export async function buildBaseLayer(
  platform: ImagePlatform,
  executable: Buffer,
  cacheDir: string,
  mtime: Date,
): Promise<BaseLayer> {
  const set = new PackageSet(platform, cacheDir);
  for (const name of LIBRARY_PACKAGES) await set.load(name);
  const certs = await set.load('ca-certificates', 'all');

  const libDir = `usr/lib/${platform.triplet}`;
  const files = new Map<string, LayerEntry>();
  const used = new Set<string>();
  const add = (e: LayerEntry) => files.set(e.name, { uid: 0, gid: 0, mtime, ...e });

  // The loader closure, breadth first from the executable.
  const top = elfLinking(executable, 'the Node runtime');
  if (top.interpreter === undefined)
    throw new ImageBuildError('SHARED_LIBRARY', 'the Node runtime names no program interpreter');
  const queue = [posix.basename(top.interpreter), ...top.needed];
  const seen = new Set<string>();
  while (queue.length > 0) {
    const soname = queue.shift() as string;
    if (seen.has(soname)) continue;
    seen.add(soname);
    const found = set.find(soname);
    if (found === undefined)
      throw new ImageBuildError(
        'SHARED_LIBRARY',
        `no package among ${[...set.loaded.keys()].join(', ')} has ${soname} for ${platform.triplet}`,
      );
    used.add(found.pkg.pkg.name);
    add({ name: `${libDir}/${found.realName}`, content: found.data, mode: 0o755 });
    if (found.realName !== soname)
      add({ name: `${libDir}/${soname}`, type: 'symlink', linkname: found.realName });
    queue.push(...elfLinking(found.data, soname).needed);
  }

  // The interpreter at the path the executable names (/lib64/… or /lib/…), merged-/usr style.
  const interp = top.interpreter.slice(1);
  const interpDir = posix.dirname(interp);
  if (interpDir !== 'lib' && interpDir !== 'lib64')
    throw new ImageBuildError('SHARED_LIBRARY', `unexpected program interpreter ${top.interpreter}`);
  add({ name: interpDir, type: 'symlink', linkname: `usr/${interpDir}` });
  add({
    name: `usr/${interp}`,
    type: 'symlink',
    linkname: posix.relative(`usr/${interpDir}`, `${libDir}/${posix.basename(interp)}`),
  });
  if (interpDir !== 'lib') add({ name: 'lib', type: 'symlink', linkname: 'usr/lib' });

  // CA certificates: Debian's bundle as update-ca-certificates writes it (every Mozilla root, sorted).
  const crts = [...certs.files.entries()]
    .filter(
      ([p, f]) => p.startsWith('usr/share/ca-certificates/') && p.endsWith('.crt') && f.data !== undefined,
    )
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([, f]) => {
      const text = (f.data as Buffer).toString('utf8');
      return text.endsWith('\n') ? text : `${text}\n`;
    });
  if (crts.length === 0) throw new ImageBuildError('DEBIAN_PACKAGE', 'ca-certificates holds no certificate');
  add({ name: CA_BUNDLE_PATH.slice(1), content: crts.join(''), mode: 0o644 });
  used.add('ca-certificates');

  add({
    name: 'etc/passwd',
    content: `root:x:0:0:root:/root:/sbin/nologin\n${IMAGE_USER.name}:x:${IMAGE_USER.uid}:${IMAGE_USER.gid}:${IMAGE_USER.name}:${IMAGE_USER.home}:/sbin/nologin\n`,
  });
  add({ name: 'etc/group', content: `root:x:0:\n${IMAGE_USER.name}:x:${IMAGE_USER.gid}:\n` });
  add({ name: 'tmp', type: 'directory', mode: 0o1777 });
  add({
    name: IMAGE_USER.home.slice(1),
    type: 'directory',
    mode: 0o700,
    uid: IMAGE_USER.uid,
    gid: IMAGE_USER.gid,
  });

  // Copyright files of every package that gave something (and of those their doc folders link to).
  const packages: DebianPackage[] = [];
  for (const { pkg, files: pf } of set.loaded.values()) {
    const doc = pf.get(`usr/share/doc/${pkg.name}`);
    const gaveFiles = used.has(pkg.name);
    const isDocTarget = [...set.loaded.values()].some(
      (o) => used.has(o.pkg.name) && o.files.get(`usr/share/doc/${o.pkg.name}`)?.linkname === pkg.name,
    );
    if (!gaveFiles && !isDocTarget) continue;
    packages.push(pkg);
    const copyright = pf.get(copyrightPath(pkg));
    if (copyright?.data !== undefined) add({ name: copyrightPath(pkg), content: copyright.data });
    else if (doc?.type === 'symlink' && doc.linkname !== undefined)
      add({ name: `usr/share/doc/${pkg.name}`, type: 'symlink', linkname: doc.linkname });
  }

  return { entries: withParents(files, mtime), packages };
}

/** `files` sorted by path, with every missing parent folder (0755, root) before its children. */
export function withParents(files: ReadonlyMap<string, LayerEntry>, mtime: Date): LayerEntry[] {
  const all = new Map(files);
  for (const name of files.keys()) {
    for (let dir = posix.dirname(name); dir !== '.' && dir !== ''; dir = posix.dirname(dir)) {
      if (!all.has(dir)) all.set(dir, { name: dir, type: 'directory', mode: 0o755, uid: 0, gid: 0, mtime });
    }
  }
  return [...all.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
