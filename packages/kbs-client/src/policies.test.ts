import { readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import {
  AFFIRMING_RESOURCE_POLICY,
  ALLOW_ALL_RESOURCE_POLICY,
  DEFAULT_RESOURCE_POLICY,
  DENY_ALL_RESOURCE_POLICY,
} from './policies.js';

const fixture = (name: string) => readFileSync(vector(`trustee/policies/resource/${name}.rego`), 'utf8');

describe('embedded resource policies', () => {
  it('are byte-identical to trustee sample policies', () => {
    expect(ALLOW_ALL_RESOURCE_POLICY).toBe(fixture('allow_all'));
    expect(DENY_ALL_RESOURCE_POLICY).toBe(fixture('deny_all'));
    expect(AFFIRMING_RESOURCE_POLICY).toBe(fixture('affirming'));
    expect(DEFAULT_RESOURCE_POLICY).toBe(fixture('default'));
  });
});
