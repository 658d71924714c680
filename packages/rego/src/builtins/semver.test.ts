import { describe, expect, it } from 'vitest';
import { call, failure } from './testkit.js';

describe('semver', () => {
  it('validates versions as OPA does', () => {
    for (const v of [
      '1.0.0',
      'v1.0.0',
      '1.0.0-alpha+001',
      '1.0.0+20130313144700',
      '1.0.0-x.7.z.92',
      '1.0.0-0a',
      '1.0.0+01',
    ]) {
      expect(call('semver.is_valid', v), v).toBe(true);
    }
    for (const v of [
      '1.0',
      '1.0.0.0',
      '1.0.0-alpha..1',
      'a.b.c',
      '',
      '1.0.0-é',
      '01.0.0',
      '1.0.0+',
      '1.0.0-',
      '1.0.0-01',
    ]) {
      expect(call('semver.is_valid', v), v).toBe(false);
    }
    expect(call('semver.is_valid', 1)).toBe(false);
  });

  it('compares by precedence', () => {
    expect(call('semver.compare', '1.0.0', '1.0.1')).toBe(-1);
    expect(call('semver.compare', '2.0.0', '1.9.9')).toBe(1);
    expect(call('semver.compare', '1.0.0-alpha', '1.0.0')).toBe(-1);
    expect(call('semver.compare', '1.0.0-alpha.1', '1.0.0-alpha.beta')).toBe(-1);
    expect(call('semver.compare', '1.0.0-alpha.beta', '1.0.0-beta')).toBe(-1);
    expect(call('semver.compare', '1.0.0-beta.2', '1.0.0-beta.11')).toBe(-1);
    expect(call('semver.compare', '1.0.0-rc.1', '1.0.0-rc.1.1')).toBe(-1);
    expect(call('semver.compare', '1.0.0+build.1', '1.0.0+build.2')).toBe(0);
    expect(call('semver.compare', 'v1.2.3', '1.2.3')).toBe(0);
  });

  it('reports invalid versions', () => {
    expect(failure('semver.compare', 'x', '1.0.0').message).toBe(
      'semver.compare: operand 1: string "x" is not a valid SemVer',
    );
    expect(failure('semver.compare', '1.0.0', '1').message).toBe(
      'semver.compare: operand 2: string "1" is not a valid SemVer',
    );
    expect(failure('semver.compare', 1, '1.0.0').message).toBe(
      'semver.compare: operand 1 must be string but got number',
    );
  });
});
