// Every mock TEE failure is a MockTeeError with a `code`, so callers branch on it, never on `name`.
import { writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { MockTeeError } from './errors.js';

// What the command's body threw, before runCommand turns it into a printed line.
const thrown = vi.hoisted(() => [] as unknown[]);
vi.mock('@broker/cli', async (importOriginal) => {
  const real = await importOriginal<typeof import('@broker/cli')>();
  const runCommand: typeof real.runCommand = (spec, argv, body, io) =>
    real.runCommand(
      spec,
      argv,
      async (args) => {
        try {
          return await body(args);
        } catch (e) {
          thrown.push(e);
          throw e;
        }
      },
      io,
    );
  return { ...real, runCommand };
});

describe('mock TEE errors', () => {
  it('a realm that does not start is a MockTeeError with a code', async () => {
    const { ccaMain } = await import('./cca/command.js');
    const dir = await mkdtemp(join(tmpdir(), 'mock-tee-errors-'));
    try {
      const state = join(dir, 'file');
      writeFileSync(state, 'not a folder');
      let err = '';
      const status = await ccaMain(['--state', state], '0', {
        out: () => {},
        err: (t) => {
          err += t;
        },
        watch: () => ({ stopped: new Promise(() => {}), cancel: () => {} }),
        word: (v) => v,
      });
      expect(status).toBe(1);
      expect(err).toContain('the realm did not start');
      const e = thrown.at(-1);
      expect(e).toBeInstanceOf(MockTeeError);
      expect((e as MockTeeError).code).toBe('START_FAILED');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
