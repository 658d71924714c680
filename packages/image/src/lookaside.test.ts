import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  defaultLookasideFetcher,
  loadRegistriesD,
  lookasideSignatureUrl,
  lookasideTopLevel,
  MAX_LOOKASIDE_SIGNATURES,
  parseRegistriesDFile,
  parseSignatureList,
  readLookasideSignatures,
} from './lookaside.js';
import { parseImageReference } from './reference.js';

const DIGEST = `sha256:${'0a'.repeat(32)}`;
const ref = (s: string) => parseImageReference(s);

async function regd(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'regd-'));
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  return dir;
}

describe('registries.d', () => {
  it('merges *.yaml files, ignores other names and unknown keys; a missing folder is empty', async () => {
    const dir = await regd({
      'a.yaml': 'default-docker:\n  lookaside: file:///d\nunknown: 1\n',
      'b.yaml':
        'docker:\n  example.com/ns:\n    sigstore: https://sigs.example/ns\n    sigstore-staging: file:///w\n',
      'c.yml': 'docker:\n  ignored.example: {lookaside: file:///x}\n',
    });
    const cfg = await loadRegistriesD(dir);
    expect(cfg.defaultDocker).toEqual({ lookaside: 'file:///d' });
    expect([...cfg.docker.keys()]).toEqual(['example.com/ns']);
    expect((await loadRegistriesD(join(dir, 'nope'))).docker.size).toBe(0);
  });

  it('the same namespace or default-docker in two files is an error', async () => {
    await expect(
      loadRegistriesD(
        await regd({
          'a.yaml': 'default-docker: {lookaside: file:///a}\n',
          'b.yaml': 'default-docker: {lookaside: file:///b}\n',
        }),
      ),
    ).rejects.toThrow(/"default-docker" defined both in ".*a.yaml" and ".*b.yaml"/);
    await expect(
      loadRegistriesD(
        await regd({
          'a.yaml': 'docker: {x.io: {lookaside: file:///a}}\n',
          'b.yaml': 'docker: {x.io: {lookaside: file:///b}}\n',
        }),
      ),
    ).rejects.toThrow(/"docker" namespace "x.io" defined both in/);
  });

  it.each([
    ['not YAML', 'docker: [\n'],
    ['a list at the top', '- a\n'],
    ['docker as a list', 'docker: [a]\n'],
    ['a number as URL', 'default-docker: {lookaside: 3}\n'],
    ['a bool that is not one', 'default-docker: {use-sigstore-attachments: "yes"}\n'],
  ])('%s is an error', (_what, text) => {
    expect(() => parseRegistriesDFile(text, 'f.yaml')).toThrow();
  });

  it('an alias bomb is refused', () => {
    const bomb = [
      'a: &a [x, x, x, x, x, x, x, x, x, x]',
      ...Array.from({ length: 12 }, (_, i) => {
        const prev = i === 0 ? 'a' : `b${i - 1}`;
        return `b${i}: &b${i} [*${prev}, *${prev}, *${prev}, *${prev}, *${prev}, *${prev}, *${prev}, *${prev}, *${prev}, *${prev}]`;
      }),
    ].join('\n');
    expect(() => parseRegistriesDFile(bomb, 'bomb.yaml')).toThrow();
  });

  it('the most specific scope with a read URL wins; staging keys are for writing only', () => {
    const cfg = {
      defaultDocker: { lookaside: 'file:///default' },
      docker: new Map([
        ['r.io/ns/app:v1', { lookasideStaging: 'file:///staging-only' }],
        ['r.io/ns', { sigstore: 'file:///ns-old', lookaside: 'file:///ns' }],
        ['r.io', { lookaside: 'file:///host' }],
        ['*.example.com', { lookaside: 'file:///wild' }],
      ]),
    };
    expect(lookasideTopLevel(cfg, ref('r.io/ns/app:v1'))).toBe('file:///ns');
    expect(lookasideTopLevel(cfg, ref('r.io/ns/app:v1'), true)).toBe('file:///staging-only');
    expect(lookasideTopLevel(cfg, ref('r.io/other/app:v1'))).toBe('file:///host');
    expect(lookasideTopLevel(cfg, ref('a.example.com/x:1'))).toBe('file:///wild');
    expect(lookasideTopLevel(cfg, ref('busybox'))).toBe('file:///default');
    expect(lookasideTopLevel({ docker: new Map() }, ref('busybox'))).toBeUndefined();
  });

  it('signature URLs: <base>/<path>@<algo>=<hex>/signature-N', () => {
    expect(lookasideSignatureUrl('file:///var/sigs/', ref('busybox'), DIGEST, 1).href).toBe(
      `file:///var/sigs/library/busybox@sha256=${'0a'.repeat(32)}/signature-1`,
    );
    expect(lookasideSignatureUrl('https://s.example/a', ref('r.io:5000/ns/app:v1'), DIGEST, 3).href).toBe(
      `https://s.example/a/ns/app@sha256=${'0a'.repeat(32)}/signature-3`,
    );
  });
});

describe('reading a lookaside store', () => {
  it('reads signature-1.. until one is missing; a blob that is no signature is an error', async () => {
    const root = await mkdtemp(join(tmpdir(), 'sigs-'));
    const dir = join(root, `ns/app@sha256=${'0a'.repeat(32)}`);
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'signature-1'), Buffer.from([0xa3, 0x01]));
    await writeFile(join(dir, 'signature-2'), Buffer.from([0x90, 0x0d]));
    await writeFile(join(dir, 'signature-4'), Buffer.from([0x90, 0x0d]));
    const base = pathToFileURL(root).href;
    const fetcher = defaultLookasideFetcher();
    const got = await readLookasideSignatures(base, ref('r.io/ns/app:v1'), DIGEST, fetcher);
    expect(got.map((s) => s.format)).toEqual(['simple-signing', 'simple-signing']);
    await writeFile(join(dir, 'signature-3'), 'not a signature');
    await expect(readLookasideSignatures(base, ref('r.io/ns/app:v1'), DIGEST, fetcher)).rejects.toThrow(
      /parsing signature ".*signature-3": unrecognized signature format/,
    );
  });

  it('more than 128 signatures is an error; other schemes are refused', async () => {
    let calls = 0;
    const endless = async () => {
      calls++;
      return new Uint8Array([0xa3, 0x01]);
    };
    await expect(readLookasideSignatures('file:///x', ref('r.io/a:b'), DIGEST, endless)).rejects.toThrow(
      /server provided 128 signatures/,
    );
    expect(calls).toBe(MAX_LOOKASIDE_SIGNATURES);
    await expect(defaultLookasideFetcher()(new URL('ftp://x/y'))).rejects.toThrow(/Unsupported scheme/);
  });
});

describe('the registry signature API list', () => {
  it('keeps schemaVersion 2 "atomic" entries only', () => {
    const body = Buffer.from(
      JSON.stringify({
        signatures: [
          { schemaVersion: 2, type: 'atomic', name: 'a', content: Buffer.from([0xa3, 1]).toString('base64') },
          { schemaVersion: 1, type: 'atomic', content: 'AA==' },
          { schemaVersion: 2, type: 'other', content: 'AA==' },
        ],
      }),
    );
    expect(parseSignatureList(body)).toEqual([{ format: 'simple-signing', blob: new Uint8Array([0xa3, 1]) }]);
    expect(parseSignatureList(Buffer.from('{"signatures":null}'))).toEqual([]);
  });

  it.each(['', '[]', '{"signatures":{}}', '{"signatures":[{"content":"!!"}]}', '{"signatures":[]} x'])(
    '%j is refused',
    (text) => {
      expect(() => parseSignatureList(Buffer.from(text))).toThrow();
    },
  );
});
