// Upstream test vectors copied into the repository: test/vectors (sources and licenses in its
// PROVENANCE.md), found by walking up from this file.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

function vectorsRoot(): string {
  for (let dir = import.meta.dirname; ; dir = dirname(dir)) {
    const candidate = join(dir, 'test', 'vectors');
    if (existsSync(join(candidate, 'PROVENANCE.md'))) return candidate;
    if (dirname(dir) === dir) throw new Error(`test/vectors not found above ${import.meta.dirname}`);
  }
}

/** The path of an upstream vector from its path under test/vectors. */
export function vector(path: string): string {
  return join(vectorsRoot(), path);
}
