// Upstream test vectors copied into the repository: test/vectors (sources and licenses in its PROVENANCE.md).
import { join } from 'node:path';

/** The path of an upstream vector from its path under test/vectors, e.g. `trustee/tdx/tcbInfo.json`. */
export function vector(path: string): string {
  return join(import.meta.dirname, '..', 'vectors', path);
}
