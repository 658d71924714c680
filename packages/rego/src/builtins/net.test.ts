import { describe, expect, it } from 'vitest';
import { call, failure, set, show } from './testkit.js';

describe('net.cidr_contains', () => {
  it('tests addresses and nets, IPv4 and IPv6', () => {
    expect(call('net.cidr_contains', '10.0.0.0/8', '10.1.2.3')).toBe(true);
    expect(call('net.cidr_contains', '10.0.0.0/8', '11.0.0.1')).toBe(false);
    expect(call('net.cidr_contains', '10.0.0.0/8', '10.1.0.0/16')).toBe(true);
    expect(call('net.cidr_contains', '10.0.0.0/16', '10.0.0.0/8')).toBe(false);
    expect(call('net.cidr_contains', '10.1.2.3/8', '10.200.0.0/16')).toBe(true);
    expect(call('net.cidr_contains', '2001:db8::/32', '2001:db8::1')).toBe(true);
    expect(call('net.cidr_contains', '2001:db8::/32', '2001:db9::1')).toBe(false);
    expect(call('net.cidr_contains', '10.0.0.0/8', '::ffff:10.0.0.1')).toBe(true);
    expect(call('net.cidr_contains', '::/0', '10.0.0.1')).toBe(false);
    expect(call('net.cidr_overlap', '10.0.0.0/8', '10.0.0.1')).toBe(true);
  });

  it('reports bad addresses', () => {
    expect(failure('net.cidr_contains', 'foo', '10.0.0.1').message).toBe(
      'net.cidr_contains: invalid CIDR address: foo',
    );
    expect(failure('net.cidr_contains', '10.0.0.0/8', 'bar').message).toBe(
      'net.cidr_contains: not a valid textual representation of an IP address or CIDR: bar',
    );
    // Go rejects IPv4 with leading zeros.
    expect(failure('net.cidr_contains', '10.0.0.0/8', '010.0.0.1').code).toBe('eval_builtin_error');
    expect(failure('net.cidr_contains', 1, '10.0.0.1').message).toBe(
      'net.cidr_contains: operand 1 must be string but got number',
    );
  });
});

describe('other net.cidr builtins', () => {
  it('intersects', () => {
    expect(call('net.cidr_intersects', '192.168.1.0/25', '192.168.1.64/26')).toBe(true);
    expect(call('net.cidr_intersects', '10.0.0.0/8', '11.0.0.0/8')).toBe(false);
    expect(call('net.cidr_intersects', 'fd00::/8', 'fd12::/16')).toBe(true);
  });

  it('is_valid', () => {
    expect(call('net.cidr_is_valid', '10.0.0.0/8')).toBe(true);
    expect(call('net.cidr_is_valid', '::/0')).toBe(true);
    expect(call('net.cidr_is_valid', '10.0.0.0/33')).toBe(false);
    expect(call('net.cidr_is_valid', '10.0.0.0')).toBe(false);
    expect(call('net.cidr_is_valid', '1:2:3:4:5:6:7:8:9/64')).toBe(false);
    expect(call('net.cidr_is_valid', 7)).toBe(false);
  });

  it('expand lists addresses in canonical form', () => {
    expect(show(call('net.cidr_expand', '192.168.0.0/30'))).toBe(
      '{"192.168.0.0", "192.168.0.1", "192.168.0.2", "192.168.0.3"}',
    );
    expect(show(call('net.cidr_expand', '10.0.0.7/32'))).toBe('{"10.0.0.7"}');
    expect(show(call('net.cidr_expand', '2001:DB8:0:0::/126'))).toBe(
      '{"2001:db8::", "2001:db8::1", "2001:db8::2", "2001:db8::3"}',
    );
    expect(show(call('net.cidr_expand', '1:0:0:1::/127'))).toBe('{"1:0:0:1::", "1:0:0:1::1"}');
    expect(failure('net.cidr_expand', '10.0.0.0/8').code).toBe('eval_builtin_error');
  });

  it('merge', () => {
    expect(show(call('net.cidr_merge', ['192.0.128.0/24', '192.0.129.0/24']))).toBe('{"192.0.128.0/23"}');
    expect(show(call('net.cidr_merge', ['192.0.2.0/24', '192.0.2.1/32']))).toBe('{"192.0.2.0/24"}');
    expect(show(call('net.cidr_merge', set('10.0.0.0/9', '10.128.0.0/9', '11.0.0.0/8')))).toBe(
      '{"10.0.0.0/7"}',
    );
    expect(show(call('net.cidr_merge', ['2001:db8::/33', '2001:db8:8000::/33']))).toBe('{"2001:db8::/32"}');
    expect(show(call('net.cidr_merge', ['1.1.1.1/32', '1.1.1.3/32']))).toBe('{"1.1.1.1/32", "1.1.1.3/32"}');
    expect(failure('net.cidr_merge', ['::1']).message).toBe(
      'net.cidr_merge: IPv6 invalid: needs prefix length',
    );
    expect(failure('net.cidr_merge', [1]).message).toBe('net.cidr_merge: element must be string');
  });

  it('contains_matches reports pairs of keys', () => {
    expect(
      show(
        call('net.cidr_contains_matches', set(['1.1.0.0/16', 'foo'], '1.1.2.0/24'), {
          x: '1.1.1.128',
          y: ['1.1.254.1', 'bar'],
        }),
      ),
    ).toBe('{[["1.1.0.0/16", "foo"], "x"], [["1.1.0.0/16", "foo"], "y"]}');
    expect(show(call('net.cidr_contains_matches', ['10.0.0.0/8', '11.0.0.0/8'], '10.1.1.1'))).toBe(
      '{[0, "10.1.1.1"]}',
    );
    expect(failure('net.cidr_contains_matches', [[]], '10.0.0.1').message).toBe(
      'net.cidr_contains_matches: operand 1: element must be string or non-empty array',
    );
  });
});

describe('net.lookup_ip_addr', () => {
  it('resolves IP addresses and localhost without DNS', () => {
    expect(show(call('net.lookup_ip_addr', '10.0.0.1'))).toBe('{"10.0.0.1"}');
    expect(show(call('net.lookup_ip_addr', '::ffff:10.0.0.1'))).toBe('{"10.0.0.1"}');
    expect(show(call('net.lookup_ip_addr', 'LocalHost'))).toBe('{"127.0.0.1", "::1"}');
    expect(failure('net.lookup_ip_addr', 'example.com').message).toBe(
      'net.lookup_ip_addr: lookup example.com: name resolution is not supported by this engine',
    );
  });
});
