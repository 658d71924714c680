// `broker-guest --together`: the attestation agent and the data hub in one process (one Node runtime's
// memory), serving the pod through a separate api-server-rest against the real KBS, and stopping
// together; a failed start of the first stops the whole process before the second starts; the guest
// image's chain, with sealed-secret-init's unsealing before the agent policy gate listens.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binary, freePort, runToEnd, start, waitForListen } from './helpers/process.js';
import {
  guestConfig,
  type KbsHandle,
  mustSucceed,
  prepareKbs,
  SAMPLE_REFERENCE_VALUES,
  startApiServerRest,
} from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-together-'));
const key = randomBytes(32);
let kbs: KbsHandle;

beforeAll(async () => {
  kbs = await prepareKbs(dir);
  await kbs.start();
  writeFileSync(join(dir, 'key.bin'), key);
  await mustSucceed(
    kbs.admin('set-resource', '--path', 'default/app-secret/key', '--resource-file', join(dir, 'key.bin')),
  );
  for (const rv of SAMPLE_REFERENCE_VALUES) await mustSucceed(kbs.admin('set-sample-reference-value', ...rv));
  await mustSucceed(kbs.admin('set-resource-policy', '--affirming'));
});

afterAll(async () => {
  await kbs?.stop();
});

describe('attestation agent and data hub in one process', () => {
  it('serves flow B and the AA routes, and stops both on SIGTERM', async () => {
    const { aaSock, cdhSock, aaToml, cdhToml } = guestConfig(kbs, dir);
    writeFileSync(join(dir, 'aa.toml'), aaToml);
    writeFileSync(join(dir, 'cdh.toml'), cdhToml);
    const shared = start(binary('broker-guest'), [
      '--together',
      'attestation-agent',
      '-c',
      join(dir, 'aa.toml'),
      '--attestation_sock',
      `unix://${aaSock}`,
      '--and',
      'confidential-data-hub',
      '-c',
      join(dir, 'cdh.toml'),
    ]);
    const { rest, restPort } = await startApiServerRest({ aaSock, cdhSock });
    try {
      await waitForListen({ path: cdhSock }, shared);
      await waitForListen({ port: restPort }, rest);
      const res = await fetch(`http://127.0.0.1:${restPort}/cdh/resource/default/app-secret/key`);
      expect(res.status).toBe(200);
      expect(Buffer.from(await res.arrayBuffer())).toEqual(key);
      const token = await fetch(`http://127.0.0.1:${restPort}/aa/token?token_type=kbs`);
      expect(token.status).toBe(200);
      expect(JSON.parse(await token.text()).token.split('.')).toHaveLength(3);
    } finally {
      expect(await rest.stop()).toBe(0);
      expect(await shared.stop()).toBe(0);
    }
    // Both services logged their start and their stop, and took their sockets away.
    expect(shared.output()).toMatch(/"name":"attestation-agent".*Welcome/);
    expect(shared.output()).toMatch(/"name":"confidential-data-hub".*Welcome/);
    expect(shared.output()).toMatch(/attestation agent stopped/);
    expect(existsSync(aaSock)).toBe(false);
    expect(existsSync(cdhSock)).toBe(false);
  });

  it('exits with the agent failure and never starts the hub when the agent cannot start', async () => {
    const sub = join(dir, 'failing');
    mkdirSync(sub);
    const { cdhToml } = guestConfig(kbs, sub);
    writeFileSync(join(sub, 'cdh.toml'), cdhToml);
    const r = await runToEnd(binary('broker-guest'), [
      '--together',
      'attestation-agent',
      '-c',
      join(sub, 'missing-aa.toml'),
      '--attestation_sock',
      `unix://${join(sub, 'aa.sock')}`,
      '--and',
      'confidential-data-hub',
      '-c',
      join(sub, 'cdh.toml'),
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^attestation-agent: .*missing-aa\.toml/m);
    expect(r.stdout).not.toMatch(/confidential-data-hub/);
  });

  it('refuses a command that must keep its own process', async () => {
    const r = await runToEnd(binary('broker-guest'), ['--together', 'api-server-rest', '--features', 'all']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/'api-server-rest' cannot share a process/);
  });

  it("runs the guest image's chain: the agent, the hub, unsealing /sealed, then the gate", async () => {
    const sub = join(dir, 'chain');
    const keys = join(sub, 'keys');
    mkdirSync(keys, { recursive: true });
    const password = `pw-${randomBytes(8).toString('hex')}`;
    writeFileSync(join(sub, 'password'), password);
    await mustSucceed(runToEnd(binary('secret'), ['keygen', '--kid', 'chain-signing', '--output-dir', keys]));
    const store = (path: string, file: string) =>
      mustSucceed(kbs.admin('set-resource', '--path', path, '--resource-file', file));
    await store('default/chain-signing/jwk_public', join(keys, 'chain-signing-public.json'));
    await store('default/chain/password', join(sub, 'password'));
    const pointer = await mustSucceed(
      runToEnd(binary('secret'), [
        'seal',
        '--signing-kid',
        'kbs:///default/chain-signing/jwk_public',
        '--signing-jwk-path',
        join(keys, 'chain-signing-private.json'),
        'vault',
        '--resource-uri',
        'kbs:///default/chain/password',
        '--provider',
        'kbs',
      ]),
    );
    const volume = join(sub, 'sealed', 'db');
    mkdirSync(volume, { recursive: true });
    writeFileSync(join(volume, 'password'), pointer.trim());
    const { aaSock, cdhSock, aaToml, cdhToml } = guestConfig(kbs, sub);
    writeFileSync(join(sub, 'aa.toml'), aaToml);
    writeFileSync(join(sub, 'cdh.toml'), cdhToml);
    const gatePort = await freePort();
    // guest-image/rootfs/etc/systemd/system/attestation-agent.service, with the test's paths.
    const shared = start(binary('broker-guest'), [
      '--together',
      'attestation-agent',
      '-c',
      join(sub, 'aa.toml'),
      '-a',
      `unix://${aaSock}`,
      '--and',
      'confidential-data-hub',
      '-c',
      join(sub, 'cdh.toml'),
      '--and',
      'sealed-secret-init',
      '--root',
      join(sub, 'sealed'),
      '--cdh-socket',
      `unix://${cdhSock}`,
      '--and',
      'agent-policy-gate',
      'serve',
      '--listen',
      `tcp://127.0.0.1:${gatePort}`,
      '--agent',
      `unix://${join(sub, 'agent.sock')}`,
      '--no-initdata',
    ]);
    try {
      await waitForListen({ port: gatePort }, shared);
      // The gate listens only once unsealing has ended: the volume already holds the secret.
      expect(readFileSync(join(volume, 'password'), 'utf8')).toBe(password);
    } finally {
      expect(await shared.stop()).toBe(0);
    }
    expect(shared.output()).toMatch(/sealed-secret volumes processed/);
    expect(existsSync(cdhSock)).toBe(false);
  });
});
