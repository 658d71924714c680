import { describe, expect, it } from 'vitest';
import { imagesMain, sourceUrl } from './cli.js';

describe('sourceUrl', () => {
  it('takes a web address or an scp-style remote, never a local path', () => {
    expect(sourceUrl('https://example.org/owner/broker.git')).toBe('https://example.org/owner/broker');
    expect(sourceUrl('git@example.org:owner/broker.git')).toBe('https://example.org/owner/broker');
    expect(sourceUrl('/srv/git/broker')).toBeUndefined();
    expect(sourceUrl('file:///srv/git/broker')).toBeUndefined();
    expect(sourceUrl('https://user:token@example.org/owner/broker')).toBeUndefined();
    expect(sourceUrl(undefined)).toBeUndefined();
  });
});

describe('broker-images command line', () => {
  const run = async (argv: string[]) => {
    let out = '';
    let err = '';
    const code = await imagesMain(argv, '.', {
      out: (t) => {
        out += t;
      },
      err: (t) => {
        err += t;
      },
    });
    return { code, out, err };
  };

  it('prints help on stdout and exits 0', async () => {
    const r = await run(['--help']);
    expect(r.code).toBe(0);
    expect(r.out).toContain('Usage: broker-images');
  });

  it('refuses an unknown platform or image naming the flag, with exit 2', async () => {
    const p = await run(['--platform', 'linux/riscv64']);
    expect(p.code).toBe(2);
    expect(p.err).toContain('--platform');
    const i = await run(['--image', 'nope']);
    expect(i.code).toBe(2);
    expect(i.err).toContain('--image');
  });
});
