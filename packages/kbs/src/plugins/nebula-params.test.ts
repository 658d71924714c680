import { describe, expect, it } from 'vitest';
import { PluginRequestError } from './builtin.js';
import { isIpv4Cidr, parseNebulaCredentialParams, signArguments } from './nebula-params.js';

const args = (q: Record<string, string>) => signArguments(parseNebulaCredentialParams(q));
const refusal = (q: Record<string, string>): string => {
  try {
    parseNebulaCredentialParams(q);
  } catch (e) {
    expect(e).toBeInstanceOf(PluginRequestError);
    return (e as Error).message;
  }
  throw new Error('accepted');
};

describe('nebula-ca credential parameters', () => {
  // trustee nebula_ca.rs test_credential_service_params, the cases it accepts with a prefix length.
  it.each([
    [{ name: 'pod1', ip: '1.2.3.4/21' }, ['-name', 'pod1', '-ip', '1.2.3.4/21']],
    [
      { name: 'pod1', ip: '1.2.3.4/21', duration: '8760h10m10s' },
      ['-name', 'pod1', '-ip', '1.2.3.4/21', '-duration', '8760h10m10s'],
    ],
    [
      { name: 'pod1', ip: '1.2.3.4/21', groups: 'server,ssh' },
      ['-name', 'pod1', '-ip', '1.2.3.4/21', '-groups', 'server,ssh'],
    ],
    [
      { name: 'pod1', ip: '1.2.3.4/21', subnets: '1.2.3.5/21,1.2.3.6/21' },
      ['-name', 'pod1', '-ip', '1.2.3.4/21', '-subnets', '1.2.3.5/21,1.2.3.6/21'],
    ],
  ])('%j → nebula-cert sign %j', (q, expected) => {
    expect(args(q)).toEqual(expected);
  });

  it('requires name and ip (trustee: serde missing field)', () => {
    expect(refusal({ name: 'pod1' })).toBe('missing field `ip`');
    expect(refusal({ ip: '1.2.3.4/21' })).toBe('missing field `name`');
  });

  it('parses IPv4 CIDR strictly', () => {
    for (const ok of ['0.0.0.0/0', '255.255.255.255/32', '10.9.8.7/21'])
      expect(isIpv4Cidr(ok), ok).toBe(true);
    for (const bad of [
      '1.2.3.4', // trustee passes it on; nebula-cert needs the prefix length
      '1.2',
      '999.1.1.1/24',
      '1.2.3.4/33',
      '01.2.3.4/8',
      '1.2.3.4/08',
      '1.2.3.4.5/8',
      '1.2.3/8',
      ' 1.2.3.4/8',
      '1.2.3.4/8 ',
      '::1/128',
      '1.2.3.4/-1',
      '',
    ]) {
      expect(isIpv4Cidr(bad), bad).toBe(false);
    }
  });

  it.each([
    [{ name: '../x', ip: '10.0.0.1/8' }, /^name "..\/x" must be/],
    [{ name: 'a/b', ip: '10.0.0.1/8' }, /^name/],
    [{ name: 'a..b', ip: '10.0.0.1/8' }, /^name/],
    [{ name: '-ca-key', ip: '10.0.0.1/8' }, /^name/],
    [{ name: 'pod;rm -rf /', ip: '10.0.0.1/8' }, /^name/],
    [{ name: '$(id)', ip: '10.0.0.1/8' }, /^name/],
    [{ name: 'pod`id`', ip: '10.0.0.1/8' }, /^name/],
    [{ name: 'a\nb', ip: '10.0.0.1/8' }, /^name/],
    [{ name: '', ip: '10.0.0.1/8' }, /^name/],
    [{ name: 'a'.repeat(254), ip: '10.0.0.1/8' }, /^name "a{64}…" must be/],
    [{ name: 'pod', ip: '999.1.1.1/24' }, /^ip "999.1.1.1\/24" is not an IPv4 address/],
    [{ name: 'pod', ip: `1.2.3.4/8${'0'.repeat(10_000)}` }, /^ip/],
    [{ name: 'pod', ip: '10.0.0.1/8', duration: '1d' }, /^duration/],
    [{ name: 'pod', ip: '10.0.0.1/8', duration: '' }, /^duration/],
    [{ name: 'pod', ip: '10.0.0.1/8', duration: '-1h' }, /^duration/],
    [{ name: 'pod', ip: '10.0.0.1/8', duration: '1s1h' }, /^duration/],
    [{ name: 'pod', ip: '10.0.0.1/8', groups: 'ssh,' }, /^groups: "" is not a group name/],
    [{ name: 'pod', ip: '10.0.0.1/8', groups: 'a b' }, /^groups/],
    [{ name: 'pod', ip: '10.0.0.1/8', groups: Array(33).fill('g').join(',') }, /^groups: at most 32/],
    [
      { name: 'pod', ip: '10.0.0.1/8', subnets: '10.0.0.0/8,10.1.0.0' },
      /^subnets: "10.1.0.0" is not an IPv4/,
    ],
    [{ name: 'pod', ip: '10.0.0.1/8', out_crt: '/tmp/x' }, /^unknown query parameter "out_crt"/],
  ])('refuses %j', (q, re) => {
    expect(refusal(q)).toMatch(re);
  });
});
