import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { parseInitData } from '@broker/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AaConfigError,
  configFromKbcParams,
  DEFAULT_AA_CONFIG,
  loadAaConfig,
  parseAaConfig,
  parseAaConfigText,
  parseAaKbcParams,
  readAaKbcParams,
} from './config.js';

const EXAMPLE_PATH = vector('guest-components/configs/attestation-agent.config.example.toml');

const PEM = `-----BEGIN CERTIFICATE-----
MIIBszCCAVmgAwIBAgIUQ2Vy
-----END CERTIFICATE-----
`;

/** aa.toml as the spec's initdata carries it: cc_as and kbs URLs, the KBS certificate as PEM. */
const SPEC_INITDATA = `algorithm = "sha256"
version = "0.1.0"

[data]
"aa.toml" = '''
[token_configs]
[token_configs.cc_as]
url = "https://kbs.example.svc:8080"

[token_configs.kbs]
url = "https://kbs.example.svc:8080"
cert = """
${PEM}"""
'''

"cdh.toml" = '''
socket = 'unix:///run/confidential-containers/cdh.sock'
credentials = []
'''

"policy.rego" = '''
package agent_policy
'''
`;

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aa-config-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('aa.toml', () => {
  it('reads upstream config.example.toml', async () => {
    const config = await loadAaConfig(EXAMPLE_PATH);
    expect(config.tokenConfigs.cocoAs).toEqual({ url: 'http://127.0.0.1:8000' });
    expect(config.tokenConfigs.kbs?.url).toBe('https://127.0.0.1:8080');
    expect(config.tokenConfigs.kbs?.teeKeyAlgorithm).toBe('ECDH-ES+A256KW-P256');
    expect(config.tokenConfigs.kbs?.cert).toMatch(/^-----BEGIN CERTIFICATE-----\nMIIDljCCAn6gAwIBAgIU/);
    expect(config.tokenConfigs.kbs?.cert?.endsWith('-----END CERTIFICATE-----\n')).toBe(true);
    expect(config.eventlog).toEqual({ initPcr: 17, enableEventlog: false });
    expect(config.log).toEqual({ level: 'info' });
    expect(config.ignoredKeys).toEqual([]);
  });

  it('reads the same configuration as JSON from a .json file', async () => {
    const toml = await loadAaConfig(EXAMPLE_PATH);
    const path = join(dir, 'config.example.json');
    await writeFile(
      path,
      JSON.stringify({
        token_configs: {
          coco_as: { url: 'http://127.0.0.1:8000' },
          kbs: {
            url: 'https://127.0.0.1:8080',
            tee_key_algorithm: 'ECDH-ES+A256KW-P256',
            cert: toml.tokenConfigs.kbs?.cert,
          },
        },
        eventlog_config: { init_pcr: 17, enable_eventlog: false },
        log: { level: 'info' },
      }),
    );
    expect(await loadAaConfig(path)).toEqual(toml);
  });

  it("works unchanged with the spec's initdata aa.toml, ignoring token_configs.cc_as as upstream does", () => {
    const initData = parseInitData(SPEC_INITDATA);
    const aaToml = initData.data['aa.toml'] as string;
    const config = parseAaConfigText(aaToml);
    expect(config.tokenConfigs.kbs).toEqual({
      url: 'https://kbs.example.svc:8080',
      cert: PEM,
      teeKeyAlgorithm: 'ECDH-ES+A256KW-P256',
    });
    expect(config.tokenConfigs.cocoAs).toBeUndefined();
    expect(config.ignoredKeys).toEqual(['token_configs.cc_as']);
    expect(config.eventlog).toEqual(DEFAULT_AA_CONFIG.eventlog);
  });

  it.each([
    ['an empty file', ''],
    ['an empty [eventlog_config]', '[eventlog_config]\n'],
    [
      'empty [token_configs] and [eventlog_config]',
      '[log]\nlevel = "warn"\n[token_configs]\n[eventlog_config]\n',
    ],
  ])('takes defaults for %s', (_name, text) => {
    const config = parseAaConfigText(text);
    expect(config.tokenConfigs).toEqual({});
    expect(config.eventlog).toEqual({ initPcr: 17, enableEventlog: false });
  });

  it('keeps a cert that is not a PEM as given (upstream checks it only when used)', () => {
    const config = parseAaConfigText('[token_configs.kbs]\nurl = "https://127.0.0.1:8080"\ncert = "cert"\n');
    expect(config.tokenConfigs.kbs?.cert).toBe('cert');
  });

  it('reads every tee_key_algorithm upstream knows', () => {
    for (const alg of ['ECDH-ES+A256KW-P256', 'ECDH-ES+A256KW-P521', 'RSA-OAEP-256']) {
      const c = parseAaConfigText(`[token_configs.kbs]\nurl = "http://k"\ntee_key_algorithm = "${alg}"\n`);
      expect(c.tokenConfigs.kbs?.teeKeyAlgorithm).toBe(alg);
    }
  });

  it('accepts the string forms the config crate converts', () => {
    const c = parseAaConfigText('[eventlog_config]\ninit_pcr = "8"\nenable_eventlog = "true"\n');
    expect(c.eventlog).toEqual({ initPcr: 8, enableEventlog: true });
  });

  it('treats JSON null like an absent key (serde Option)', () => {
    const c = parseAaConfigText(
      '{"token_configs":{"kbs":{"url":"http://k","cert":null},"coco_as":null},"log":null}',
      'aa.json',
    );
    expect(c.tokenConfigs).toEqual({ kbs: { url: 'http://k', teeKeyAlgorithm: 'ECDH-ES+A256KW-P256' } });
    expect(c.log.level).toBe('info');
  });

  it('reports unknown keys at every level, and ignores them', () => {
    const c = parseAaConfigText(
      'extra = 1\n[token_configs.kbs]\nurl = "http://k"\nkbs_cert = "x"\n[eventlog_config]\npcr = 3\n[log]\nformat = "json"\n[other]\n',
    );
    expect(c.ignoredKeys).toEqual([
      'token_configs.kbs.kbs_cert',
      'eventlog_config.pcr',
      'log.format',
      'extra',
      'other',
    ]);
    expect(c.tokenConfigs.kbs?.url).toBe('http://k');
  });

  it.each([
    ['kbs without url', '[token_configs.kbs]\ncert = "x"\n', /token_configs\.kbs: missing field `url`/],
    ['coco_as without url', '[token_configs.coco_as]\n', /token_configs\.coco_as: missing field `url`/],
    ['a number url', '[token_configs.kbs]\nurl = 8080\n', /token_configs\.kbs\.url: expected a string/],
    [
      'an unknown tee_key_algorithm',
      '[token_configs.kbs]\nurl = "http://k"\ntee_key_algorithm = "RSA1_5"\n',
      /unknown variant `RSA1_5`/,
    ],
    ['token_configs as a string', 'token_configs = "kbs"\n', /token_configs: expected a table/],
    ['a negative init_pcr', '[eventlog_config]\ninit_pcr = -1\n', /init_pcr: expected an integer/],
    ['a fractional init_pcr', '[eventlog_config]\ninit_pcr = 1.5\n', /init_pcr: expected an integer/],
    ['a huge init_pcr', '[eventlog_config]\ninit_pcr = 99999999999\n', /init_pcr: expected an integer/],
    ['a non-boolean enable_eventlog', '[eventlog_config]\nenable_eventlog = "yes"\n', /expected a boolean/],
    ['a date for log.level', '[log]\nlevel = 1979-05-27\n', /log\.level: expected a string, found a date/],
    ['invalid TOML', '[token_configs\n', /aa\.toml: /],
  ])('rejects %s', (_name, text, message) => {
    expect(() => parseAaConfigText(text)).toThrow(AaConfigError);
    expect(() => parseAaConfigText(text)).toThrow(message);
  });

  it('rejects a document that is not a table', () => {
    expect(() => parseAaConfig([1, 2])).toThrow(/expected a table, found an array/);
    expect(() => parseAaConfigText('"x"', 'aa.json')).toThrow(AaConfigError);
  });

  it('does not let __proto__ keys reach the prototype', () => {
    const c = parseAaConfigText('{"__proto__":{"polluted":true},"token_configs":{"__proto__":{}}}', 'a.json');
    expect(c.ignoredKeys).toEqual(['token_configs.__proto__', '__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('refuses deeply nested TOML without overflowing the stack', () => {
    const deep = `x = ${'['.repeat(10_000)}${']'.repeat(10_000)}\n`;
    expect(() => parseAaConfigText(deep)).toThrow(AaConfigError);
  });

  it('refuses a file over 1 MiB, and one that is not UTF-8', async () => {
    const big = join(dir, 'big.toml');
    await writeFile(big, `# ${'x'.repeat(1024 * 1024)}\n`);
    await expect(loadAaConfig(big)).rejects.toThrow(/larger than/);
    const bin = join(dir, 'bin.toml');
    await writeFile(bin, Buffer.from([0x5b, 0xff, 0xfe, 0x5d]));
    await expect(loadAaConfig(bin)).rejects.toThrow(/not valid UTF-8/);
    await expect(loadAaConfig(join(dir, 'missing.toml'))).rejects.toThrow(/cannot read/);
  });
});

describe('aa_kbc_params (no -c)', () => {
  it('parses <kbc>::<uri> with exactly one separator', () => {
    expect(parseAaKbcParams('cc_kbc::http://127.0.0.1:8080')).toEqual({
      kbc: 'cc_kbc',
      uri: 'http://127.0.0.1:8080',
    });
    expect(() => parseAaKbcParams('cc_kbc')).toThrow(/illegal aa_kbc_params format/);
    expect(() => parseAaKbcParams('a::b::c')).toThrow(/illegal aa_kbc_params format/);
  });

  it('prefers env AA_KBC_PARAMS over the kernel command line', async () => {
    const cmdline = join(dir, 'cmdline-env');
    await writeFile(cmdline, 'console=ttyS0 agent.aa_kbc_params=cc_kbc::http://cmdline:1\n');
    expect(
      await readAaKbcParams({ env: { AA_KBC_PARAMS: 'cc_kbc::http://env:1' }, cmdlinePath: cmdline }),
    ).toEqual({
      value: 'cc_kbc::http://env:1',
      from: 'env',
    });
    expect(await readAaKbcParams({ env: {}, cmdlinePath: cmdline })).toEqual({
      value: 'cc_kbc::http://cmdline:1',
      from: 'cmdline',
    });
  });

  it('configures the KBS from a cc_kbc kernel parameter', async () => {
    const cmdline = join(dir, 'cmdline');
    await writeFile(cmdline, 'quiet\tagent.aa_kbc_params=cc_kbc::https://kbs:8080 agent.log=debug\n');
    const { config, note } = await configFromKbcParams({ env: {}, cmdlinePath: cmdline });
    expect(config.tokenConfigs.kbs).toEqual({
      url: 'https://kbs:8080',
      teeKeyAlgorithm: 'ECDH-ES+A256KW-P256',
    });
    expect(config.eventlog).toEqual({ initPcr: 17, enableEventlog: false });
    expect(note).toMatch(/from aa_kbc_params \(cmdline\)/);
  });

  it.each([
    ['absent', {}, /no aa_kbc_params/],
    ['malformed', { AA_KBC_PARAMS: 'cc_kbc:http://x' }, /illegal aa_kbc_params format/],
    ['another KBC', { AA_KBC_PARAMS: 'offline_fs_kbc::null' }, /not cc_kbc/],
  ])('leaves the KBS unconfigured when the parameter is %s', async (_name, env, note) => {
    const r = await configFromKbcParams({ env, cmdlinePath: join(dir, 'no-such-cmdline') });
    expect(r.config.tokenConfigs.kbs).toBeUndefined();
    expect(r.note).toMatch(note);
  });
});
