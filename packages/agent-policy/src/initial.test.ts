import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_POLICY_REGO } from './default-policy.js';
import { InitialPolicyError, policyFromInitData, resolveInitialPolicy } from './initial.js';
import { tempDir } from './testing/helpers.js';

const EXEC_BLOCKED = 'package agent_policy\ndefault ExecProcessRequest := false\n';

/** An initdata TOML as the spec describes it, with an optional policy.rego. */
function initdata(policy?: string): string {
  const lines = [
    'algorithm = "sha256"',
    'version = "0.1.0"',
    '',
    '[data]',
    `"aa.toml" = '''`,
    '[token_configs.kbs]',
    'url = "https://kbs.example:8080"',
    `'''`,
  ];
  if (policy !== undefined) lines.push(`"policy.rego" = '''`, policy, `'''`);
  return `${lines.join('\n')}\n`;
}

describe('resolveInitialPolicy', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => {
    ({ dir, cleanup } = await tempDir());
  });
  afterEach(async () => {
    await cleanup();
  });

  it("prefers initdata's policy.rego over the default policy file", async () => {
    await writeFile(join(dir, 'initdata.toml'), initdata(EXEC_BLOCKED));
    await writeFile(join(dir, 'default-policy.rego'), 'package agent_policy\n');
    const p = await resolveInitialPolicy({
      initdataPath: join(dir, 'initdata.toml'),
      policyFile: join(dir, 'default-policy.rego'),
    });
    expect(p).toEqual({
      origin: 'initdata',
      text: `${EXEC_BLOCKED}\n`,
      name: 'agent_policy',
      path: join(dir, 'initdata.toml'),
    });
  });

  it('uses the default policy file when initdata has no policy.rego', async () => {
    await writeFile(join(dir, 'initdata.toml'), initdata());
    await writeFile(join(dir, 'default-policy.rego'), EXEC_BLOCKED);
    const p = await resolveInitialPolicy({
      initdataPath: join(dir, 'initdata.toml'),
      policyFile: join(dir, 'default-policy.rego'),
    });
    expect(p).toMatchObject({ origin: 'file', text: EXEC_BLOCKED, name: join(dir, 'default-policy.rego') });
  });

  it('falls back to the built-in default policy when neither exists', async () => {
    const p = await resolveInitialPolicy({
      initdataPath: join(dir, 'missing.toml'),
      policyFile: join(dir, 'missing.rego'),
    });
    expect(p).toEqual({ origin: 'builtin', text: DEFAULT_POLICY_REGO, name: 'agent_policy' });
    expect(await resolveInitialPolicy({ initdataPath: null, policyFile: null })).toMatchObject({
      origin: 'builtin',
    });
  });

  it('refuses sources that exist but cannot be used (fail closed)', async () => {
    await writeFile(join(dir, 'bad.toml'), 'version = "0.1.0"\nalgorithm = "sha-256"\n[data]\n');
    await expect(
      resolveInitialPolicy({ initdataPath: join(dir, 'bad.toml'), policyFile: null }),
    ).rejects.toThrow(/unsupported algorithm/);
    await writeFile(join(dir, 'garbage.toml'), 'this is = = not toml');
    await expect(resolveInitialPolicy({ initdataPath: join(dir, 'garbage.toml') })).rejects.toThrow(
      InitialPolicyError,
    );
    await mkdir(join(dir, 'a-dir'));
    await expect(
      resolveInitialPolicy({ initdataPath: null, policyFile: join(dir, 'a-dir') }),
    ).rejects.toThrow(/not a regular file/);
    await writeFile(join(dir, 'latin1.rego'), Buffer.from([0x70, 0xe9, 0x0a]));
    await expect(
      resolveInitialPolicy({ initdataPath: null, policyFile: join(dir, 'latin1.rego') }),
    ).rejects.toThrow(/not valid UTF-8/);
    if (process.getuid?.() !== 0) {
      await writeFile(join(dir, 'secret.rego'), EXEC_BLOCKED);
      await chmod(join(dir, 'secret.rego'), 0);
      await expect(
        resolveInitialPolicy({ initdataPath: null, policyFile: join(dir, 'secret.rego') }),
      ).rejects.toThrow(/cannot read policy file/);
    }
  });

  it('reads policy.rego from initdata text', () => {
    expect(policyFromInitData(initdata('package agent_policy'))).toBe('package agent_policy\n');
    expect(policyFromInitData(initdata())).toBeUndefined();
  });
});
