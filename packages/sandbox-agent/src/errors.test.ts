// Every sandbox agent error is a SandboxAgentError whose `code` is the ttrpc status the caller gets.
import type { FileHandle } from 'node:fs/promises';
import { Code } from '@broker/ttrpc';
import { describe, expect, it } from 'vitest';
import { SandboxAgentError } from './errors.js';
import { HeldPath } from './paths.js';

describe('sandbox agent errors', () => {
  it('a programming error is a SandboxAgentError answering UNKNOWN, as a plain Error did', () => {
    const held = new HeldPath('/x', {} as FileHandle, 'x', undefined, false, true);
    let caught: unknown;
    try {
      void held.file;
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(SandboxAgentError);
    expect((caught as SandboxAgentError).code).toBe(Code.UNKNOWN);
    expect((caught as SandboxAgentError).message).toBe('/x was held by its parent only');
  });
});
