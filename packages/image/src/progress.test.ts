import { describe, expect, it } from 'vitest';
import { formatBytes, progressPrinter } from './progress.js';

const D = `sha256:${'ab'.repeat(32)}`;

describe('pull progress', () => {
  it('on a terminal redraws one line per layer, at most every 100 ms', () => {
    const out: string[] = [];
    let now = 0;
    const p = progressPrinter({ write: (t: string) => out.push(t), isTTY: true, columns: 100 }, () => now);
    p({ kind: 'layer', index: 0, count: 2, digest: D, bytes: 0, size: 2048, done: false });
    now = 50;
    p({ kind: 'layer', index: 0, count: 2, digest: D, bytes: 1024, size: 2048, done: false });
    now = 200;
    p({ kind: 'layer', index: 0, count: 2, digest: D, bytes: 1024, size: 2048, done: false });
    p({ kind: 'layer', index: 0, count: 2, digest: D, bytes: 2048, size: 2048, done: true });
    expect(out).toHaveLength(3);
    expect(out[1]).toMatch(/^\r\x1b\[KLayer 1\/2 sha256:abababababab \[=+>\s+\] 1.0 KiB \/ 2.0 KiB$/);
    expect(out[2]).toMatch(/\[=+\] 2.0 KiB \/ 2.0 KiB\n$/);
  });

  it('elsewhere writes a line when a layer starts and when it is done', () => {
    const out: string[] = [];
    const p = progressPrinter({ write: (t: string) => out.push(t) });
    p({ kind: 'manifest', reference: 'x.io/a:b', digest: D });
    p({ kind: 'layer', index: 0, count: 1, digest: D, bytes: 0, size: 5 * 1024 * 1024, done: false });
    p({ kind: 'layer', index: 0, count: 1, digest: D, bytes: 1024, size: 5 * 1024 * 1024, done: false });
    p({
      kind: 'layer',
      index: 0,
      count: 1,
      digest: D,
      bytes: 5 * 1024 * 1024,
      size: 5 * 1024 * 1024,
      done: true,
    });
    expect(out).toEqual([
      'Pulling x.io/a:b (manifest sha256:abababababab)\n',
      'Layer 1/1 sha256:abababababab: 5.0 MiB\n',
      'Layer 1/1 sha256:abababababab: done\n',
    ]);
    expect(formatBytes(512)).toBe('512 B');
  });
});
