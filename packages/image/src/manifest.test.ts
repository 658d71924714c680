import { describe, expect, it } from 'vitest';
import { decodeStdBase64, parseJson } from './json.js';
import {
  type ImageIndex,
  MEDIA_TYPE,
  parseImageConfig,
  parseManifest,
  parsePlatform,
  selectPlatformManifest,
  wantedPlatforms,
} from './manifest.js';

const D = (c: string) => `sha256:${c.repeat(64)}`;
const desc = (extra: Record<string, unknown> = {}) => ({
  mediaType: MEDIA_TYPE.ociLayerGzip,
  digest: D('a'),
  size: 10,
  ...extra,
});
const enc = (o: unknown) => new TextEncoder().encode(typeof o === 'string' ? o : JSON.stringify(o));
const manifest = (extra: Record<string, unknown> = {}) => ({
  schemaVersion: 2,
  mediaType: MEDIA_TYPE.ociManifest,
  config: { mediaType: MEDIA_TYPE.ociConfig, digest: D('c'), size: 2 },
  layers: [desc()],
  ...extra,
});

describe('manifests', () => {
  it('parses OCI and Docker manifests and indexes', () => {
    expect(parseManifest(enc(manifest()))).toMatchObject({
      kind: 'manifest',
      layers: [{ digest: D('a'), size: 10 }],
    });
    const docker = manifest({ mediaType: MEDIA_TYPE.dockerManifest });
    expect(parseManifest(enc(docker)).mediaType).toBe(MEDIA_TYPE.dockerManifest);
    const { mediaType: _m, ...bare } = manifest();
    expect(parseManifest(enc(bare), `${MEDIA_TYPE.dockerManifest}; charset=utf-8`).mediaType).toBe(
      MEDIA_TYPE.dockerManifest,
    );
    expect(parseManifest(enc(bare)).mediaType).toBe(MEDIA_TYPE.ociManifest);
    const index = {
      schemaVersion: 2,
      manifests: [
        desc({ mediaType: MEDIA_TYPE.ociManifest, platform: { os: 'linux', architecture: 'amd64' } }),
      ],
    };
    expect(parseManifest(enc(index))).toMatchObject({ kind: 'index', mediaType: MEDIA_TYPE.ociIndex });
  });

  it.each([
    ['{"schemaVersion":1,"fsLayers":[]}', 'Docker schema 1 manifests are not supported'],
    [JSON.stringify(manifest({ schemaVersion: 3 })), 'unsupported manifest schemaVersion 3'],
    [JSON.stringify(manifest({ manifests: [] })), 'manifest has both layers and manifests'],
    [JSON.stringify(manifest({ mediaType: 'application/x-nope' })), 'unsupported manifest media type'],
    [
      JSON.stringify(manifest({ layers: [desc({ digest: 'sha256:xyz' })] })),
      'invalid checksum digest length',
    ],
    [JSON.stringify(manifest({ layers: [desc({ size: -1 })] })), 'size is not a non-negative integer'],
    [JSON.stringify(manifest({ layers: [desc({ size: 2 ** 60 })] })), 'size is not a non-negative integer'],
    [JSON.stringify(manifest({ layers: [desc({ urls: [1] })] })), 'urls is not a list of strings'],
    [JSON.stringify(manifest({ layers: 'x' })), 'layers is not a list'],
    [JSON.stringify(manifest({ config: null })), 'config is not an object'],
    ['{"schemaVersion":2,"schemaVersion":2,"layers":[],"config":{}}', 'duplicate key "schemaVersion"'],
    ['[]', 'manifest is not a JSON object'],
    ['{', 'unexpected end of JSON input'],
  ])('refuses %s', (text, message) => {
    expect(() => parseManifest(enc(text))).toThrow(message);
  });

  it('refuses a body whose media type contradicts the Content-Type', () => {
    expect(() => parseManifest(enc(manifest()), MEDIA_TYPE.dockerManifest)).toThrow(
      'differs from Content-Type',
    );
  });
});

describe('image configs', () => {
  const config = (extra: Record<string, unknown> = {}) =>
    enc({
      architecture: 'amd64',
      os: 'linux',
      rootfs: { type: 'layers', diff_ids: [D('d')] },
      config: { Cmd: ['/bin/sh'], Env: ['A=1'] },
      ...extra,
    });
  it('reads diff_ids and the process settings', () => {
    expect(parseImageConfig(config())).toEqual({
      os: 'linux',
      architecture: 'amd64',
      diffIds: [D('d')],
      config: { env: ['A=1'], cmd: ['/bin/sh'] },
    });
  });
  it.each([
    [{ rootfs: null }, 'missing rootfs'],
    [{ rootfs: { type: 'other', diff_ids: [] } }, 'rootfs.type is not "layers"'],
    [{ rootfs: { type: 'layers', diff_ids: ['nope'] } }, 'diff_id "nope"'],
    [{ config: { Cmd: 'sh' } }, 'config.Cmd is not a list of strings'],
  ])('refuses %j', (extra, message) => {
    expect(() => parseImageConfig(config(extra))).toThrow(message);
  });
});

describe('platforms', () => {
  it('parses os/arch[/variant]', () => {
    expect(parsePlatform('linux/arm64/v8')).toEqual({ os: 'linux', architecture: 'arm64', variant: 'v8' });
    for (const bad of ['linux', 'linux/', '/amd64', 'a/b/c/d', 'linux/arm/'])
      expect(() => parsePlatform(bad)).toThrow();
  });

  it("orders wanted platforms as containers/image's matcher", () => {
    const v = (p: ReturnType<typeof wantedPlatforms>) => p.map((x) => x.variant ?? '');
    expect(v(wantedPlatforms({ os: 'linux', architecture: 'arm', variant: 'v7' }))).toEqual([
      'v7',
      'v6',
      'v5',
      '',
    ]);
    expect(v(wantedPlatforms({ os: 'linux', architecture: 'arm64' }))).toEqual(['', 'v8']);
    expect(v(wantedPlatforms({ os: 'linux', architecture: 'arm64', variant: 'v8' }))).toEqual(['v8', '']);
    expect(v(wantedPlatforms({ os: 'linux', architecture: 'amd64' }))).toEqual(['']);
  });

  const index: ImageIndex = {
    kind: 'index',
    mediaType: MEDIA_TYPE.ociIndex,
    manifests: [
      {
        mediaType: MEDIA_TYPE.ociManifest,
        digest: D('0'),
        size: 1,
        platform: { os: 'unknown', architecture: 'unknown' },
      },
      {
        mediaType: MEDIA_TYPE.ociManifest,
        digest: D('1'),
        size: 1,
        platform: { os: 'linux', architecture: 'amd64' },
      },
      {
        mediaType: MEDIA_TYPE.ociManifest,
        digest: D('2'),
        size: 1,
        platform: { os: 'linux', architecture: 'arm', variant: 'v6' },
      },
      {
        mediaType: MEDIA_TYPE.ociManifest,
        digest: D('3'),
        size: 1,
        platform: { os: 'linux', architecture: 'arm64', variant: 'v8' },
      },
      { mediaType: MEDIA_TYPE.ociManifest, digest: D('4'), size: 1 },
    ],
  };
  it('selects the best instance, never an attestation entry', () => {
    expect(selectPlatformManifest(index, { os: 'linux', architecture: 'amd64' }).digest).toBe(D('1'));
    expect(selectPlatformManifest(index, { os: 'linux', architecture: 'arm', variant: 'v7' }).digest).toBe(
      D('2'),
    );
    expect(selectPlatformManifest(index, { os: 'linux', architecture: 'arm64' }).digest).toBe(D('3'));
    expect(() => selectPlatformManifest(index, { os: 'linux', architecture: 's390x' })).toThrow(
      'no image found in image index for architecture "s390x", variant "", OS "linux"',
    );
  });
});

describe('the strict JSON reader', () => {
  it('decodes escapes and surrogate pairs, keeps number text', () => {
    const v = parseJson('{"a":"\\u00e9\\ud83d\\ude00\\n\\/","n":-1.5e3}');
    expect(v).toEqual({
      kind: 'object',
      entries: [
        ['a', { kind: 'string', value: 'é😀\n/' }],
        ['n', { kind: 'number', value: -1500, text: '-1.5e3' }],
      ],
    });
  });
  it.each([
    ['{"a":01}', "invalid character '1' after object key:value pair"],
    ['{"a":"\u0001"}', 'in string literal'],
    ['{"a":"\\x"}', 'in string escape code'],
    ['{"a":tru}', 'in literal true'],
    ['{a:1}', 'looking for beginning of object key string'],
    ['[1,]', 'looking for beginning of value'],
    ['"abc', 'unexpected end of JSON input'],
    ['1 2', "invalid character '2' after top-level value"],
  ])('refuses %s', (text, message) => {
    expect(() => parseJson(text)).toThrow(message);
  });
  it("decodes base64 as Go's StdEncoding", () => {
    expect(Buffer.from(decodeStdBase64('aGk=')).toString()).toBe('hi');
    expect(Buffer.from(decodeStdBase64('aG\nk=')).toString()).toBe('hi');
    for (const bad of ['aGk', 'a=Gk', 'aG=k', '====', 'aGk=aGk=', 'aG!='])
      expect(() => decodeStdBase64(bad), bad).toThrow('illegal base64 data');
  });
});
