import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import {
  InvalidPolicyError,
  loadPolicyFile,
  type Policy,
  parsePolicy,
  requirementsForImage,
} from './policy.js';
import { parseImageReference, policyIdentity, policyNamespaces } from './reference.js';

const FIXTURES = vector('');

function policyWith(requirement: unknown): string {
  return JSON.stringify({ default: [requirement] });
}

describe('policy.json top level', () => {
  it('needs default; transports is optional', () => {
    expect(parsePolicy('{"default":[{"type":"reject"}]}').transports.size).toBe(0);
    expect(() => parsePolicy('{"transports":{}}')).toThrow('Default policy is missing');
    expect(() => parsePolicy('{}')).toThrow('Default policy is missing');
  });

  it.each([
    ['{"default":[{"type":"reject"}],"unexpected":1}', 'Unknown key "unexpected"'],
    ['{"default":[{"type":"reject"}],"default":[{"type":"reject"}]}', 'Duplicate key "default"'],
    ['{"default":[{"type":"reject"}],"transports":{},"transports":{}}', 'Duplicate key "transports"'],
    ['{"default":[]}', 'List of verification policy requirements must not be empty'],
    ['{"default":null}', 'List of verification policy requirements must not be empty'],
    ['{"default":1}', 'json: cannot unmarshal number into Go value of type []json.RawMessage'],
    ['{"default":{}}', 'json: cannot unmarshal object into Go value of type []json.RawMessage'],
    ['{"default":[{"type":"reject"}],"transports":1}', 'JSON object expected, got 1'],
    ['{"default":[{"type":"reject"}],"transports":[]}', "JSON object expected, got json.Delim('[')"],
    ['{"default":[{"type":"reject"}],"transports":null}', 'JSON object expected, got <nil>'],
    ['{"default":[{"type":"reject"}]} {}', "invalid character '{' after top-level value"],
    ['{"default":[{"type":"reject"}]', 'unexpected end of JSON input'],
    ['[]', "JSON object expected, got json.Delim('[')"],
    ['', 'unexpected end of JSON input'],
    [
      '{"default":[{"type":"reject"}],"transports":{"docker":{"a":[{"type":"reject"}],"a":[{"type":"reject"}]}}}',
      'Duplicate key "a"',
    ],
    [
      '{"default":[{"type":"reject"}],"transports":{"docker":{"x":[]}}}',
      'List of verification policy requirements must not be empty',
    ],
    ['{"default":[{"type":"reject"}],"transports":{"docker":{},"docker":{}}}', 'Duplicate key "docker"'],
  ])('%s → %s', (json, message) => {
    expect(() => parsePolicy(json)).toThrow(message);
  });

  it('validates scopes of path transports as unknown keys', () => {
    const p = (scope: string, transport = 'dir') =>
      parsePolicy(
        JSON.stringify({
          default: [{ type: 'reject' }],
          transports: { [transport]: { [scope]: [{ type: 'reject' }] } },
        }),
      );
    expect(p('/abs/path').transports.get('dir')?.has('/abs/path')).toBe(true);
    expect(() => p('relative')).toThrow('Unknown key "relative"');
    expect(() => p('/')).toThrow('Unknown key "/"');
    expect(() => p('/a/../b')).toThrow('Unknown key "/a/../b"');
    expect(() => p('/a/')).toThrow('Unknown key "/a/"');
    expect(() => p('relative', 'oci')).toThrow('Unknown key "relative"');
    // docker accepts any string, and unknown transports are not validated.
    expect(p('not a valid ref!', 'docker').transports.get('docker')?.size).toBe(1);
    expect(p('whatever', 'atomic').transports.get('atomic')?.size).toBe(1);
  });
});

describe('requirements', () => {
  it.each([
    [{ type: 'insecureAcceptAnything', x: 1 }, 'Unknown key "x"'],
    [{ type: 'reject', type2: 1 }, 'Unknown key "type2"'],
    [{ type: 'unknown' }, 'Unknown policy requirement type "unknown"'],
    [{}, 'Unknown policy requirement type ""'],
    [{ Type: 'reject' }, 'Unknown key "Type"'],
    ['reject', 'json: cannot unmarshal string into Go value of type signature.prCommon'],
    [{ type: 1 }, 'json: cannot unmarshal number into Go struct field prCommon.type of type string'],
    [{ type: 'signedBy', keyPath: '/k' }, 'invalid keyType ""'],
    [{ type: 'signedBy', keyType: 'bogus', keyPath: '/k' }, 'Unrecognized keyType value "bogus"'],
    [
      { type: 'signedBy', keyType: 'GPGKeys' },
      'Exactly one of keyPath, keyPaths and keyData must be specified, none of them present',
    ],
    [{ type: 'signedBy', keyType: 'GPGKeys', keyPath: '/k', keyData: 'YQ==' }, 'more than one present'],
    [{ type: 'signedBy', keyType: 'GPGKeys', keyData: 'not base64!' }, 'illegal base64 data at input byte'],
    [{ type: 'signedBaseLayer' }, 'Key "baseLayerIdentity" missing in a JSON object'],
    [
      { type: 'sigstoreSigned' },
      'exactly one of keyPath, keyPaths, keyData, keyDatas, fulcio, and pki must be specified',
    ],
    [
      { type: 'sigstoreSigned', keyPath: '' },
      'exactly one of keyPath, keyPaths, keyData, keyDatas, fulcio, and pki',
    ],
    [
      { type: 'sigstoreSigned', keyPath: '/a', keyData: 'YQ==' },
      'exactly one of keyPath, keyPaths, keyData, keyDatas',
    ],
    [{ type: 'sigstoreSigned', keyPaths: [] }, '"keyPaths" contains no entries'],
    [{ type: 'sigstoreSigned', keyPaths: null }, '"keyPaths" contains no entries'],
    [{ type: 'sigstoreSigned', keyDatas: [] }, '"keyDatas" contains no entries'],
    [{ type: 'sigstoreSigned', keyPaths: [], bogus: 1 }, 'Unknown key "bogus"'],
    [{ type: 'sigstoreSigned', keyPath: 5 }, 'json: cannot unmarshal number into Go value of type string'],
    [{ type: 'sigstoreSigned', keyData: 'YQ' }, 'illegal base64 data at input byte 0'],
    [{ type: 'sigstoreSigned', keyPath: '/k', fulcio: {} }, '"fulcio" not supported'],
    [
      { type: 'sigstoreSigned', keyPath: '/k', rekorPublicKeyPath: '/r' },
      '"rekorPublicKeyPath" not supported',
    ],
    [
      { type: 'sigstoreSigned', keyPath: '/k', signedIdentity: null },
      'Unknown policy reference match type ""',
    ],
    [
      { type: 'sigstoreSigned', keyPath: '/k', signedIdentity: { type: 'nope' } },
      'Unknown policy reference match type "nope"',
    ],
    [
      { type: 'sigstoreSigned', keyPath: '/k', signedIdentity: { type: 'matchExact', x: 1 } },
      'Unknown key "x"',
    ],
    [
      { type: 'sigstoreSigned', keyPath: '/k', signedIdentity: { type: 'exactReference' } },
      'Key "dockerReference" missing',
    ],
    [
      {
        type: 'sigstoreSigned',
        keyPath: '/k',
        signedIdentity: { type: 'exactReference', dockerReference: 'busybox' },
      },
      'dockerReference "busybox" contains neither a tag nor digest',
    ],
    [
      {
        type: 'sigstoreSigned',
        keyPath: '/k',
        signedIdentity: { type: 'exactReference', dockerReference: 'UPPER:x' },
      },
      'Invalid format of dockerReference "UPPER:x": invalid reference format: repository name must be lowercase',
    ],
    [
      {
        type: 'sigstoreSigned',
        keyPath: '/k',
        signedIdentity: { type: 'exactRepository', dockerRepository: '' },
      },
      'Invalid format of dockerRepository ""',
    ],
    [
      {
        type: 'sigstoreSigned',
        keyPath: '/k',
        signedIdentity: { type: 'remapIdentity', prefix: 'example.com/', signedPrefix: 'x.com' },
      },
      'prefix "example.com/" is not valid',
    ],
    [
      {
        type: 'sigstoreSigned',
        keyPath: '/k',
        signedIdentity: { type: 'remapIdentity', prefix: 'x.com', signedPrefix: 'example.com/repo:tag' },
      },
      'prefix "example.com/repo:tag" is not valid',
    ],
    [
      {
        type: 'sigstoreSigned',
        keyPath: '/k',
        signedIdentity: { type: 'remapIdentity', prefix: 'repo_with_underscores', signedPrefix: 'x.com' },
      },
      'prefix "repo_with_underscores" is not valid',
    ],
  ])('%j → %s', (req, message) => {
    expect(() => parsePolicy(policyWith(req))).toThrow(message);
  });

  it('parses every sigstoreSigned key source and identity', () => {
    const reqs = [
      { type: 'sigstoreSigned', keyPath: '/k' },
      { type: 'sigstoreSigned', keyPaths: ['/a', '/b'] },
      { type: 'sigstoreSigned', keyData: Buffer.from('pem').toString('base64') },
      { type: 'sigstoreSigned', keyDatas: ['YQ==', 'Yg=='] },
      { type: 'sigstoreSigned', keyPath: '', keyData: 'YQ==' },
      {
        type: 'sigstoreSigned',
        keyPath: 'kbs:///default/k/pub-key',
        signedIdentity: { type: 'matchRepository' },
      },
      { type: 'sigstoreSigned', keyPath: '/k', signedIdentity: { type: 'matchExact' } },
      {
        type: 'sigstoreSigned',
        keyPath: '/k',
        signedIdentity: { type: 'exactRepository', dockerRepository: 'busybox' },
      },
      {
        type: 'sigstoreSigned',
        keyPath: '/k',
        signedIdentity: { type: 'exactReference', dockerReference: 'busybox:1' },
      },
      {
        type: 'sigstoreSigned',
        keyPath: '/k',
        signedIdentity: {
          type: 'remapIdentity',
          prefix: 'private-mirror:5000/vendor-mirror',
          signedPrefix: 'vendor.example.com',
        },
      },
      { type: 'signedBy', keyType: 'GPGKeys', keyPaths: ['/a'] },
      {
        type: 'signedBaseLayer',
        baseLayerIdentity: { type: 'exactRepository', dockerRepository: 'x.com/r' },
      },
    ];
    const p = parsePolicy(JSON.stringify({ default: reqs }));
    expect(p.default.map((r) => r.type)).toEqual(reqs.map((r) => r.type));
    const [first, second, third, fourth, fifth] = p.default;
    // Without signedIdentity: image-rs checks no identity (the default); containers/image means matchRepoDigestOrExact.
    expect(first).toEqual({
      type: 'sigstoreSigned',
      keySource: { kind: 'keyPath', path: '/k' },
      signedIdentity: { type: 'unchecked' },
    });
    expect(
      parsePolicy(JSON.stringify({ default: reqs }), { semantics: 'containers-image' }).default[0],
    ).toEqual({
      type: 'sigstoreSigned',
      keySource: { kind: 'keyPath', path: '/k' },
      signedIdentity: { type: 'matchRepoDigestOrExact' },
    });
    expect(second).toMatchObject({ keySource: { kind: 'keyPaths', paths: ['/a', '/b'] } });
    expect(third).toMatchObject({ keySource: { kind: 'keyData', data: new Uint8Array(Buffer.from('pem')) } });
    expect(fourth).toMatchObject({ keySource: { kind: 'keyDatas' } });
    expect(fifth).toMatchObject({ keySource: { kind: 'keyData' } });
  });

  it('refuses deep nesting and non-JSON bytes', () => {
    expect(() => parsePolicy(`{"default":${'['.repeat(200)}`)).toThrow('nested deeper');
    expect(() => parsePolicy(new Uint8Array([0xff, 0xfe, 0x00]))).toThrow();
    expect(() => parsePolicy('{"default":[{"type":"reject"}],"x\\q":1}')).toThrow('invalid character');
  });
});

describe('upstream fixtures', () => {
  it('parses image-rs policy.json (signedBy, remapIdentity with a short-name prefix, a dir scope)', async () => {
    const p = await loadPolicyFile(join(FIXTURES, 'guest-components/image-policy/policy.json'));
    expect(p.default).toEqual([{ type: 'reject' }]);
    expect([...(p.transports.get('docker')?.keys() ?? [])]).toEqual([
      'example.com/playground',
      'example.com/hardened',
      'registry.access.redhat.com',
      '*.access.redhat.com',
      '*.redhat.com',
      '*.com',
    ]);
    expect(p.transports.get('dir')?.get('')).toEqual([{ type: 'insecureAcceptAnything' }]);
  });

  it('parses the sample KBC policy, its rule without signedIdentity as each side means it', async () => {
    const file = join(FIXTURES, 'guest-components/image-policy/sample_kbc-policy.json');
    for (const [semantics, identity] of [
      ['image-rs', 'unchecked'],
      ['containers-image', 'matchRepoDigestOrExact'],
    ] as const) {
      const p = await loadPolicyFile(file, { semantics });
      expect(
        p.transports.get('docker')?.get('quay.io/kata-containers/confidential-containers:cosign-signed'),
      ).toEqual([
        {
          type: 'sigstoreSigned',
          keySource: { kind: 'keyPath', path: '/run/image-security/cosign/cosign.pub' },
          signedIdentity: { type: identity },
        },
      ]);
    }
  });

  it('keyData: PEM text under image-rs semantics (the default), base64 under both', () => {
    const pem = '-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n';
    const policy = (keyData: string) =>
      JSON.stringify({
        default: [{ type: 'sigstoreSigned', keyData, signedIdentity: { type: 'matchRepository' } }],
      });
    for (const text of [pem, Buffer.from(pem).toString('base64')]) {
      expect(parsePolicy(policy(text)).default[0]).toMatchObject({
        keySource: { kind: 'keyData', data: new Uint8Array(Buffer.from(pem)) },
      });
    }
    expect(() => parsePolicy(policy(pem), { semantics: 'containers-image' })).toThrow(InvalidPolicyError);
    // signedBy's keyData is base64 in image-rs too.
    expect(() =>
      parsePolicy(JSON.stringify({ default: [{ type: 'signedBy', keyType: 'GPGKeys', keyData: pem }] })),
    ).toThrow(InvalidPolicyError);
  });

  it('wraps file errors with the file name', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'policy-'));
    const f = join(dir, 'p.json');
    await writeFile(f, '{"default":[]}');
    await expect(loadPolicyFile(f)).rejects.toThrow(
      `invalid policy in "${f}": List of verification policy requirements must not be empty`,
    );
  });
});

describe('scope selection', () => {
  // Each scope gets a distinct requirement list so the chosen one can be told apart.
  const scopes = [
    '',
    'unmatched',
    'deep.com',
    '*.very.deep.com',
    '*.deep.com',
    'deep.com/n1',
    'deep.com/n1/n2',
    'deep.com/n1/n2/n3',
    'deep.com/n1/n2/n3/repo',
    'deep.com/n1/n2/n3/repo:tag2',
  ];
  const policy: Policy = parsePolicy(
    JSON.stringify({
      default: [{ type: 'reject' }],
      transports: {
        docker: Object.fromEntries(scopes.map((s) => [s, [{ type: 'sigstoreSigned', keyPath: `/${s}` }]])),
        atomic: { unmatched: [{ type: 'reject' }] },
      },
    }),
  );
  const choose = (transport: string, input: string) => {
    const r = parseImageReference(input);
    return requirementsForImage(policy, transport, policyIdentity(r), policyNamespaces(r)).scope;
  };
  it.each([
    ['deep.com/n1/n2/n3/repo:tag2', 'deep.com/n1/n2/n3/repo:tag2'],
    ['deep.com/n1/n2/n3/repo:nottag2', 'deep.com/n1/n2/n3/repo'],
    ['deep.com/n1/n2/n3/notrepo:tag2', 'deep.com/n1/n2/n3'],
    ['deep.com/n1/n2/notn3/repo:tag2', 'deep.com/n1/n2'],
    ['deep.com/n1/notn2/n3/repo:tag2', 'deep.com/n1'],
    ['deep.com/notn1/n2/n3/repo:tag2', 'deep.com'],
    ['deep.com:5000/notn1/repo:tag2', ''],
    ['very.deep.com/n1/n2/n3/repo:tag2', '*.deep.com'],
    ['not.very.deep.com/n1/n2/n3/repo:tag2', '*.very.deep.com'],
    ['this.does-not/match:anything', ''],
  ])('docker %s → %s', (input, scope) => {
    expect(choose('docker', input)).toBe(scope);
  });
  it('falls back to default', () => {
    expect(choose('atomic', 'this.does-not/match:anything')).toBeNull();
    expect(choose('dir', 'what/ever')).toBeNull();
  });
  it('a wildcard does not match the bare domain, and host without port is never a candidate', () => {
    const p = parsePolicy(
      JSON.stringify({
        default: [{ type: 'reject' }],
        transports: {
          docker: {
            '*.example.com': [{ type: 'insecureAcceptAnything' }],
            'reg.io': [{ type: 'insecureAcceptAnything' }],
          },
        },
      }),
    );
    const pick = (s: string) => {
      const r = parseImageReference(s);
      return requirementsForImage(p, 'docker', policyIdentity(r), policyNamespaces(r)).scope;
    };
    expect(pick('example.com/a:b')).toBeNull();
    expect(pick('a.example.com/a:b')).toBe('*.example.com');
    expect(pick('reg.io:443/a:b')).toBeNull();
    expect(pick('reg.io/a:b')).toBe('reg.io');
  });
});
