// The settle rule for mounted files: a file is read only once it has stayed unchanged for the window,
// and a change (in place or by replacement) starts the window again. The clocks are the test's.
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SettledFiles } from './settle.js';

const dir = mkdtempSync(join(tmpdir(), 'kbs-settle-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('SettledFiles', () => {
  it('reads a freshly written file only after the window, and again after each change', async () => {
    const file = join(dir, 'fresh');
    const clock = { mono: 0, wall: Date.now() - 1000 };
    const settled = new SettledFiles(500, 1024, { monotonic: () => clock.mono, wall: () => clock.wall });
    writeFileSync(file, 'half');
    expect(await settled.read(file)).toEqual({ waitMs: 500 });
    clock.mono += 499;
    expect((await settled.read(file)).bytes).toBeUndefined();
    clock.mono += 1;
    expect((await settled.read(file)).bytes?.toString()).toBe('half');
    // Rewritten in place: the window starts again, even with the size and times set back.
    writeFileSync(file, 'whol');
    utimesSync(file, new Date(0), new Date(0));
    expect((await settled.read(file)).bytes).toBeUndefined();
    clock.mono += 500;
    expect((await settled.read(file)).bytes?.toString()).toBe('whol');
  });

  it('reads at once a file whose last change is older than the window', async () => {
    const file = join(dir, 'old');
    writeFileSync(file, 'value');
    const settled = new SettledFiles(500, 1024, { monotonic: () => 0, wall: () => Date.now() + 10_000 });
    expect((await settled.read(file)).bytes?.toString()).toBe('value');
  });

  it('refuses a file over the size bound before reading it', async () => {
    const file = join(dir, 'big');
    writeFileSync(file, 'x'.repeat(2048));
    const settled = new SettledFiles(500, 1024);
    await expect(settled.read(file)).rejects.toThrow(/larger than 1024 bytes/);
  });
});
