// UnsealSecret end to end over a real unix socket: DataHubClient → the hub → a fake attestation agent
// (ttrpc) for tokens → a real in-process KBS holding the verification key and the secrets. Then the
// CVM-side step (`sealed-secret-init`) against the same hub: volumes and env values.
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { DataHubClient } from '@broker/guest-api';
import {
  dataHubUnsealer,
  kbsEnvelopePayload,
  mainInit,
  sealSecret,
  unsealEnv,
  unsealVolumes,
  unsignedSealedSecret,
  vaultPayload,
} from '@broker/sealed-secret';
import { Code, TtrpcError } from '@broker/ttrpc';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type CdhConfig, parseCdhConfig } from '../config.js';
import { type RunningDataHub, type StartDataHubOptions, startDataHub } from '../server.js';
import { captureLogger, FakeAa, startTestKbs, type TestKbs, tempDir } from '../testing/helpers.js';

const FIXTURES = vector('guest-components/sealed-secret');
const SIGNING_KID = 'kbs:///default/signing/jwk_public';
const PASSWORD = 'the password the workload needs';

let kbs: TestKbs;
let privateJwk: Record<string, unknown>;
let wrongJwk: Record<string, unknown>;
const kek = randomBytes(32);

beforeAll(async () => {
  privateJwk = JSON.parse(await readFile(join(FIXTURES, 'test-key.json'), 'utf8')) as Record<string, unknown>;
  wrongJwk = JSON.parse(await readFile(join(FIXTURES, 'test-key-2.json'), 'utf8')) as Record<string, unknown>;
  const { d: _d, ...publicJwk } = privateJwk;
  kbs = await startTestKbs();
  await kbs.setResource('default/signing/jwk_public', JSON.stringify(publicJwk));
  await kbs.setResource('default/app/password', PASSWORD);
  await kbs.setResource('default/type/tag', "that's the unsealed secret");
  await kbs.setResource('default/kek/one', kek);
});
afterAll(() => kbs.close());

let dir: string;
let cleanup: () => Promise<void>;
const stops: (() => Promise<void> | void)[] = [];
beforeEach(async () => {
  ({ dir, cleanup } = await tempDir('cdh-sealed-'));
});
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
  await cleanup();
});

function config(extra = ''): CdhConfig {
  return parseCdhConfig(
    `socket = "unix://${join(dir, 'cdh.sock')}"\ncredentials = []\n${extra}\n[aa]\naa_socket = "unix://${join(dir, 'aa.sock')}"\n[kbc]\nname = "cc_kbc"\nurl = "${kbs.url}"\n`,
  );
}

async function start(
  cfg: CdhConfig = config(),
  options: StartDataHubOptions = {},
): Promise<{ aa: FakeAa; hub: RunningDataHub; client: DataHubClient; lines: string[] }> {
  const aa = await FakeAa.start(join(dir, 'aa.sock'), kbs);
  stops.push(() => aa.close());
  const { logger, lines } = captureLogger();
  const hub = await startDataHub(cfg, { logger, credentialRoot: join(dir, 'kbs'), ...options });
  stops.push(() => hub.close({ graceMs: 0 }));
  const client = await DataHubClient.connect(cfg.socket, { timeoutMs: 20_000 });
  stops.push(() => client.close());
  return { aa, hub, client, lines };
}

const seal = (uri: string, key: Record<string, unknown> = privateJwk, kid = SIGNING_KID) =>
  sealSecret(vaultPayload(uri), { kid, privateJwk: key });

async function failure(p: Promise<unknown>): Promise<TtrpcError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(TtrpcError);
    return e as TtrpcError;
  }
  throw new Error('expected the call to fail');
}

const text = (b: Uint8Array) => Buffer.from(b).toString('utf8');

/**
 * A refused UnsealSecret: the caller gets upstream's text and nothing more (no key size, KBS answer
 * or path); resolves with the reason the hub logged for it.
 */
async function refusal(p: Promise<unknown>, lines: string[]): Promise<string> {
  const err = await failure(p);
  expect(err.code).toBe(Code.INTERNAL);
  expect(err.message).toBe('[CDH] [ERROR]: Unseal Secret failed');
  const logged = lines
    .map((l) => JSON.parse(l) as { msg: string; err?: string })
    .filter((e) => e.msg === 'UnsealSecret failed');
  return logged.at(-1)?.err ?? '';
}

describe('api.SealedSecretService/UnsealSecret', () => {
  it('verifies with the kid fetched from the KBS and returns the resource, with one token', async () => {
    const { aa, hub, client, lines } = await start();
    expect(hub.services).toContain('api.SealedSecretService');
    expect(text(await client.unsealSecret(seal('kbs:///default/app/password')))).toBe(PASSWORD);
    expect(text(await client.unsealSecret(seal('kbs:///default/type/tag')))).toBe(
      "that's the unsealed secret",
    );
    expect(aa.calls).toBe(1);
    const log = lines.join('');
    expect(log).toContain('unseal secret called');
    expect(log).toContain('kbs:///default/app/password');
    expect(log).not.toContain(PASSWORD);
  });

  it('unseals an envelope whose DEK is wrapped by a KEK resource of the KBS', async () => {
    const { client } = await start();
    const pointer = sealSecret(
      kbsEnvelopePayload(Buffer.from('enveloped'), { keyId: 'kbs:///default/kek/one', kek }),
      {
        kid: SIGNING_KID,
        privateJwk,
      },
    );
    expect(text(await client.unsealSecret(pointer))).toBe('enveloped');
  });

  it('keeps the size of a wrong key-encryption key in the log, away from the caller', async () => {
    await kbs.setResource('default/kek/short', randomBytes(16));
    const { client, lines } = await start();
    const pointer = sealSecret(
      kbsEnvelopePayload(Buffer.from('enveloped'), { keyId: 'kbs:///default/kek/short', kek }),
      { kid: SIGNING_KID, privateJwk },
    );
    const reason = await refusal(client.unsealSecret(pointer), lines);
    expect(reason).toContain('the key-encryption key is 16 bytes, expected 32');
  });

  it('refuses a tampered pointer and one signed by the wrong key, with upstream wording', async () => {
    const { client, lines } = await start();
    const pointer = seal('kbs:///default/app/password');
    const cut = pointer.lastIndexOf('.') - 5;
    const tampered = `${pointer.slice(0, cut)}${pointer[cut] === 'A' ? 'B' : 'A'}${pointer.slice(cut + 1)}`;
    for (const bad of [tampered, seal('kbs:///default/app/password', wrongJwk)]) {
      expect(await refusal(client.unsealSecret(bad), lines)).toBe('Signature Error: signature error');
    }
    expect(lines.join('')).not.toContain(PASSWORD);
  });

  it('keeps the secret when attestation fails (the agent cannot give a token)', async () => {
    const { aa, client, lines } = await start();
    aa.fallback = 'fail';
    const reason = await refusal(client.unsealSecret(seal('kbs:///default/app/password')), lines);
    expect(reason).toMatch(
      /^Failed to get key from KMS: Kbs client error: get resource failed: get token failed: Attestation Agent token provider error: cal ttrpc failed: /,
    );
  });

  it('reports a pointer to a resource the KBS does not release', async () => {
    const { client, lines } = await start();
    const reason = await refusal(client.unsealSecret(seal('kbs:///default/app/missing')), lines);
    expect(reason).toMatch(
      /^unseal vault secret failed: kms interface when get secret from provider: Kbs client error: get resource failed: request unauthorized \(/,
    );
  });

  it('reads a kid from the sealed-secret key folder and refuses one that leaves it', async () => {
    const keys = join(dir, 'sealed-secret');
    await mkdir(keys);
    await writeFile(join(keys, 'test-key'), await readFile(join(FIXTURES, 'test-key.json')));
    await writeFile(join(dir, 'outside-key'), await readFile(join(FIXTURES, 'test-key.json')));
    await symlink(join(dir, 'outside-key'), join(keys, 'linked'));
    const { client, lines } = await start(config(), { sealedSecretKeyDir: keys });
    expect(text(await client.unsealSecret(seal('kbs:///default/app/password', privateJwk, 'test-key')))).toBe(
      PASSWORD,
    );
    for (const kid of ['../outside-key', join(dir, 'outside-key'), 'linked']) {
      const reason = await refusal(
        client.unsealSecret(seal('kbs:///default/app/password', privateJwk, kid)),
        lines,
      );
      expect(reason).toBe('parse SealedSecret failed: Invalid KID Key Path');
    }
  });

  it('reads the unsigned 4-piece form only with skip_sealed_secret_verification', async () => {
    const fake = unsignedSealedSecret(
      `${JSON.stringify(vaultPayload('kbs:///default/type/tag'), null, 2)}\n`,
    );
    const strict = await start();
    expect(await refusal(strict.client.unsealSecret(fake), strict.lines)).toBe(
      'parse SealedSecret failed: Failed to parse JWS',
    );
    strict.client.close();
    await strict.hub.close({ graceMs: 0 });
    await strict.aa.close();

    const { client } = await start(config('skip_sealed_secret_verification = true'));
    expect(text(await client.unsealSecret(fake))).toBe("that's the unsealed secret");
  });

  it('refuses hostile input with bounded messages', async () => {
    const { aa, client, lines } = await start();
    const cases: [Uint8Array | string, string][] = [
      ['not a pointer', 'parse SealedSecret failed: Failed to parse JWS'],
      [Buffer.from([0xff, 0xfe, 0xfd]), 'parse SealedSecret failed: Secret string must be UTF-8'],
      [
        `sealed.${'A'.repeat(1024 * 1024)}`,
        'parse SealedSecret failed: sealed secret is larger than 1048576 bytes',
      ],
      ['sealed.e30.e30.AAAA', 'parse SealedSecret failed: Could not find kid'],
    ];
    for (const [input, reason] of cases) {
      expect(await refusal(client.unsealSecret(input), lines)).toBe(reason);
    }
    expect(aa.calls).toBe(0);
  });
});

describe('the CVM-side step against the hub', () => {
  async function volume(root: string, files: Record<string, string>): Promise<void> {
    const ts = '..2025_01_01_00_00_00.1';
    await mkdir(join(root, ts), { recursive: true });
    for (const [name, content] of Object.entries(files)) {
      await writeFile(join(root, ts, name), content, { mode: 0o644 });
      await symlink(`..data/${name}`, join(root, name));
    }
    await symlink(ts, join(root, '..data'));
  }

  it('replaces good pointers and keeps tampered and missing ones; the step exits 0', async () => {
    const { client, lines } = await start();
    client.close();
    const root = join(dir, 'sealed');
    const good = seal('kbs:///default/app/password');
    const tampered = seal('kbs:///default/app/password', wrongJwk);
    const missing = seal('kbs:///default/app/missing');
    await volume(join(root, 'creds'), { password: good, tampered, missing, plain: 'not sealed' });
    const out: string[] = [];
    const status = await mainInit(['--root', root, '--cdh-socket', `unix://${join(dir, 'cdh.sock')}`], {
      stdout: (t) => out.push(t),
      stderr: (t) => out.push(t),
    });
    expect(status).toBe(0);
    expect(await readFile(join(root, 'creds', 'password'), 'utf8')).toBe(PASSWORD);
    expect(await readFile(join(root, 'creds', 'tampered'), 'utf8')).toBe(tampered);
    expect(await readFile(join(root, 'creds', 'missing'), 'utf8')).toBe(missing);
    expect(await readFile(join(root, 'creds', 'plain'), 'utf8')).toBe('not sealed');
    const log = out.join('');
    expect(log).toContain('"msg":"sealed secret unsealed"');
    // The step is told upstream's text; why is in the hub's log.
    expect(log).toContain('Unseal Secret failed');
    expect(log).not.toContain('Signature Error');
    expect(lines.join('')).toContain('Signature Error: signature error');
    expect(log).toContain('kbs:///default/app/missing');
    expect(log).toContain('"unsealed":1,"kept":2');
    expect(log).not.toContain(PASSWORD);
  });

  it('keeps every pointer when attestation fails', async () => {
    const { aa, lines } = await start();
    aa.fallback = 'fail';
    const root = join(dir, 'sealed');
    await mkdir(root);
    const pointer = seal('kbs:///default/app/password');
    await writeFile(join(root, 'password'), pointer);
    const hub = dataHubUnsealer(`unix://${join(dir, 'cdh.sock')}`);
    stops.push(() => hub.close());
    const results = await unsealVolumes(root, { unseal: hub.unseal });
    expect(results.map((r) => r.outcome)).toEqual(['failed']);
    expect(results[0]?.reason).toBe('[CDH] [ERROR]: Unseal Secret failed');
    expect(lines.join('')).toMatch(/get token failed/);
    expect(await readFile(join(root, 'password'), 'utf8')).toBe(pointer);
  });

  it('keeps every pointer when the hub is not running, and still exits 0', async () => {
    const root = join(dir, 'sealed');
    await mkdir(root);
    const pointer = seal('kbs:///default/app/password');
    await writeFile(join(root, 'password'), pointer);
    const out: string[] = [];
    const status = await mainInit(['--root', root, '--cdh-socket', `unix://${join(dir, 'none.sock')}`], {
      stderr: (t) => out.push(t),
    });
    expect(status).toBe(0);
    expect(await readFile(join(root, 'password'), 'utf8')).toBe(pointer);
    expect(out.join('')).toContain('cannot reach the confidential data hub');
  });

  it('unseals env values through the hub, keeping the ones that fail', async () => {
    await start();
    const hub = dataHubUnsealer(`unix://${join(dir, 'cdh.sock')}`);
    stops.push(() => hub.close());
    const bad = seal('kbs:///default/app/password', wrongJwk);
    const env = await unsealEnv(['A=1', `PASSWORD=${seal('kbs:///default/app/password')}`, `BAD=${bad}`], {
      unseal: hub.unseal,
    });
    expect(env).toEqual(['A=1', `PASSWORD=${PASSWORD}`, `BAD=${bad}`]);
  });

  it('`sealed-secret-init exec` runs the command with unsealed env values', async () => {
    await start();
    const seen: Record<string, string>[] = [];
    const status = await mainInit(
      ['exec', '--cdh-socket', `unix://${join(dir, 'cdh.sock')}`, '--', 'app', '--flag'],
      {
        env: { PASSWORD: seal('kbs:///default/app/password'), HOME: '/root' },
        stdout: () => {},
        run: async (command, args, env) => {
          expect([command, ...args]).toEqual(['app', '--flag']);
          seen.push(env);
          return 7;
        },
      },
    );
    expect(status).toBe(7);
    expect(seen).toEqual([{ PASSWORD: PASSWORD, HOME: '/root' }]);
  });
});
