import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { TPM_ALG, Tpm } from '@broker/tpm';
import { type SwtpmInstance, startSwtpm } from '@broker/tpm/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processUserDataMain } from './cli.js';
import { DEFAULT_INITDATA_TOML } from './initdata.js';

const work = mkdtempSync(join(tmpdir(), 'pud-cli-'));
const INITDATA =
  'algorithm = "sha256"\nversion = "0.1.0"\n\n[data]\n"aa.toml" = \'\'\'\n[token_configs.kbs]\nurl = "https://kbs:8080"\n\'\'\'\n';
let swtpm: SwtpmInstance;

beforeAll(async () => {
  swtpm = await startSwtpm();
});
afterAll(async () => {
  await swtpm.stop();
  rmSync(work, { recursive: true, force: true });
});

async function run(argv: string[], env: Record<string, string> = {}) {
  let out = '';
  let err = '';
  const code = await processUserDataMain(argv, {
    out: (s) => {
      out += s;
    },
    err: (s) => {
      err += s;
    },
    env,
  });
  return { code, out, err };
}

describe('process-user-data', () => {
  it('provision-files: user data folder, swtpm from BROKER_TPM, files under --root', async () => {
    const cidata = join(work, 'cidata');
    mkdirSync(cidata);
    writeFileSync(
      join(cidata, 'user-data'),
      `#cloud-config\nwrite_files:\n- path: /run/peerpod/initdata\n  content: ${gzipSync(INITDATA).toString('base64')}\n`,
    );
    const root = join(work, 'root');
    const r = await run(['provision-files', '--user-data', cidata, '--root', root], {
      BROKER_TPM: swtpm.address,
    });
    expect(r.err).toMatch(/PCR8 extended/);
    expect(r.code).toBe(0);
    const digest = createHash('sha256').update(INITDATA).digest();
    expect(readFileSync(join(root, 'run/peerpod/initdata.digest'), 'utf8')).toBe(digest.toString('hex'));
    const tpm = Tpm.open(swtpm.address);
    const [pcr8] = await tpm.readPcrs(TPM_ALG.SHA256, [8]);
    await tpm.close();
    expect(Buffer.from(pcr8 ?? []).toString('hex')).toBe(
      createHash('sha256').update(Buffer.alloc(32)).update(digest).digest('hex'),
    );
  });

  it('default-initdata prints the fixed default document', async () => {
    const r = await run(['default-initdata']);
    expect(r.code).toBe(0);
    expect(r.out).toBe(DEFAULT_INITDATA_TOML);
  });

  it('fails with exit 1 and nothing written when provisioning fails', async () => {
    const bad = join(work, 'bad-user-data');
    writeFileSync(bad, 'bootcmd: [x]\n');
    const root = join(work, 'root-bad');
    const r = await run(['provision-files', '--user-data', bad, '--root', root, '--tpm', swtpm.address]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/key "bootcmd" is not accepted/);
    expect(() => readFileSync(join(root, 'run/peerpod/aa.toml'))).toThrow();
  });

  it('answers usage errors with exit 2', async () => {
    const cases: [string[], RegExp][] = [
      [[], /missing command/],
      [['provision'], /unknown command/],
      [['provision-files', '--bogus'], /unknown option '--bogus'/],
      [['provision-files', '--user-data', '/x', '--imds-url', 'http://a'], /not both/],
      [['provision-files', '--imds-url', 'ftp://a', '--tpm', 'none'], /http: or https:/],
      [['provision-files', '--imds-url', 'nope', '--tpm', 'none'], /not a URL/],
      [['provision-files', '--user-data-fetch-timeout', '1.5', '--tpm', 'none'], /whole seconds/],
      [['provision-files', 'extra'], /unexpected argument/],
      [['default-initdata', 'x'], /unexpected argument 'x'/],
    ];
    for (const [argv, msg] of cases) {
      const r = await run(argv);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.err).toMatch(msg);
    }
  });
});
