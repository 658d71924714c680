import { describe, expect, it } from 'vitest';
import {
  appraisalJson,
  earJson,
  extensionsFromPolicy,
  statusOf,
  tierOf,
  trustVectorFromPolicy,
} from './ear.js';
import { AttestationFailed } from './errors.js';

function policyFailure(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(AttestationFailed);
    expect((e as AttestationFailed).reason).toBe('POLICY');
    return (e as Error).message;
  }
  throw new Error('expected AttestationFailed');
}

describe('AR4SI tiers (rust-ear)', () => {
  it.each([
    [0, 'none'],
    [1, 'none'],
    [-1, 'none'],
    [2, 'affirming'],
    [-2, 'affirming'],
    [31, 'affirming'],
    [-32, 'affirming'],
    [32, 'warning'],
    [-33, 'warning'],
    [95, 'warning'],
    [-96, 'warning'],
    [96, 'contraindicated'],
    [-97, 'contraindicated'],
    [127, 'contraindicated'],
    [-128, 'contraindicated'],
  ])('%i → %s', (v, tier) => {
    expect(tierOf(v)).toBe(tier);
  });

  it('status is the worst tier of the vector', () => {
    expect(statusOf({ executables: 3, hardware: 2, configuration: 2 })).toBe('affirming');
    expect(statusOf({ executables: 3, hardware: 97, configuration: 2 })).toBe('contraindicated');
    expect(statusOf({ executables: 33, hardware: 2 })).toBe('warning');
    expect(statusOf({ executables: 0 })).toBe('none');
  });
});

describe('policy results → appraisal', () => {
  it('sets every claim to 0 when the policy has no trust_claims (as trustee)', () => {
    const v = trustVectorFromPolicy(undefined, 'p');
    expect(Object.values(v)).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    expect(statusOf(v)).toBe('none');
  });

  it('reads the named claims', () => {
    expect(trustVectorFromPolicy({ executables: 3, hardware: 97 }, 'p')).toEqual({
      executables: 3,
      hardware: 97,
    });
  });

  it.each([
    [{}, 'at least one'],
    [[1], 'not an object'],
    ['x', 'not an object'],
    [{ executable: 3 }, 'unknown trust claim'],
    [{ executables: 3.5 }, 'integer'],
    [{ executables: '3' }, 'integer'],
    [{ executables: 128 }, 'integer'],
    [{ executables: -129 }, 'integer'],
  ])('refuses trust_claims %j', (v, text) => {
    expect(policyFailure(() => trustVectorFromPolicy(v, 'p'))).toContain(text);
  });

  it('reads extensions, drops null values and sorts them by name', () => {
    const ext = extensionsFromPolicy(
      [
        { name: 'z.ext', key: -19, value: { a: 1 } },
        { name: 'ear.trustee.identifiers', key: -18, value: { validated: {} } },
        { name: 'nothing', key: 7, value: null },
      ],
      'p',
    );
    expect(ext).toEqual([
      ['ear.trustee.identifiers', { validated: {} }],
      ['z.ext', { a: 1 }],
    ]);
    expect(extensionsFromPolicy(undefined, 'p')).toEqual([]);
  });

  it.each([
    [{}, 'not an array'],
    [[1], 'not an object'],
    [[{ key: 1, value: 1 }], 'name'],
    [[{ name: 'a', value: 1 }], 'key'],
    [[{ name: 'a', key: 1.5, value: 1 }], 'key'],
    [[{ name: 'a', key: 1 }], 'no value'],
    [
      [
        { name: 'a', key: 1, value: 1 },
        { name: 'a', key: 2, value: 1 },
      ],
      'twice',
    ],
    [
      [
        { name: 'a', key: 1, value: 1 },
        { name: 'b', key: 1, value: 1 },
      ],
      'twice',
    ],
    [[{ name: 'ear.status', key: 1000, value: 'affirming' }], 'twice'],
  ])('refuses extensions %j', (v, text) => {
    expect(policyFailure(() => extensionsFromPolicy(v, 'p'))).toContain(text);
  });

  it("serializes appraisals and the EAR in rust-ear's member order", () => {
    const appraisal = appraisalJson({
      status: 'contraindicated',
      vector: { hardware: 97, executables: 33, configuration: 36, 'instance-identity': 0 },
      policyId: 'default',
      annotatedEvidence: { sample: {} },
      extensions: [['ear.trustee.identifiers', { validated: {} }]],
    });
    expect(JSON.stringify(appraisal)).toBe(
      '{"ear.status":"contraindicated","ear.trustworthiness-vector":{"instance-identity":0,"configuration":36,"executables":33,"hardware":97},"ear.appraisal-policy-id":"default","ear.veraison.annotated-evidence":{"sample":{}},"ear.trustee.identifiers":{"validated":{}}}',
    );
    const a = {
      status: 'none' as const,
      vector: { executables: 0 },
      policyId: 'x',
      annotatedEvidence: {},
      extensions: [],
    };
    const ear = earJson({
      profile: 'tag:github.com,2024:confidential-containers/Trustee',
      iat: 100,
      developer: 'd',
      build: 'b',
      submods: new Map([
        ['gpu0', a],
        ['cpu0', a],
      ]),
      exp: 400,
      iss: 'i',
    });
    expect(Object.keys(ear)).toEqual(['eat_profile', 'iat', 'ear.verifier-id', 'submods', 'exp', 'iss']);
    expect(Object.keys(ear.submods as object)).toEqual(['cpu0', 'gpu0']);
    expect(ear['ear.verifier-id']).toEqual({ developer: 'd', build: 'b' });
    // An empty annotated evidence is left out, as rust-ear does.
    expect(Object.keys((ear.submods as Record<string, object>).cpu0 ?? {})).toEqual([
      'ear.status',
      'ear.trustworthiness-vector',
      'ear.appraisal-policy-id',
    ]);
  });
});
