import { describe, expect, it } from 'vitest';
import {
  aaKbcParamsFormatMessage,
  findAaKbcParams,
  kernelCmdlineValue,
  splitAaKbcParams,
} from './aa-kbc-params.js';

describe('aa_kbc_params', () => {
  it('splits at exactly one ::', () => {
    expect(splitAaKbcParams('cc_kbc::http://kbs:8080')).toEqual({ kbc: 'cc_kbc', uri: 'http://kbs:8080' });
    expect(splitAaKbcParams('cc_kbc::')).toEqual({ kbc: 'cc_kbc', uri: '' });
    expect(splitAaKbcParams('cc_kbc')).toBeUndefined();
    expect(splitAaKbcParams('a::b::c')).toBeUndefined();
    expect(splitAaKbcParams('cc_kbc:http://x')).toBeUndefined();
  });

  it('keeps the :: of a bracketed IPv6 address in the URI', () => {
    expect(splitAaKbcParams('cc_kbc::http://[::1]:8080')).toEqual({
      kbc: 'cc_kbc',
      uri: 'http://[::1]:8080',
    });
    expect(splitAaKbcParams('cc_kbc::https://[fd00::2:1]/kbs')).toEqual({
      kbc: 'cc_kbc',
      uri: 'https://[fd00::2:1]/kbs',
    });
    expect(splitAaKbcParams('cc_kbc::http://[::1]::x')).toBeUndefined();
    expect(splitAaKbcParams('cc_kbc::http://[::1:8080')).toBeUndefined();
    expect(splitAaKbcParams('[a::b]::c')).toBeUndefined();
  });

  it('takes the environment first, then the kernel command line', () => {
    expect(findAaKbcParams({ AA_KBC_PARAMS: 'a::b' }, 'agent.aa_kbc_params=c::d')).toEqual({
      value: 'a::b',
      from: 'env',
    });
    expect(findAaKbcParams({}, 'quiet\tagent.aa_kbc_params=c::d\vroot=/dev/vda')).toEqual({
      value: 'c::d',
      from: 'cmdline',
    });
    expect(findAaKbcParams({}, 'xagent.aa_kbc_params=c::d')).toBeUndefined();
    expect(kernelCmdlineValue('a=1 b=2', 'b')).toBe('2');
  });

  it('shows a hostile value bounded and with control characters escaped', () => {
    expect(aaKbcParamsFormatMessage('cc_kbc')).toBe('illegal aa_kbc_params format: cc_kbc');
    const message = aaKbcParamsFormatMessage(`x\n\u001b[2J${'y'.repeat(1000)}`);
    expect(message).not.toMatch(/[\n\u001b]/);
    expect(message).toContain('x\\n\\u001b[2J');
    expect(message.length).toBeLessThan(300);
  });
});
