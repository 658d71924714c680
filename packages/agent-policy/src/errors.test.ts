// Every agent-policy error shares AgentPolicyError and carries a `code`.

import { describe, expect, it } from 'vitest';
import { AgentPolicyError } from './errors.js';
import { buildGoAgent } from './go-agent.js';
import { InitialPolicyError } from './initial.js';
import { applyPatch, InvalidPatchError, PatchApplyError } from './json-patch.js';
import { PolicyEvaluationError, PolicyLoadError } from './policy.js';
import { CopyFileInputError } from './requests.js';
import { RequestDecodeError, RequestEncodeError } from './wire.js';

describe('agent-policy errors', () => {
  it('share AgentPolicyError and name what failed in code', () => {
    const cases: [AgentPolicyError, string][] = [
      [new InitialPolicyError('why'), 'INITIAL_POLICY_UNUSABLE'],
      [new InvalidPatchError('why'), 'PATCH_INVALID'],
      [new PatchApplyError(0, '/a', 'why'), 'PATCH_APPLY_FAILED'],
      [new PolicyEvaluationError('Req', 'why'), 'POLICY_EVALUATION_FAILED'],
      [new PolicyLoadError('why'), 'POLICY_LOAD_FAILED'],
      [new CopyFileInputError(), 'COPY_FILE_INPUT_INVALID'],
      [new RequestDecodeError('T', 'why'), 'REQUEST_DECODE_FAILED'],
      [new RequestEncodeError('why'), 'REQUEST_ENCODE_FAILED'],
    ];
    for (const [e, code] of cases) {
      expect(e).toBeInstanceOf(AgentPolicyError);
      expect(e.code).toBe(code);
    }
    expect(() => applyPatch({}, [{ op: 'remove', path: '/missing' }])).toThrow(
      expect.objectContaining({ code: 'PATCH_APPLY_FAILED' }),
    );
  });

  it('plain failures are AgentPolicyErrors with a code, not bare Errors', async () => {
    const path = process.env.PATH;
    process.env.PATH = '';
    try {
      await expect(buildGoAgent()).rejects.toSatisfy(
        (e) => e instanceof AgentPolicyError && e.code === 'GO_AGENT_UNAVAILABLE',
      );
    } finally {
      process.env.PATH = path;
    }
  });
});
