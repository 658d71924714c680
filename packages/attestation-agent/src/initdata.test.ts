import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Attester } from '@broker/attester';
import { SampleAttester } from '@broker/attester';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InitDataBindingFailed } from './errors.js';
import { bindInitData, loadInitDataToml, parseInitDataDigestArgument } from './initdata.js';

const TOML =
  'algorithm = "sha384"\nversion = "0.1.0"\n\n[data]\n"aa.toml" = \'\'\'\n[token_configs.kbs]\nurl = "http://k"\n\'\'\'\n';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aa-initdata-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('--initdata-toml', () => {
  it('digests the exact file bytes with the algorithm the file names', async () => {
    const path = join(dir, 'initdata.toml');
    await writeFile(path, TOML);
    const loaded = await loadInitDataToml(path);
    expect(loaded.toml).toBe(TOML);
    expect(loaded.initData.algorithm).toBe('sha384');
    expect(loaded.digest).toEqual(createHash('sha384').update(TOML).digest());
  });

  it.each([
    ['not TOML', '[data\n', /not valid TOML/],
    ['an unknown algorithm', 'algorithm = "sha-256"\nversion = "0.1.0"\n[data]\n', /unsupported algorithm/],
    ['no data', 'algorithm = "sha256"\nversion = "0.1.0"\n', /missing field `data`/],
    [
      'a non-string data value',
      'algorithm = "sha256"\nversion = "0.1.0"\n[data]\nx = 1\n',
      /must be a string/,
    ],
  ])('refuses %s', async (_name, text, message) => {
    const path = join(dir, 'bad.toml');
    await writeFile(path, text);
    await expect(loadInitDataToml(path)).rejects.toThrow(InitDataBindingFailed);
    await expect(loadInitDataToml(path)).rejects.toThrow(message);
  });

  it('refuses a missing file and one over 1 MiB', async () => {
    await expect(loadInitDataToml(join(dir, 'none.toml'))).rejects.toThrow(/read initdata toml file/);
    const big = join(dir, 'big.toml');
    await writeFile(big, `${TOML}# ${'x'.repeat(1024 * 1024)}\n`);
    await expect(loadInitDataToml(big)).rejects.toThrow(/larger than/);
  });
});

describe('--initdata-digest', () => {
  it('decodes standard base64', () => {
    const digest = createHash('sha256').update('x').digest();
    expect(parseInitDataDigestArgument(digest.toString('base64'))).toEqual(digest);
  });

  it.each([
    ['URL-safe base64', Buffer.alloc(32, 0xfb).toString('base64url')],
    ['missing padding', 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'],
    ['garbage', '!!!!'],
    ['empty', ''],
    ['oversize', Buffer.alloc(300).toString('base64')],
    ['absurdly long', 'A'.repeat(1_000_000)],
  ])('refuses %s', (_name, arg) => {
    expect(() => parseInitDataDigestArgument(arg)).toThrow(InitDataBindingFailed);
  });
});

describe('binding', () => {
  const digest = createHash('sha256').update(TOML).digest();

  it('skips TEEs that cannot bind, with a log line (sample)', async () => {
    const lines: string[] = [];
    expect(await bindInitData(new SampleAttester(), digest, { info: (m) => lines.push(m) })).toBe(
      'unsupported',
    );
    expect(lines).toEqual(['Platform sample does not support initdata checking. Jumping.']);
  });

  it('passes the digest to the attester and reports a match', async () => {
    const got: Buffer[] = [];
    const tdx: Attester = {
      tee: 'tdx',
      getEvidence: async () => ({}),
      bindInitData: async (d) => {
        got.push(Buffer.from(d));
      },
    };
    expect(await bindInitData(tdx, digest)).toBe('bound');
    expect(got).toEqual([digest]);
  });

  it('fails closed when the TEE disagrees', async () => {
    const tdx: Attester = {
      tee: 'tdx',
      getEvidence: async () => ({}),
      bindInitData: async () => {
        throw new Error('Init data does not match!');
      },
    };
    await expect(bindInitData(tdx, digest)).rejects.toThrow(
      'The initdata supplied by the parameter is inconsistent with that of the current platform: Init data does not match!',
    );
  });
});
