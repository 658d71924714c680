import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { InitDataError } from './errors.js';
import {
  decodeInitDataAnnotation,
  encodeInitDataAnnotation,
  initDataClaims,
  initDataDigest,
  initDataReportField,
  parseInitData,
  pcr8FromInitDataDigest,
} from './initdata.js';

// Digests below were computed outside Node (sha256sum/sha384sum and Python hashlib).
const SMALL =
  'version = "0.1.0"\nalgorithm = "sha256"\n[data]\n"aa.toml" = """\n[token_configs]\n[token_configs.kbs]\nurl = "http://10.0.0.1:8080"\n"""\n';
const SMALL_SHA256 = '8cac7334faf71539ed91746aa2d3feb56c45260819c0b538279cd99517c71912';
const SMALL_SHA384 =
  '73ae17e06c43bdfaa02fe4a86d4a611968bb224588c109a0dde9870f2f61dbf0f54fc66e9f0263d2e6c12a886ea79a2d';
const SMALL_PCR8 = '4ad50b4e0008a0d57a7c45dd21f232eb4a65a6559e674280d5a848e7ede48bd7';
const SMALL_PCR8_FROM_SHA384 = 'f14e76240992c59d61180cde94ba67c367d48aeed40385919508f77f23583a4a';

const FULL = `algorithm = "sha256"
version = "0.1.0"

[data]
"aa.toml" = '''
[token_configs]
[token_configs.coco_as]
url = "https://kbs.example:8080"

[token_configs.kbs]
url = "https://kbs.example:8080"
cert = """
-----BEGIN CERTIFICATE-----
MIIB
-----END CERTIFICATE-----
"""
'''

"cdh.toml" = '''
socket = 'unix:///run/confidential-containers/cdh.sock'
credentials = []

[kbc]
name = "cc_kbc"
url = "https://kbs.example:8080"

[image]
image_security_policy_uri = "kbs:///default/security-policy/test"
'''

"policy.rego" = '''
package agent_policy

default ExecProcessRequest := false
default ReadStreamRequest := true

policy_data := {
  "containers": [{"OCI": {"Process": {"Args": ["/bin/sh"]}}}],
  "common": {"cpath": "/run/kata-containers"}
}
'''
`;

describe('parseInitData', () => {
  it('parses the seed-shaped document', () => {
    const init = parseInitData(FULL);
    expect(init.version).toBe('0.1.0');
    expect(init.algorithm).toBe('sha256');
    expect(Object.keys(init.data)).toEqual(['aa.toml', 'cdh.toml', 'policy.rego']);
    expect(init.data['cdh.toml']).toContain('cc_kbc');
    expect(parseInitData(Buffer.from(FULL))).toEqual(init);
  });

  it.each(['sha256', 'sha384', 'sha512'])('accepts algorithm %s', (alg) => {
    expect(parseInitData(`version = "0.1.0"\nalgorithm = "${alg}"\n[data]\n`).algorithm).toBe(alg);
  });

  it('ignores unknown top-level keys, as serde does', () => {
    expect(
      parseInitData('version = "0.1.0"\nalgorithm = "sha384"\nextra = 1\n[data]\nk = "v"\n').data,
    ).toEqual({ k: 'v' });
  });

  it('keeps a "__proto__" data key as data', () => {
    const init = parseInitData('version = "0.1.0"\nalgorithm = "sha256"\n[data]\n"__proto__" = "x"\n');
    expect(Object.getPrototypeOf(init.data)).toBe(Object.prototype);
    expect(Object.hasOwn(init.data, '__proto__')).toBe(true);
  });

  it.each([
    ['bad TOML', 'version = "0.1.0"\nalgorithm = \n', /not valid TOML/],
    [
      'a duplicate key',
      'version = "0.1.0"\nversion = "0.1.0"\nalgorithm = "sha256"\n[data]\n',
      /not valid TOML/,
    ],
    ['missing version', 'algorithm = "sha256"\n[data]\n', /missing field `version`/],
    ['version 0.2.0', 'version = "0.2.0"\nalgorithm = "sha256"\n[data]\n', /unsupported version "0.2.0"/],
    ['numeric version', 'version = 1\nalgorithm = "sha256"\n[data]\n', /unsupported version 1/],
    ['missing algorithm', 'version = "0.1.0"\n[data]\n', /missing field `algorithm`/],
    [
      'sha-256 spelling',
      'version = "0.1.0"\nalgorithm = "sha-256"\n[data]\n',
      /unsupported algorithm "sha-256"/,
    ],
    ['sm3', 'version = "0.1.0"\nalgorithm = "sm3"\n[data]\n', /unsupported algorithm "sm3"/],
    ['SHA256 uppercase', 'version = "0.1.0"\nalgorithm = "SHA256"\n[data]\n', /unsupported algorithm/],
    ['missing data', 'version = "0.1.0"\nalgorithm = "sha256"\n', /missing field `data`/],
    ['data not a table', 'version = "0.1.0"\nalgorithm = "sha256"\ndata = "x"\n', /must be a table/],
    [
      'a non-string data value',
      'version = "0.1.0"\nalgorithm = "sha256"\n[data]\nn = 1\n',
      /must be a string/,
    ],
    [
      'a nested data table',
      'version = "0.1.0"\nalgorithm = "sha256"\n[data.sub]\nn = "1"\n',
      /must be a string/,
    ],
    [
      'deeply nested arrays',
      `version = "0.1.0"\nalgorithm = "sha256"\nx = ${'['.repeat(100)}${']'.repeat(100)}\n[data]\n`,
      /not valid TOML/,
    ],
  ])('rejects %s', (_n, text, message) => {
    expect(() => parseInitData(text)).toThrow(InitDataError);
    expect(() => parseInitData(text)).toThrow(message);
  });

  it('rejects invalid UTF-8 and oversize documents', () => {
    expect(() => parseInitData(Buffer.from([0x76, 0xff, 0x0a]))).toThrow(/UTF-8/);
    expect(() => parseInitData(`${SMALL}#${'x'.repeat(2 * 1024 * 1024)}\n`)).toThrow(/larger than/);
    expect(() => parseInitData(SMALL, 10)).toThrow(/larger than 10 bytes/);
  });
});

describe('initdata digests', () => {
  it('hashes the exact bytes with the declared algorithm', () => {
    expect(initDataDigest(SMALL, 'sha256').toString('hex')).toBe(SMALL_SHA256);
    expect(initDataDigest(Buffer.from(SMALL), 'sha384').toString('hex')).toBe(SMALL_SHA384);
    expect(initDataDigest(SMALL, 'sha512')).toHaveLength(64);
    // Not canonicalized: a trailing newline changes the digest.
    expect(initDataDigest(`${SMALL}\n`, 'sha256').toString('hex')).not.toBe(SMALL_SHA256);
  });

  it('PCR8 = sha256(32 zero bytes ‖ sha256 digest)', () => {
    expect(pcr8FromInitDataDigest(Buffer.from(SMALL_SHA256, 'hex')).toString('hex')).toBe(SMALL_PCR8);
  });

  it('PCR8 refuses non-sha256 digests unless truncation (the peer-pod guest behaviour) is asked for', () => {
    const d384 = Buffer.from(SMALL_SHA384, 'hex');
    expect(() => pcr8FromInitDataDigest(d384)).toThrow(/32-byte/);
    expect(pcr8FromInitDataDigest(d384, { truncate: true }).toString('hex')).toBe(SMALL_PCR8_FROM_SHA384);
    expect(() => pcr8FromInitDataDigest(Buffer.alloc(16), { truncate: true })).toThrow(InitDataError);
  });

  it('fits the digest to SNP HOSTDATA (32) and TDX MRCONFIGID (48)', () => {
    const d256 = Buffer.from(SMALL_SHA256, 'hex');
    const d384 = Buffer.from(SMALL_SHA384, 'hex');
    expect(initDataReportField(d256, 32).equals(d256)).toBe(true);
    const mrConfigId = initDataReportField(d256, 48);
    expect(mrConfigId.subarray(0, 32).equals(d256)).toBe(true);
    expect(mrConfigId.subarray(32).equals(Buffer.alloc(16))).toBe(true);
    expect(initDataReportField(d384, 32).equals(d384.subarray(0, 32))).toBe(true);
    expect(initDataReportField(d384, 48).equals(d384)).toBe(true);
  });
});

describe('initdata annotation', () => {
  it('round-trips base64(gzip(TOML)) byte for byte', () => {
    const b64 = encodeInitDataAnnotation(FULL);
    expect(b64).toMatch(/^[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(b64, 'base64').subarray(0, 2).toString('hex')).toBe('1f8b');
    expect(decodeInitDataAnnotation(b64).toString()).toBe(FULL);
  });

  it('accepts line-wrapped base64 like Go decoders do', () => {
    const b64 = encodeInitDataAnnotation(FULL);
    const wrapped = b64.replace(/(.{76})/g, '$1\n');
    expect(decodeInitDataAnnotation(wrapped).toString()).toBe(FULL);
  });

  it('stops a gzip bomb at the size limit', () => {
    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024)).toString('base64');
    expect(bomb.length).toBeLessThan(200_000);
    expect(() => decodeInitDataAnnotation(bomb)).toThrow(/decompresses to more than/);
    expect(() => decodeInitDataAnnotation(encodeInitDataAnnotation('x'.repeat(1000)), 999)).toThrow(
      InitDataError,
    );
  });

  it.each([
    ['empty', ''],
    ['not base64', '!!!'],
    ['unpadded base64', 'H4sI'.slice(0, 3)],
    ['base64 of non-gzip', Buffer.from('version = "0.1.0"').toString('base64')],
    ['truncated gzip', encodeInitDataAnnotation(FULL).slice(0, 40)],
    ['oversize text', 'A'.repeat(5 * 1024 * 1024)],
  ])('rejects %s', (_n, b64) => {
    expect(() => decodeInitDataAnnotation(b64)).toThrow(InitDataError);
  });
});

describe('initDataClaims', () => {
  it('expands aa.toml/cdh.toml and replaces policy.rego with agent_policy_claims', () => {
    const claims = initDataClaims(parseInitData(FULL));
    expect(Object.keys(claims).sort()).toEqual(['aa.toml', 'agent_policy_claims', 'cdh.toml']);
    expect(claims['cdh.toml']).toEqual({
      socket: 'unix:///run/confidential-containers/cdh.sock',
      credentials: [],
      kbc: { name: 'cc_kbc', url: 'https://kbs.example:8080' },
      image: { image_security_policy_uri: 'kbs:///default/security-policy/test' },
    });
    expect(
      (claims['aa.toml'] as { token_configs: { kbs: { cert: string } } }).token_configs.kbs.cert,
    ).toContain('BEGIN CERTIFICATE');
    expect(claims.agent_policy_claims).toEqual({
      containers: [{ OCI: { Process: { Args: ['/bin/sh'] } } }],
      common: { cpath: '/run/kata-containers' },
    });
  });

  it('keeps strings that are not TOML, and policy.rego without extractable policy_data', () => {
    const init = {
      version: '0.1.0' as const,
      algorithm: 'sha256' as const,
      data: {
        'aa.toml': 'this is = = not toml',
        'policy.rego': 'package agent_policy\npolicy_data := {"a": 1}\ndefault x := true\n',
        other: 'kept',
      },
    };
    expect(initDataClaims(init)).toEqual(init.data);
    const noMarker = { ...init, data: { 'policy.rego': 'package agent_policy\ndefault x := true\n' } };
    expect(initDataClaims(noMarker)).toEqual(noMarker.data);
  });

  it('mirrors serde_json: TOML datetimes become the toml crate wrapper, non-finite floats null', () => {
    const init = {
      version: '0.1.0' as const,
      algorithm: 'sha256' as const,
      data: {
        'cdh.toml': 'when = 1979-05-27T07:32:00Z\nday = 1979-05-27\nx = inf\nbig = 9007199254740993\n',
      },
    };
    expect(initDataClaims(init)['cdh.toml']).toEqual({
      when: { $__toml_private_datetime: '1979-05-27T07:32:00Z' },
      day: { $__toml_private_datetime: '1979-05-27' },
      x: null,
      big: 9007199254740992,
    });
  });

  it('leaves policy.rego in place when policy_data nests deeper than serde_json allows', () => {
    const deep = `${'['.repeat(127)}${']'.repeat(127)}`;
    const tooDeep = `${'['.repeat(128)}${']'.repeat(128)}`;
    const mk = (inner: string) => ({
      version: '0.1.0' as const,
      algorithm: 'sha256' as const,
      data: {
        'policy.rego': `policy_data := {"a": ${inner.slice(0, inner.length / 2 - 1)}${inner.slice(inner.length / 2 + 1)}}`,
      },
    });
    expect(Object.keys(initDataClaims(mk(deep)))).toEqual(['agent_policy_claims']);
    expect(Object.keys(initDataClaims(mk(tooDeep)))).toEqual(['policy.rego']);
  });
});
