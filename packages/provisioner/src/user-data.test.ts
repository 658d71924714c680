import { describe, expect, it } from 'vitest';
import { ProvisionError } from './errors.js';
import { acceptWriteFiles, MAX_USER_DATA_BYTES, parseCloudConfig } from './user-data.js';

describe('parseCloudConfig', () => {
  it('reads CAA cloud-config: write_files entries of path and content', () => {
    const cc = parseCloudConfig(
      '#cloud-config\nwrite_files:\n- path: /run/peerpod/initdata\n  content: H4sIAAAA\n- path: /run/peerpod/apf.json\n  content: |\n    {"a": 1}\n',
    );
    expect(cc.writeFiles).toEqual([
      { path: '/run/peerpod/initdata', content: 'H4sIAAAA' },
      { path: '/run/peerpod/apf.json', content: '{"a": 1}\n' },
    ]);
  });

  it('accepts empty user data and an empty list', () => {
    expect(parseCloudConfig('').writeFiles).toEqual([]);
    expect(parseCloudConfig('#cloud-config\n').writeFiles).toEqual([]);
    expect(parseCloudConfig('write_files: []').writeFiles).toEqual([]);
  });

  const bad: [string, RegExp][] = [
    ['runcmd: [reboot]', /key "runcmd" is not accepted/],
    ['write_files:\n- path: /x\n  content: y\n  permissions: "0777"', /only path and content/],
    ['write_files:\n- path: /x\n  encoding: b64', /only path and content/],
    ['write_files: {}', /not a list/],
    ['write_files:\n- [a]', /not a mapping/],
    ['write_files:\n- path: 1', /path is not a string/],
    ['write_files:\n- path: /x\n  content: [1]', /content is not a string/],
    ['- a', /not a mapping/],
    ['write_files: [\n', /not valid YAML/],
    ['a: 1\na: 2', /not valid YAML/],
    ['x: &a [*a]', /./],
  ];
  for (const [text, msg] of bad) {
    it(`refuses ${JSON.stringify(text.slice(0, 40))}`, () => {
      expect(() => parseCloudConfig(text)).toThrow(msg);
      expect(() => parseCloudConfig(text)).toThrow(ProvisionError);
    });
  }

  it('refuses alias bombs, too many entries, invalid UTF-8 and oversize input', () => {
    const bomb = ['a: &a [x, x, x, x, x, x, x, x]'];
    for (let i = 0; i < 8; i++)
      bomb.push(
        `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [*${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}]`,
      );
    expect(() => parseCloudConfig(bomb.join('\n'))).toThrow(ProvisionError);
    const many = `write_files:\n${'- path: /x\n  content: y\n'.repeat(65)}`;
    expect(() => parseCloudConfig(many)).toThrow(/more than 64/);
    expect(() => parseCloudConfig(Buffer.from([0x61, 0x3a, 0x20, 0xff]))).toThrow(/UTF-8/);
    expect(() => parseCloudConfig(Buffer.alloc(MAX_USER_DATA_BYTES + 1, 0x20))).toThrow(/larger than/);
  });
});

describe('acceptWriteFiles', () => {
  it("keeps the initdata and CAA's apf.json, auth.json and scratch marker; names the rest", () => {
    const a = acceptWriteFiles({
      writeFiles: [
        { path: '/run/peerpod/aa.toml', content: 'x' },
        { path: '/run/peerpod/initdata', content: 'first' },
        { path: '/run/peerpod/auth.json', content: '{"auths":{}}' },
        { path: '/etc/shadow', content: 'x' },
        { path: '/run/peerpod/initdata', content: 'second' },
        { path: '/run/peerpod/apf.json', content: '{"a":1}' },
        { path: '/run/peerpod/auth.json', content: '{"auths":{"r":{}}}' },
        { path: '/run/peerpod/cdh.toml', content: 'x' },
        { path: '/run/peerpod/../peerpod/initdata', content: 'x' },
        { path: '/run/peerpod/../peerpod/auth.json', content: 'x' },
      ],
    });
    expect(a.initdata).toBe('second');
    expect([...a.files]).toEqual([
      ['/run/peerpod/auth.json', '{"auths":{"r":{}}}'],
      ['/run/peerpod/apf.json', '{"a":1}'],
    ]);
    expect(a.initdataOnly).toEqual(['/run/peerpod/aa.toml', '/run/peerpod/cdh.toml']);
    expect(a.refused).toEqual([
      '/etc/shadow',
      '/run/peerpod/../peerpod/initdata',
      '/run/peerpod/../peerpod/auth.json',
    ]);
    expect(acceptWriteFiles({ writeFiles: [] }).initdata).toBeUndefined();
  });
});
