// Every image tool failure is an ImageToolsError with a `code`, so callers branch on it, never on `name`.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { ImageToolsError } from './errors.js';

// What a command's body threw, before runCommand turns it into a printed line.
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

describe('image tools errors', () => {
  it('an encrypted signing key is an ImageToolsError with a code', async () => {
    const { imagePolicyMain } = await import('./cli.js');
    const dir = await mkdtemp(join(tmpdir(), 'image-tools-errors-'));
    try {
      const key = join(dir, 'key.pem');
      await writeFile(key, '-----BEGIN ENCRYPTED PRIVATE KEY-----\n-----END ENCRYPTED PRIVATE KEY-----\n');
      let err = '';
      const status = await imagePolicyMain(['sign', '--key', key, `dir:${dir}`], {
        stdout: () => {},
        stderr: (t) => {
          err += t;
        },
        env: {},
      });
      expect(status).toBe(1);
      expect(err).toContain('encrypted keys');
      const e = thrown.at(-1);
      expect(e).toBeInstanceOf(ImageToolsError);
      expect((e as ImageToolsError).code).toBe('SIGNING_KEY_UNUSABLE');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
