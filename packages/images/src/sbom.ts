/**
 * The images' software bill of materials, SPDX 2.3 JSON: the npm packages the lockfile installs for
 * production (what the bundle can contain), the Node runtime of each platform, and the Debian packages
 * whose files went in, with versions and package URLs.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DebianPackage } from './debian.js';

export const SPDX_MEDIA_TYPE = 'application/spdx+json';

export interface SbomInput {
  readonly image: string;
  readonly version: string;
  readonly revision: string;
  readonly created: string;
  /** The image index the SBOM describes. */
  readonly indexDigest: string;
  readonly npm: readonly NpmPackage[];
  readonly runtimes: readonly { name: string; version: string; architecture: string }[];
  readonly debian: readonly DebianPackage[];
}

export interface NpmPackage {
  readonly name: string;
  readonly version: string;
  readonly license?: string;
  readonly integrity?: string;
}

interface LockEntry {
  version?: string;
  license?: string;
  integrity?: string;
  dev?: boolean;
  link?: boolean;
  devOptional?: boolean;
}

/** The lockfile's production packages (neither `dev` nor workspace links), sorted by name. */
export function npmPackagesFromLockfile(root: string): NpmPackage[] {
  const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, LockEntry>;
  };
  const out = new Map<string, NpmPackage>();
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (
      !path.includes('node_modules/') ||
      entry.dev === true ||
      entry.link === true ||
      entry.version === undefined
    )
      continue;
    const name = path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
    out.set(`${name}@${entry.version}`, {
      name,
      version: entry.version,
      ...(entry.license !== undefined && { license: entry.license }),
      ...(entry.integrity !== undefined && { integrity: entry.integrity }),
    });
  }
  return [...out.values()].sort((a, b) =>
    a.name === b.name ? (a.version < b.version ? -1 : 1) : a.name < b.name ? -1 : 1,
  );
}

function spdxId(kind: string, text: string): string {
  return `SPDXRef-${kind}-${text.replace(/[^A-Za-z0-9.-]/g, '-')}`;
}

/** SPDX wants a license expression or NOASSERTION; npm's free text is kept only when it looks like one. */
function licenseOf(text: string | undefined): string {
  if (text === undefined) return 'NOASSERTION';
  return /^[A-Za-z0-9.+\-() ]+$/.test(text) ? text : 'NOASSERTION';
}

function npmPurl(p: NpmPackage): string {
  const name = p.name.startsWith('@') ? `%40${p.name.slice(1)}` : p.name;
  return `pkg:npm/${name}@${p.version}`;
}

export function spdxDocument(input: SbomInput): Record<string, unknown> {
  const imageId = 'SPDXRef-image';
  const packages: Record<string, unknown>[] = [
    {
      SPDXID: imageId,
      name: input.image,
      versionInfo: input.version,
      supplier: 'NOASSERTION',
      downloadLocation: 'NOASSERTION',
      filesAnalyzed: false,
      licenseConcluded: 'NOASSERTION',
      licenseDeclared: 'Apache-2.0',
      copyrightText: 'NOASSERTION',
      primaryPackagePurpose: 'CONTAINER',
      externalRefs: [
        {
          referenceCategory: 'PACKAGE-MANAGER',
          referenceType: 'purl',
          referenceLocator: `pkg:oci/${input.image}@${encodeURIComponent(input.indexDigest)}?tag=${input.version}`,
        },
      ],
      comment: `revision ${input.revision}`,
    },
  ];
  const contains: string[] = [];
  for (const p of input.npm) {
    const id = spdxId('npm', `${p.name}-${p.version}`);
    contains.push(id);
    packages.push({
      SPDXID: id,
      name: p.name,
      versionInfo: p.version,
      supplier: 'NOASSERTION',
      downloadLocation: 'NOASSERTION',
      filesAnalyzed: false,
      licenseConcluded: 'NOASSERTION',
      licenseDeclared: licenseOf(p.license),
      copyrightText: 'NOASSERTION',
      externalRefs: [
        { referenceCategory: 'PACKAGE-MANAGER', referenceType: 'purl', referenceLocator: npmPurl(p) },
      ],
    });
  }
  for (const r of input.runtimes) {
    const id = spdxId('runtime', `${r.name}-${r.version}-${r.architecture}`);
    contains.push(id);
    packages.push({
      SPDXID: id,
      name: r.name,
      versionInfo: r.version,
      supplier: 'NOASSERTION',
      downloadLocation: 'NOASSERTION',
      filesAnalyzed: false,
      licenseConcluded: 'NOASSERTION',
      licenseDeclared: 'MIT',
      copyrightText: 'NOASSERTION',
      comment: `the Node.js runtime of the linux/${r.architecture} image`,
      externalRefs: [
        {
          referenceCategory: 'PACKAGE-MANAGER',
          referenceType: 'purl',
          referenceLocator: `pkg:npm/${r.name}@${r.version}`,
        },
      ],
    });
  }
  for (const d of input.debian) {
    const id = spdxId('deb', `${d.name}-${d.version}-${d.architecture}`);
    contains.push(id);
    packages.push({
      SPDXID: id,
      name: d.name,
      versionInfo: d.version,
      supplier: 'Organization: Debian',
      downloadLocation: 'NOASSERTION',
      filesAnalyzed: false,
      licenseConcluded: 'NOASSERTION',
      licenseDeclared: 'NOASSERTION',
      copyrightText: 'NOASSERTION',
      checksums: [{ algorithm: 'SHA256', checksumValue: d.sha256 }],
      externalRefs: [
        {
          referenceCategory: 'PACKAGE-MANAGER',
          referenceType: 'purl',
          referenceLocator: `pkg:deb/debian/${encodeURIComponent(d.name)}@${encodeURIComponent(d.version)}?arch=${d.architecture}`,
        },
      ],
    });
  }
  return {
    spdxVersion: 'SPDX-2.3',
    dataLicense: 'CC0-1.0',
    SPDXID: 'SPDXRef-DOCUMENT',
    name: `${input.image}-${input.version}`,
    documentNamespace: `urn:broker:sbom:${input.image}:${input.indexDigest}`,
    creationInfo: { created: input.created, creators: ['Tool: broker-images'] },
    packages,
    relationships: [
      { spdxElementId: 'SPDXRef-DOCUMENT', relationshipType: 'DESCRIBES', relatedSpdxElement: imageId },
      ...contains.map((id) => ({
        spdxElementId: imageId,
        relationshipType: 'CONTAINS',
        relatedSpdxElement: id,
      })),
    ],
  };
}
