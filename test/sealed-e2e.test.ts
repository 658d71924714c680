// Flow C with real processes: the secret tool seals a pointer, the CVM-side step unseals the files of a
// /sealed volume (and env values) through the data hub after attestation; every failure keeps the pointer.
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binary, runToEnd } from './helpers/process.js';
import {
  type GuestHandle,
  type KbsHandle,
  mustSucceed,
  prepareKbs,
  SAMPLE_REFERENCE_VALUES,
  startGuest,
} from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-sealed-e2e-'));
const password = `pw-${randomBytes(8).toString('hex')}`;
let kbs: KbsHandle;
let guest: GuestHandle;
const keys = join(dir, 'keys');

async function seal(resourceUri: string): Promise<string> {
  const out = await mustSucceed(
    runToEnd(binary('secret'), [
      'seal',
      '--signing-kid',
      'kbs:///default/signing-key/jwk_public',
      '--signing-jwk-path',
      join(keys, 'sealed-signing-private.json'),
      'vault',
      '--resource-uri',
      resourceUri,
      '--provider',
      'kbs',
    ]),
  );
  return out.trim();
}

/** A secret volume the way the kubelet projects one: files behind a `..data` symlink. */
function volume(name: string, files: Record<string, string>): string {
  const root = join(dir, 'sealed', name);
  const ts = join(root, '..2026_11_22_00_00_00.000000001');
  mkdirSync(ts, { recursive: true });
  symlinkSync('..2026_11_22_00_00_00.000000001', join(root, '..data'));
  for (const [file, content] of Object.entries(files)) {
    writeFileSync(join(ts, file), content);
    symlinkSync(join('..data', file), join(root, file));
  }
  return root;
}

function unsealVolumes() {
  return runToEnd(binary('sealed-secret-init'), [
    '--root',
    join(dir, 'sealed'),
    '--cdh-socket',
    `unix://${guest.cdhSock}`,
  ]);
}

beforeAll(async () => {
  kbs = await prepareKbs(dir);
  await kbs.start();
  mkdirSync(keys);
  await mustSucceed(runToEnd(binary('secret'), ['keygen', '--kid', 'sealed-signing', '--output-dir', keys]));
  await mustSucceed(
    kbs.admin(
      'set-resource',
      '--path',
      'default/signing-key/jwk_public',
      '--resource-file',
      join(keys, 'sealed-signing-public.json'),
    ),
  );
  writeFileSync(join(dir, 'pw'), password);
  await mustSucceed(
    kbs.admin('set-resource', '--path', 'default/db/password', '--resource-file', join(dir, 'pw')),
  );
  for (const rv of SAMPLE_REFERENCE_VALUES) await mustSucceed(kbs.admin('set-sample-reference-value', ...rv));
  await mustSucceed(kbs.admin('set-resource-policy', '--affirming'));
  guest = await startGuest(kbs, dir);
});

afterAll(async () => {
  await guest?.stop();
  await kbs?.stop();
});

describe('flow C: sealed secrets through real processes', () => {
  it('keygen writes the spec JWK members, with d only in the private file', () => {
    const pub = JSON.parse(readFileSync(join(keys, 'sealed-signing-public.json'), 'utf8'));
    const priv = JSON.parse(readFileSync(join(keys, 'sealed-signing-private.json'), 'utf8'));
    expect(pub).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig', kid: 'sealed-signing' });
    expect(pub.d).toBeUndefined();
    expect(Buffer.from(priv.d, 'base64url')).toHaveLength(32);
  });

  it('replaces a pointer in a /sealed volume with the secret, and leaves failures as pointers', async () => {
    const good = await seal('kbs:///default/db/password');
    expect(good.startsWith('sealed.')).toBe(true);
    const missing = await seal('kbs:///default/db/no-such-key');
    const parts = good.split('.');
    const payload = JSON.parse(Buffer.from(parts[2]!, 'base64url').toString());
    payload.name = 'kbs:///default/signing-key/jwk_public';
    const tampered = [
      parts[0],
      parts[1],
      Buffer.from(JSON.stringify(payload)).toString('base64url'),
      parts[3],
    ].join('.');

    const vol = volume('db', { password: good, missing, tampered, plain: 'not a pointer' });
    const r = await unsealVolumes();
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(join(vol, 'password'), 'utf8')).toBe(password);
    expect(readFileSync(join(vol, 'missing'), 'utf8')).toBe(missing);
    expect(readFileSync(join(vol, 'tampered'), 'utf8')).toBe(tampered);
    expect(readFileSync(join(vol, 'plain'), 'utf8')).toBe('not a pointer');
    expect(r.stdout + r.stderr).not.toContain(password);
  });

  it('unseals a pointer given as an env value', async () => {
    const pointer = await seal('kbs:///default/db/password');
    const r = await runToEnd(
      binary('sealed-secret-init'),
      ['exec', '--cdh-socket', `unix://${guest.cdhSock}`, '--', 'sh', '-c', 'printf %s "$DB_PASSWORD"'],
      { env: { ...process.env, DB_PASSWORD: pointer } },
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(password);
  });

  it('keeps the pointer when attestation does not release the secret', async () => {
    const pointer = await seal('kbs:///default/db/password');
    await mustSucceed(kbs.admin('set-resource-policy', '--deny-all'));
    try {
      const vol = volume('denied', { password: pointer });
      const r = await unsealVolumes();
      expect(r.code, r.stderr).toBe(0);
      expect(readFileSync(join(vol, 'password'), 'utf8')).toBe(pointer);
    } finally {
      await mustSucceed(kbs.admin('set-resource-policy', '--affirming'));
    }
  });
});
