// In-memory CliIO for CLI tests.
import type { CliIO } from '../cli-io.js';
import { decodeUtf8 } from '../cli-io.js';
import { InputError } from '../errors.js';

export interface MemoryIO extends CliIO {
  readonly files: Map<string, Buffer>;
  readonly modes: Map<string, number>;
  stdout: string;
  stderr: string;
}

export function memoryIO(files: Record<string, string | Buffer> = {}): MemoryIO {
  const store = new Map<string, Buffer>();
  for (const [k, v] of Object.entries(files)) store.set(k, Buffer.isBuffer(v) ? v : Buffer.from(v, 'utf8'));
  const io: MemoryIO = {
    files: store,
    modes: new Map(),
    stdout: '',
    stderr: '',
    out: (s) => {
      io.stdout += s;
    },
    err: (s) => {
      io.stderr += s;
    },
    readBytes: (path, max) => {
      const b = store.get(path);
      if (b === undefined) throw new InputError(`cannot read ${path}: ENOENT`);
      if (b.length > max) throw new InputError(`${path} is larger than ${max} bytes`);
      return b;
    },
    readFile: (path, max) => decodeUtf8(io.readBytes(path, max), path),
    writeFile: (path, data, mode) => {
      store.set(path, Buffer.from(data, 'utf8'));
      if (mode !== undefined) io.modes.set(path, mode);
    },
    mkdir: () => {},
  };
  return io;
}
