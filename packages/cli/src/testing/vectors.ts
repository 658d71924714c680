// Upstream test vectors copied into the repository: test/vectors (sources and licenses in its
// PROVENANCE.md). Found by walking up from this file, so a bench bundled into dist/ finds them too.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

function vectorsRoot(): string {
  for (let dir = import.meta.dirname; ; dir = dirname(dir)) {
    const candidate = join(dir, 'test', 'vectors');
    if (existsSync(join(candidate, 'PROVENANCE.md'))) return candidate;
    if (dirname(dir) === dir) throw new Error(`test/vectors not found above ${import.meta.dirname}`);
  }
}

/** The path of an upstream vector from its path under test/vectors, e.g. `trustee/tdx/tcbInfo.json`. */
export function vector(path: string): string {
  return join(vectorsRoot(), path);
}
