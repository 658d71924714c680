// The guest half against the real KBS, all as real processes: attestation-agent, confidential-data-hub
// and api-server-rest on their own sockets, configured the way the spec's initdata configures them.
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binary, freePort, type Running, start, waitForListen } from './helpers/process.js';
import { type KbsHandle, mustSucceed, prepareKbs, SAMPLE_REFERENCE_VALUES } from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-guest-e2e-'));
const key = randomBytes(32);
let kbs: KbsHandle;
let aa: Running;
let cdh: Running;
let rest: Running;
let restPort = 0;

const aaSock = join(dir, 'aa', 'attestation-agent.sock');
const cdhSock = join(dir, 'cdh', 'cdh.sock');

function get(path: string, timeoutMs = 60_000): Promise<Response> {
  return fetch(`http://127.0.0.1:${restPort}${path}`, { signal: AbortSignal.timeout(timeoutMs) });
}

function attestCount(): number {
  return (kbs.process.output().match(/POST \/kbs\/v0\/attest/g) ?? []).length;
}

beforeAll(async () => {
  kbs = await prepareKbs(dir);
  await kbs.start();
  writeFileSync(join(dir, 'key.bin'), key);
  writeFileSync(join(dir, 'status'), 'success');
  await mustSucceed(
    kbs.admin('set-resource', '--path', 'default/app-secret/key', '--resource-file', join(dir, 'key.bin')),
  );
  await mustSucceed(
    kbs.admin(
      'set-resource',
      '--path',
      'default/attestation-status/status',
      '--resource-file',
      join(dir, 'status'),
    ),
  );
  for (const rv of SAMPLE_REFERENCE_VALUES) await mustSucceed(kbs.admin('set-sample-reference-value', ...rv));
  await mustSucceed(kbs.admin('set-resource-policy', '--affirming'));

  // The initdata the pod carries, and the two files kata extracts from it.
  const cert = kbs.tls.certPem.trim();
  const aaToml = `[token_configs]\n[token_configs.coco_as]\nurl = "${kbs.url}"\n\n[token_configs.kbs]\nurl = "${kbs.url}"\ncert = """\n${cert}\n"""\n`;
  const cdhToml = `socket = 'unix://${cdhSock}'\ncredentials = []\n\n[aa]\naa_socket = 'unix://${aaSock}'\n\n[kbc]\nname = "cc_kbc"\nurl = "${kbs.url}"\nkbs_cert = """\n${cert}\n"""\n`;
  const initdata = `algorithm = "sha256"\nversion = "0.1.0"\n\n[data]\n"aa.toml" = '''\n${aaToml}'''\n\n"cdh.toml" = '''\n${cdhToml}'''\n`;
  mkdirSync(join(dir, 'initdata'));
  writeFileSync(join(dir, 'initdata', 'aa.toml'), aaToml);
  writeFileSync(join(dir, 'initdata', 'cdh.toml'), cdhToml);
  writeFileSync(join(dir, 'initdata', 'initdata.toml'), initdata);

  aa = start(binary('attestation-agent'), [
    '-c',
    join(dir, 'initdata', 'aa.toml'),
    '--attestation_sock',
    `unix://${aaSock}`,
    '--initdata-toml',
    join(dir, 'initdata', 'initdata.toml'),
  ]);
  await waitForListen({ path: aaSock }, aa);
  cdh = start(binary('confidential-data-hub'), ['-c', join(dir, 'initdata', 'cdh.toml')]);
  await waitForListen({ path: cdhSock }, cdh);
  restPort = await freePort();
  rest = start(binary('api-server-rest'), [
    '--features',
    'all',
    '--cdh_addr',
    `unix://${cdhSock}`,
    '--aa_addr',
    `unix://${aaSock}`,
    '--bind',
    `127.0.0.1:${restPort}`,
  ]);
  await waitForListen({ port: restPort }, rest);
});

afterAll(async () => {
  await Promise.all([rest?.stop(), cdh?.stop(), aa?.stop()]);
  await kbs?.stop();
});

describe('guest components against the KBS, as real processes', () => {
  it('flow B: the init container gets the key from :8006', async () => {
    const res = await get('/cdh/resource/default/app-secret/key');
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(key);
  });

  it('lazy attestation: the status resource answers success, reusing the cached token', async () => {
    const before = attestCount();
    for (let i = 0; i < 3; i++) {
      const res = await get('/cdh/resource/default/attestation-status/status');
      expect(await res.text()).toBe('success');
    }
    expect(attestCount()).toBe(before);
  });

  it('serves an attestation token and evidence through the AA routes', async () => {
    const tok = await get('/aa/token?token_type=kbs');
    expect(tok.status).toBe(200);
    const body = JSON.parse(await tok.text());
    expect(body.token.split('.')).toHaveLength(3);
    expect(body.tee_keypair).toMatch(/BEGIN PRIVATE KEY/);
    const ev = await get('/aa/evidence?runtime_data=hello');
    expect(JSON.parse(await ev.text())).toEqual({
      svn: '1',
      report_data: Buffer.from('hello').toString('base64'),
    });
    const info = await get('/info');
    expect(info.status).toBe(200);
  });

  it('answers 404 for unknown routes and refuses path tricks', async () => {
    expect((await get('/cdh/resource')).status).toBe(404);
    const res = await get('/cdh/resource/default/../key');
    expect(res.status).not.toBe(200);
  });

  it('survives a KBS restart in the middle of a run', async () => {
    await kbs.stop();
    await kbs.start();
    const res = await get('/cdh/resource/default/app-secret/key');
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(key);
  });

  it('re-attests when the KBS considers the cached token expired', async () => {
    // The KBS comes back ten minutes in the future: the token the hub cached is past exp + leeway there.
    await kbs.stop();
    await kbs.start(['faketime', '-f', '+10m']);
    const before = attestCount();
    const res = await get('/cdh/resource/default/app-secret/key');
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(key);
    expect(attestCount()).toBeGreaterThan(before);
    expect(kbs.process.output()).toMatch(/TokenVerifierError|expired|"status":401/);
  });

  it('a KBS that is down gives a clear error from :8006, and no hang', async () => {
    await kbs.stop();
    const res = await get('/cdh/resource/default/app-secret/key', 45_000);
    expect(res.status).toBe(500);
    expect(await res.text()).toMatch(/ECONNREFUSED|connect|unreachable|KBS/i);
    await kbs.start();
    const again = await get('/cdh/resource/default/app-secret/key');
    expect(again.status).toBe(200);
  });
});
