// The guest half against the real KBS, all as real processes: attestation-agent, confidential-data-hub
// and api-server-rest on their own sockets, configured the way the spec's initdata configures them.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, onTestFailed } from 'vitest';
import {
  type GuestHandle,
  type KbsHandle,
  mustSucceed,
  prepareKbs,
  SAMPLE_REFERENCE_VALUES,
  startGuest,
} from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-guest-e2e-'));
const key = randomBytes(32);
let kbs: KbsHandle;
let guest: GuestHandle;

const get = (path: string, timeoutMs?: number) => guest.get(path, timeoutMs);

function attestCount(): number {
  return (kbs.process.output().match(/"method":"POST","path":"\/kbs\/v0\/attest/g) ?? []).length;
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
  guest = await startGuest(kbs, dir);
});

afterAll(async () => {
  await guest?.stop();
  await kbs?.stop();
});

describe('guest components against the KBS, as real processes', () => {
  // A failure here is usually a timing between processes: their logs say which.
  beforeEach(() =>
    onTestFailed(() => {
      for (const [name, p] of [
        ['kbs', kbs?.process],
        ['attestation-agent', guest?.aa],
        ['confidential-data-hub', guest?.cdh],
        ['api-server-rest', guest?.rest],
      ] as const) {
        console.error(`--- ${name} ---\n${p?.output().slice(-6000) ?? '(not started)'}`);
      }
    }),
  );

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
    // The pod reads upstream's text only; why is in the hub's log.
    expect(await res.text()).toContain('[CDH] [ERROR]: Get Resource failed');
    expect(guest.cdh.output()).toMatch(/ECONNREFUSED|connect|unreachable|KBS/i);
    await kbs.start();
    const again = await get('/cdh/resource/default/app-secret/key');
    expect(again.status).toBe(200);
  });
});
