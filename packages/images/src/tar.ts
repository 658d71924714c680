// Reading a whole tar archive in memory (a Debian package's data, an npm tarball): trusted build inputs
// whose size the callers bound before they get here.
import tar, { type Header } from 'tar-stream';

export interface TarEntry {
  readonly header: Header;
  /** The entry's bytes (empty for folders and links). */
  readonly data: Buffer;
}

/** Every entry of the uncompressed tar `bytes`, in order. */
export async function tarEntries(bytes: Buffer): Promise<TarEntry[]> {
  const entries: TarEntry[] = [];
  const extract = tar.extract();
  const done = new Promise<void>((resolve, reject) => {
    extract.on('entry', (header, stream, next) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: unknown) => {
        chunks.push(c as Buffer);
      });
      stream.on('end', () => {
        entries.push({ header, data: Buffer.concat(chunks) });
        next();
      });
      stream.on('error', reject);
    });
    extract.on('finish', resolve);
    extract.on('error', reject);
  });
  extract.end(bytes);
  await done;
  return entries;
}
