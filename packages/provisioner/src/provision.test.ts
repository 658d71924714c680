import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { TPM_ALG, Tpm } from '@broker/tpm';
import { type SwtpmInstance, startSwtpm, tpm2Tool } from '@broker/tpm/testing';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ProvisionError } from './errors.js';
import { DEFAULT_INITDATA_TOML } from './initdata.js';
import { provisionFiles } from './provision.js';
import { defaultSource, fetchUserData } from './sources.js';

const run = promisify(execFile);
const work = mkdtempSync(join(tmpdir(), 'provision-'));
const AA = '[token_configs.kbs]\nurl = "https://kbs.example:8080"\n';
const CDH =
  'socket = "unix:///run/confidential-containers/cdh.sock"\ncredentials = []\n\n[kbc]\nname = "cc_kbc"\nurl = "https://kbs.example:8080"\n';
const POLICY = 'package agent_policy\n\ndefault ExecProcessRequest := false\n';
const INITDATA = `algorithm = "sha256"\nversion = "0.1.0"\n\n[data]\n"aa.toml" = '''\n${AA}'''\n"cdh.toml" = '''\n${CDH}'''\n"policy.rego" = '''\n${POLICY}'''\n"extra.sh" = '''\nrm -rf /\n'''\n`;

const sha256 = (b: string | Buffer) => createHash('sha256').update(b).digest();
const pcr8Of = (toml: string) =>
  createHash('sha256').update(Buffer.alloc(32)).update(sha256(toml)).digest('hex');
const annotation = (toml: string) => gzipSync(Buffer.from(toml)).toString('base64');
const userData = (...files: [string, string][]) =>
  `#cloud-config\nwrite_files:\n${files.map(([p, c]) => `- path: ${p}\n  content: ${JSON.stringify(c)}\n`).join('')}`;

let swtpm: SwtpmInstance;
let root: string;
let n = 0;
const logs: string[] = [];

async function readPcr8(): Promise<string> {
  const tpm = Tpm.open(swtpm.address);
  try {
    return Buffer.from((await tpm.readPcrs(TPM_ALG.SHA256, [8]))[0] ?? []).toString('hex');
  } finally {
    await tpm.close();
  }
}

function file(name: string, content: string | Buffer): string {
  const p = join(work, `${++n}-${name}`);
  writeFileSync(p, content);
  return p;
}

const read = (p: string) => readFileSync(join(root, p), 'utf8');

beforeAll(async () => {
  swtpm = await startSwtpm();
});

afterAll(async () => {
  await swtpm.stop();
  rmSync(work, { recursive: true, force: true });
});

beforeEach(async () => {
  root = join(work, `root-${++n}`);
  mkdirSync(root);
  logs.length = 0;
  // A fresh boot: PCRs back to zero.
  await swtpm.stop();
  swtpm = await startSwtpm();
});

afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

const provision = (source: Parameters<typeof provisionFiles>[0]['source'], extra: object = {}) =>
  provisionFiles({
    ...(source !== undefined && { source }),
    root,
    tpm: swtpm.address,
    log: (l) => logs.push(l),
    ...extra,
  });

describe('provisionFiles against swtpm', () => {
  it('extends PCR8 to sha256(0^32 || sha256(initdata)) and writes the allow-listed files', async () => {
    const src = file(
      'user-data',
      userData(['/run/peerpod/initdata', annotation(INITDATA)], ['/etc/passwd', 'root::0:0']),
    );
    const r = await provision({ kind: 'file', path: src });
    expect(r.pcr8?.outcome).toBe('extended');
    expect(await readPcr8()).toBe(pcr8Of(INITDATA));
    // tpm2-tools reads the same value.
    expect(await tpm2Tool(swtpm, 'tpm2_pcrread', ['sha256:8'])).toContain(
      `0x${pcr8Of(INITDATA).toUpperCase()}`,
    );
    expect(read('/run/peerpod/aa.toml')).toBe(AA);
    expect(read('/run/peerpod/cdh.toml')).toBe(CDH);
    expect(read('/run/peerpod/policy.rego')).toBe(POLICY);
    expect(read('/run/peerpod/initdata.digest')).toBe(sha256(INITDATA).toString('hex'));
    expect(read('/run/confidential-containers/initdata/initdata.toml')).toBe(INITDATA);
    expect(read('/run/peerpod/initdata')).toBe(annotation(INITDATA));
    expect(existsSync(join(root, '/run/peerpod/extra.sh'))).toBe(false);
    expect(existsSync(join(root, '/etc/passwd'))).toBe(false);
    expect(logs).toContain('File: /etc/passwd is not allowed in WriteFiles.');
    expect(logs).toContain('File: extra.sh is not allowed in initdata.');
    // aa.toml last: the attestation agent's path unit fires on it.
    expect(r.written.at(-1)).toBe('/run/peerpod/aa.toml');
    expect(statSync(join(root, '/run/peerpod/aa.toml')).mode & 0o777).toBe(0o600);
  });

  it("writes CAA's apf.json, auth.json and scratch marker from user data (0644), never its aa.toml", async () => {
    const APF = '{"pod-network":{"podip":"10.0.0.5/24"}}\n';
    const AUTH = '{"auths":{"registry.example":{"auth":"dTpw"}}}';
    const src = file(
      'user-data',
      userData(
        ['/run/peerpod/aa.toml', '[token_configs.kbs]\nurl = "https://attacker.example"\n'],
        ['/run/peerpod/apf.json', APF],
        ['/run/peerpod/auth.json', AUTH],
        ['/run/peerpod/scratch-space.marker', ''],
        ['/run/peerpod/initdata', annotation(INITDATA)],
      ),
    );
    const r = await provision({ kind: 'file', path: src });
    expect(read('/run/peerpod/apf.json')).toBe(APF);
    expect(read('/run/peerpod/auth.json')).toBe(AUTH);
    expect(read('/run/peerpod/scratch-space.marker')).toBe('');
    for (const p of ['apf.json', 'auth.json', 'scratch-space.marker']) {
      expect(statSync(join(root, '/run/peerpod', p)).mode & 0o777).toBe(0o644);
    }
    expect(statSync(join(root, '/run/peerpod')).mode & 0o777).toBe(0o755);
    // The attestation settings are the measured initdata's.
    expect(read('/run/peerpod/aa.toml')).toBe(AA);
    expect(logs).toContain(
      'File: /run/peerpod/aa.toml from user data is ignored: it comes from the initdata, which PCR8 measures.',
    );
    expect(r.written.at(-1)).toBe('/run/peerpod/aa.toml');
  });

  it('runs again after a restart without extending twice', async () => {
    const src = file('user-data', userData(['/run/peerpod/initdata', annotation(INITDATA)]));
    await provision({ kind: 'file', path: src });
    const again = await provision({ kind: 'file', path: src });
    expect(again.pcr8?.outcome).toBe('already-extended');
    expect(await readPcr8()).toBe(pcr8Of(INITDATA));
  });

  it('refuses other initdata once PCR8 is bound, writing nothing', async () => {
    await provision({
      kind: 'file',
      path: file('ud', userData(['/run/peerpod/initdata', annotation(INITDATA)])),
    });
    rmSync(join(root, 'run'), { recursive: true });
    const other = INITDATA.replace('kbs.example', 'evil.example');
    await expect(
      provision({ kind: 'file', path: file('ud', userData(['/run/peerpod/initdata', annotation(other)])) }),
    ).rejects.toMatchObject({ code: 'PCR8_CONFLICT' });
    expect(existsSync(join(root, 'run'))).toBe(false);
    expect(await readPcr8()).toBe(pcr8Of(INITDATA));
  });

  it('provisions the permissive default when there is no user data, or no initdata in it', async () => {
    const none = await provision(undefined);
    expect(none.initData.isDefault).toBe(true);
    expect(await readPcr8()).toBe(pcr8Of(DEFAULT_INITDATA_TOML));
    expect(read('/run/confidential-containers/initdata/initdata.toml')).toBe(DEFAULT_INITDATA_TOML);
    expect(read('/run/peerpod/policy.rego')).toMatch(/default ExecProcessRequest := true/);
    expect(read('/run/peerpod/policy.rego')).toMatch(/default ReadStreamRequest := true/);
    expect(read('/run/peerpod/cdh.toml')).toMatch(/url = ""/);
    expect(read('/run/peerpod/aa.toml')).not.toMatch(/url/);
    expect(existsSync(join(root, '/run/peerpod/initdata'))).toBe(false);

    rmSync(join(root, 'run'), { recursive: true });
    const onlyOther = await provision({
      kind: 'file',
      path: file('ud', userData(['/run/peerpod/apf.json', '{}'])),
    });
    expect(onlyOther.initData.isDefault).toBe(true);
    expect(onlyOther.pcr8?.outcome).toBe('already-extended');
  });

  it('fills in aa.toml and cdh.toml without a KBS when the initdata has none', async () => {
    const bare = `algorithm = "sha384"\nversion = "0.1.0"\n\n[data]\n`;
    const r = await provision({
      kind: 'file',
      path: file('ud', userData(['/run/peerpod/initdata', annotation(bare)])),
    });
    expect(r.initData.algorithm).toBe('sha384');
    const digest = createHash('sha384').update(bare).digest();
    expect(read('/run/peerpod/initdata.digest')).toBe(digest.toString('hex'));
    // A sha384 digest is extended by its first 32 bytes, as a peer-pod guest does.
    expect(await readPcr8()).toBe(
      createHash('sha256').update(Buffer.alloc(32)).update(digest.subarray(0, 32)).digest('hex'),
    );
    expect(read('/run/peerpod/aa.toml')).toMatch(/no key broker service/);
    expect(existsSync(join(root, '/run/peerpod/policy.rego'))).toBe(false);
  });

  it('reads user data from a cidata ISO image and from a cidata folder', async () => {
    const src = join(work, `cidata-${++n}`);
    mkdirSync(src);
    writeFileSync(join(src, 'user-data'), userData(['/run/peerpod/initdata', annotation(INITDATA)]));
    writeFileSync(join(src, 'meta-data'), 'instance-id: x\n');
    const iso = join(work, `cidata-${n}.iso`);
    await run('genisoimage', ['-quiet', '-output', iso, '-volid', 'cidata', '-joliet', '-rock', src]);
    await provision({ kind: 'file', path: iso });
    expect(await readPcr8()).toBe(pcr8Of(INITDATA));
    rmSync(join(root, 'run'), { recursive: true });
    const again = await provision({ kind: 'dir', path: src });
    expect(again.pcr8?.outcome).toBe('already-extended');
    expect(read('/run/peerpod/policy.rego')).toBe(POLICY);
  });

  it('refuses bad initdata and bad user data before touching PCR8 or the root', async () => {
    const cases: [string, string][] = [
      [userData(['/run/peerpod/initdata', 'not base64!']), 'INITDATA_INVALID'],
      [userData(['/run/peerpod/initdata', Buffer.from('plain').toString('base64')]), 'INITDATA_INVALID'],
      [userData(['/run/peerpod/initdata', annotation('version = "0.1.0"\n')]), 'INITDATA_INVALID'],
      [
        userData(['/run/peerpod/initdata', annotation(INITDATA.replace('sha256', 'md5'))]),
        'INITDATA_INVALID',
      ],
      [
        userData(['/run/peerpod/initdata', gzipSync(Buffer.alloc(2 * 1024 * 1024, 0x20)).toString('base64')]),
        'INITDATA_INVALID',
      ],
      ['runcmd: [reboot]\n', 'USER_DATA_INVALID'],
    ];
    for (const [ud, code] of cases) {
      await expect(provision({ kind: 'file', path: file('ud', ud) })).rejects.toMatchObject({ code });
    }
    await expect(
      provision(
        { kind: 'file', path: join(work, 'missing') },
        { fetch: { timeoutMs: 50, retryDelayMs: 10 } },
      ),
    ).rejects.toMatchObject({ code: 'USER_DATA_FETCH' });
    expect(existsSync(join(root, 'run'))).toBe(false);
    expect(await readPcr8()).toBe('0'.repeat(64));
  });

  it('reports an unreachable TPM as a TPM error and writes nothing', async () => {
    const err = await provisionFiles({ root, tpm: 'swtpm:127.0.0.1:1', log: () => {} }).catch((e) => e);
    expect(err).toBeInstanceOf(ProvisionError);
    expect(err.code).toBe('TPM');
    expect(existsSync(join(root, 'run'))).toBe(false);
  });
});

describe('user data from an IMDS-style endpoint', () => {
  let server: Server;
  let base: string;
  let answers: (() => [number, string])[];
  const seen: { url?: string; metadata?: string }[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push({ url: req.url ?? '', metadata: String(req.headers.metadata ?? '') });
      const next = answers.shift() ?? (() => [404, ''] as [number, string]);
      const [status, body] = next();
      res.writeHead(status, { 'content-type': 'text/plain' }).end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('asks Azure userData with Metadata: true, retries until it answers, and decodes base64', async () => {
    const ud = userData(['/run/peerpod/initdata', annotation(INITDATA)]);
    answers = [() => [404, ''], () => [503, ''], () => [200, Buffer.from(ud).toString('base64')]];
    seen.length = 0;
    await provision({ kind: 'imds', baseUrl: base }, { fetch: { timeoutMs: 20_000, retryDelayMs: 1 } });
    expect(seen).toHaveLength(3);
    expect(seen[0]).toEqual({
      url: '/metadata/instance/compute/userData?api-version=2021-01-01&format=text',
      metadata: 'true',
    });
    expect(await readPcr8()).toBe(pcr8Of(INITDATA));
    expect(logs.filter((l) => l.startsWith('retry'))).toHaveLength(2);
  });

  it('retries a status other than 200 as a ProvisionError with its own code', async () => {
    answers = [() => [503, ''], () => [200, Buffer.from('x').toString('base64')]];
    const retried: Error[] = [];
    await fetchUserData(
      { kind: 'imds', baseUrl: base },
      { timeoutMs: 20_000, retryDelayMs: 1, onRetry: (_n, e) => retried.push(e) },
    );
    expect(retried).toHaveLength(1);
    expect(retried[0]).toBeInstanceOf(ProvisionError);
    expect((retried[0] as ProvisionError).code).toBe('USER_DATA_STATUS');
    expect(retried[0]?.message).toBe('HTTP 503');
  });

  it('gives up after the deadline, and refuses an answer that is not base64', async () => {
    answers = [];
    await expect(
      provision({ kind: 'imds', baseUrl: base }, { fetch: { timeoutMs: 50, retryDelayMs: 20 } }),
    ).rejects.toMatchObject({ code: 'USER_DATA_FETCH' });
    // A request of the first attempt may still be on its way; it must not take the next answer.
    await new Promise((r) => setTimeout(r, 300));
    answers = [() => [200, '%%% not base64 %%%']];
    await expect(
      provision({ kind: 'imds', baseUrl: base }, { fetch: { timeoutMs: 5000, retryDelayMs: 1 } }),
    ).rejects.toThrow(/not base64/);
    expect(existsSync(join(root, 'run'))).toBe(false);
  });
});

describe('user data sources', () => {
  it('waits for a cidata file that appears late, and gives up on one that never does', async () => {
    const late = join(work, `late-${++n}`);
    setTimeout(() => writeFileSync(late, userData(['/run/peerpod/initdata', annotation(INITDATA)])), 150);
    await provision({ kind: 'file', path: late }, { fetch: { timeoutMs: 20_000, retryDelayMs: 20 } });
    expect(await readPcr8()).toBe(pcr8Of(INITDATA));
    expect(logs.some((l) => l.startsWith('retry 1'))).toBe(true);
    await expect(
      provision({ kind: 'dir', path: join(work, 'never') }, { fetch: { timeoutMs: 60, retryDelayMs: 20 } }),
    ).rejects.toMatchObject({ code: 'USER_DATA_FETCH' });
  });

  it('finds the default cidata folder or device, or none once the wait is over', async () => {
    const dir = join(work, `media-${++n}`);
    mkdirSync(dir);
    const device = join(work, `by-label-${n}`);
    expect(await defaultSource({ dir, device, waitMs: 50, pollMs: 10 })).toBeUndefined();
    writeFileSync(device, 'x');
    expect(await defaultSource({ dir, device, waitMs: 0 })).toEqual({ kind: 'file', path: device });
    writeFileSync(join(dir, 'user-data'), '');
    expect(await defaultSource({ dir, device, waitMs: 0 })).toEqual({ kind: 'dir', path: dir });
  });
});
