import { describe, expect, it } from 'vitest';
import { explainAppraisal, explainAppraisals, MAX_EXPLANATION_LENGTH } from './explain.js';

const pcr8 = 'ab'.repeat(32);
const warning = {
  'ear.status': 'warning',
  'ear.trustworthiness-vector': { configuration: 36, executables: 3, hardware: 2, 'file-system': 0 },
  'ear.appraisal-policy-id': 'default',
  'broker.reference-values': {
    tee: 'az-snp-vtpm',
    compared: ['snp_pcr03', 'snp_pcr08'],
    mismatched: { snp_pcr08: pcr8 },
    missing: ['snp_pcr12'],
  },
};

describe('explainAppraisals', () => {
  it('names the non-affirming claims and the reference values that did not match', () => {
    expect(explainAppraisals({ submods: { cpu0: warning } })).toBe(
      `cpu0 warning (policy default): configuration=36 (warning); reference values not matched: snp_pcr08 (evidence ${pcr8}); reference values not registered: snp_pcr12`,
    );
  });

  it('skips affirming appraisals and says nothing when all are affirming', () => {
    const affirming = { 'ear.status': 'affirming', 'ear.trustworthiness-vector': { executables: 3 } };
    expect(explainAppraisals({ submods: { cpu0: affirming } })).toBeUndefined();
    expect(explainAppraisals({ submods: { cpu0: affirming, gpu0: warning } })).toMatch(/^gpu0 warning/);
    expect(explainAppraisal(affirming)).toEqual([]);
  });

  it('reports contraindicated claims and appraisals without a reference-value report', () => {
    const c = {
      'ear.status': 'contraindicated',
      'ear.trustworthiness-vector': { hardware: 97, executables: 33 },
      'ear.appraisal-policy-id': 'default',
    };
    expect(explainAppraisals({ submods: { cpu0: c } })).toBe(
      'cpu0 contraindicated (policy default): executables=33 (warning), hardware=97 (contraindicated)',
    );
  });

  it('copes with tokens of any shape, and bounds the text', () => {
    expect(explainAppraisals({})).toContain('no appraisals');
    expect(explainAppraisals({ submods: { cpu0: 'x' } })).toBe('cpu0 missing (policy none): no appraisal');
    const huge = {
      ...warning,
      'broker.reference-values': {
        mismatched: Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`n${i}`, 'x'.repeat(1000)])),
        missing: Array.from({ length: 100 }, () => 'y'.repeat(1000)),
      },
    };
    const many = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`cpu${i}`, huge]));
    const text = explainAppraisals({ submods: many })!;
    expect(text.length).toBeLessThanOrEqual(MAX_EXPLANATION_LENGTH);
    expect(text).toMatch(/…$/);
  });
});
