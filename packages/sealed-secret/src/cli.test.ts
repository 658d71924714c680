// The `secret` CLI in-process: keygen, seal (vault, envelope, k8s output), unseal through a data hub,
// through the attestation agent and by attesting itself to a real in-process KBS.
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SampleAttester } from '@broker/attester';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { main } from './cli.js';
import type { JsonMap } from './json.js';
import { parsePayload, serializePayload, vaultPayload } from './payload.js';
import { readSealedSecret, unsignedSealedSecret } from './pointer.js';
import {
  fixture,
  startFakeAa,
  startFakeHub,
  startTestKbs,
  type TestKbs,
  tempDir,
} from './testing/helpers.js';

let dir: string;
let cleanup: () => Promise<void>;
const stops: (() => Promise<void> | void)[] = [];
beforeEach(async () => {
  ({ dir, cleanup } = await tempDir('secret-cli-'));
});
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
  await cleanup();
});

interface Run {
  status: number;
  stdout: string;
  stderr: string;
}

async function run(argv: string[], extra: { env?: Record<string, string> } = {}): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const status = await main(argv, {
    stdout: (t) => {
      stdout += t;
    },
    stderr: (t) => {
      stderr += t;
    },
    cwd: dir,
    env: extra.env ?? {},
    attester: new SampleAttester(),
  });
  return { status, stdout, stderr };
}

async function keys(kid = 'sealed-signing'): Promise<{ privatePath: string; publicJwk: JsonMap }> {
  const r = await run(['keygen', '--kid', kid, '--output-dir', dir]);
  expect(r.status).toBe(0);
  const publicJwk = JSON.parse(await readFile(join(dir, `${kid}-public.json`), 'utf8')) as JsonMap;
  return { privatePath: join(dir, `${kid}-private.json`), publicJwk };
}

describe('secret keygen', () => {
  it('writes a private and a public P-256 JWK as upstream, d only in the private file', async () => {
    const r = await run(['keygen', '--kid', 'my-signing-key', '--output-dir', 'keys']).catch(() => null);
    expect(r?.status).toBe(1); // the folder does not exist yet
    await mkdir(join(dir, 'keys'));
    const ok = await run(['keygen', '--kid', 'my-signing-key', '--output-dir', 'keys']);
    expect(ok.status).toBe(0);
    expect(ok.stdout).toBe(
      'Generated keys/my-signing-key-private.json and keys/my-signing-key-public.json\n',
    );
    const privateText = await readFile(join(dir, 'keys', 'my-signing-key-private.json'), 'utf8');
    const priv = JSON.parse(privateText) as Record<string, string>;
    const pub = JSON.parse(await readFile(join(dir, 'keys', 'my-signing-key-public.json'), 'utf8')) as Record<
      string,
      string
    >;
    expect(Object.keys(priv)).toEqual(['kty', 'crv', 'alg', 'use', 'kid', 'd', 'x', 'y']);
    expect(Object.keys(pub)).toEqual(['kty', 'crv', 'alg', 'use', 'kid', 'x', 'y']);
    expect(pub).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig', kid: 'my-signing-key' });
    for (const c of ['d', 'x', 'y']) expect(Buffer.from(priv[c] as string, 'base64url')).toHaveLength(32);
    expect([pub.x, pub.y]).toEqual([priv.x, priv.y]);
    expect(privateText).toMatch(/^\{\n {2}"kty": "EC",\n/);
    expect(privateText.endsWith('}\n')).toBe(true);
    expect((await stat(join(dir, 'keys', 'my-signing-key-private.json'))).mode & 0o777).toBe(0o600);
  });

  it('uses the default kid and refuses to overwrite', async () => {
    expect((await run(['keygen'])).stdout).toBe(
      'Generated sealed-signing-private.json and sealed-signing-public.json\n',
    );
    const again = await run(['keygen']);
    expect(again.status).toBe(1);
    expect(again.stderr).toBe('Error: "sealed-signing-private.json" already exists\n');
    expect((await run(['keygen', '--kid', '../x'])).status).toBe(2);
  });
});

describe('secret seal', () => {
  it('seals a vault pointer: warning on stderr, pointer alone on stdout, verifiable with the public key', async () => {
    const { privatePath, publicJwk } = await keys();
    const r = await run([
      'seal',
      '--signing-kid',
      'kbs:///default/signing/jwk_public',
      '--signing-jwk-path',
      privatePath,
      'vault',
      '--resource-uri',
      'kbs:///default/app/password',
      '--provider',
      'kbs',
    ]);
    expect(r.status).toBe(0);
    expect(r.stderr).toBe('Warning: Secrets must be provisioned to provider separately.\n');
    expect(r.stdout).toMatch(/^sealed\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\n$/);
    const payload = await readSealedSecret(r.stdout.trim(), {
      resolveKey: async (kid) => {
        expect(kid).toBe('kbs:///default/signing/jwk_public');
        return publicJwk;
      },
    });
    expect(payload).toEqual(vaultPayload('kbs:///default/app/password'));
  });

  it('takes short flags, `=` values, provider settings and annotations as upstream', async () => {
    const { privatePath, publicJwk } = await keys();
    const r = await run([
      'seal',
      `--signing-kid=kbs:///default/signing/jwk_public`,
      `--signing-jwk-path=${privatePath}`,
      'vault',
      '-r',
      'kbs:///default/app/password',
      '-pkbs',
      '--provider-settings',
      '{"region":"x"}',
      '-a',
      '{"note":1}',
    ]);
    expect(r.status).toBe(0);
    const payload = await readSealedSecret(r.stdout.trim(), { resolveKey: async () => publicJwk });
    expect(serializePayload(payload)).toBe(
      '{"version":"0.1.0","type":"vault","name":"kbs:///default/app/password","provider":"kbs","provider_settings":{"region":"x"},"annotations":{"note":1}}',
    );
  });

  it('prints a Kubernetes Secret with stringData or base64 data', async () => {
    const { privatePath } = await keys();
    const base = ['seal', '--signing-kid', 'kbs:///d/s/k', '--signing-jwk-path', privatePath];
    const vault = ['vault', '-r', 'kbs:///default/app/password', '-p', 'kbs'];
    const k8s = await run([
      ...base,
      '--format',
      'k8s',
      '--name',
      'db-creds',
      '--namespace',
      'apps',
      '--key',
      'password',
      ...vault,
    ]);
    expect(k8s.status).toBe(0);
    const doc = parseYaml(k8s.stdout) as Record<string, unknown>;
    expect(doc).toMatchObject({
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'Opaque',
      metadata: { name: 'db-creds', namespace: 'apps' },
    });
    const pointer = (doc.stringData as Record<string, string>).password as string;
    expect(pointer.startsWith('sealed.')).toBe(true);

    const data = await run([
      ...base,
      '--format',
      'k8s-data',
      '--name',
      'db-creds',
      '--key',
      'password',
      ...vault,
    ]);
    const dataDoc = parseYaml(data.stdout) as {
      data: Record<string, string>;
      metadata: Record<string, string>;
    };
    expect(
      Buffer.from(dataDoc.data.password as string, 'base64')
        .toString()
        .startsWith('sealed.'),
    ).toBe(true);
    expect(dataDoc.metadata.namespace).toBeUndefined();

    const bad = await run([...base, '--format', 'k8s', '--name', 'Bad_Name', '--key', 'password', ...vault]);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toMatch(/not a DNS subdomain/);
    expect((await run([...base, '--format', 'k8s', '--key', 'password', ...vault])).status).toBe(2);
  });

  it('seals an envelope with the kbs key provider', async () => {
    const { privatePath, publicJwk } = await keys();
    const kek = Buffer.alloc(32, 7);
    await writeFile(join(dir, 'kek.bin'), kek);
    await writeFile(join(dir, 'secret.txt'), 'enveloped value');
    const r = await run([
      'seal',
      '--signing-kid',
      'kbs:///default/signing/jwk_public',
      '--signing-jwk-path',
      privatePath,
      'envelope',
      '-k',
      'kbs:///default/kek/one',
      '-f',
      'secret.txt',
      'kbs',
      '--kek-path',
      'kek.bin',
    ]);
    expect(r.status).toBe(0);
    expect(r.stderr).toBe('');
    const payload = await readSealedSecret(r.stdout.trim(), { resolveKey: async () => publicJwk });
    expect(payload).toMatchObject({
      type: 'envelope',
      key_id: 'kbs:///default/kek/one',
      wrap_type: 'A256GCM',
      provider: 'kbs',
    });
  });

  it.each([
    [['seal'], 2, /requires a subcommand/],
    [['seal', 'vault', '-r', 'kbs:///a/b/c', '-p', 'kbs'], 2, /--signing-kid <SIGNING_KID>/],
    [['seal', '--signing-kid', 'k', '--signing-jwk-path', 'x', 'vault', '-p', 'kbs'], 2, /--resource-uri/],
    [['seal', '--signing-kid', 'k', '--signing-kid', 'k', 'vault'], 2, /given more than once/],
    [
      [
        'seal',
        '--signing-kid',
        'k',
        '--signing-jwk-path',
        'x',
        'vault',
        '-r',
        'kbs:///a/b/c',
        '-p',
        'kbs',
        '-k',
        'z',
      ],
      2,
      /cannot be used with vault/,
    ],
    [
      ['seal', '--signing-kid', 'k', '--signing-jwk-path', 'x', 'other'],
      2,
      /unrecognized subcommand 'other'/,
    ],
    [
      ['seal', '--signing-kid', 'k', '--signing-jwk-path', 'x', 'vault', '-r', 'not-a-uri', '-p', 'kbs'],
      1,
      /not a kbs:\/\/\/repository\/type\/tag or kbs\+<plugin>:\/\/\/<path> URI/,
    ],
    [
      [
        'seal',
        '--signing-kid',
        'k',
        '--signing-jwk-path',
        'x',
        'vault',
        '-r',
        'kbs:///a/b/c',
        '-p',
        'kbs',
        '--provider-settings',
        '[1]',
      ],
      1,
      /Provider Settings Malformed/,
    ],
    [
      ['seal', '--signing-kid', 'k', '--signing-jwk-path', 'x', 'envelope', '-k', 'kbs:///a/b/c', '-f', 'f'],
      2,
      /requires a subcommand/,
    ],
    [
      [
        'seal',
        '--signing-kid',
        'k',
        '--signing-jwk-path',
        'x',
        'envelope',
        '-k',
        'kbs:///a/b/c',
        '-f',
        'f',
        'ali',
      ],
      1,
      /`ali` key provider is not built into this tool/,
    ],
    [
      [
        'seal',
        '--signing-kid',
        'k',
        '--signing-jwk-path',
        'x',
        'envelope',
        '-k',
        'kbs:///a/b/c',
        '-f',
        'f',
        'dummy',
      ],
      1,
      /please rebuild the secret cli tool/,
    ],
    [
      [
        'seal',
        '--signing-kid',
        'k',
        '--signing-jwk-path',
        'missing.json',
        'vault',
        '-r',
        'kbs:///a/b/c',
        '-p',
        'kbs',
      ],
      1,
      /cannot read the signing JWK/,
    ],
    [['nope'], 2, /unknown command 'nope'/],
    [
      ['unseal', '--bogus'],
      2,
      /^secret unseal: unknown option '--bogus'\nRun 'secret unseal --help' for usage/,
    ],
  ])('refuses %j with status %i', async (argv, status, message) => {
    const r = await run(argv);
    expect(r.status).toBe(status);
    expect(r.stderr).toMatch(message);
  });

  it('says a missing signing key in one line, in words, with the stack only when asked for', async () => {
    const argv = [
      'seal',
      '--signing-kid',
      'k',
      '--signing-jwk-path',
      'absent.json',
      'vault',
      '-r',
      'kbs:///a/b/c',
      '-p',
      'kbs',
    ];
    const r = await run(argv);
    expect(r.status).toBe(1);
    const lines = r.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(2); // the vault warning, then the failure
    expect(lines[1]).toMatch(/^Error: .*absent\.json.*no such file or directory; check the path$/);
    expect(lines[1]).not.toContain('ENOENT');
    const traced = await run(argv, { env: { RUST_BACKTRACE: '1' } });
    expect(traced.stderr).toMatch(/\n {4}at /);
  });

  it('refuses a signing key that is not a P-256 private JWK', async () => {
    const { publicJwk } = await keys();
    await writeFile(join(dir, 'pub.json'), JSON.stringify(publicJwk));
    const r = await run([
      'seal',
      '--signing-kid',
      'k',
      '--signing-jwk-path',
      'pub.json',
      'vault',
      '-r',
      'kbs:///a/b/c',
      '-p',
      'kbs',
    ]);
    expect(r.status).toBe(1);
    // Upstream prints the vault warning before it reads the key.
    expect(r.stderr).toBe(
      'Warning: Secrets must be provisioned to provider separately.\nError: Signing key error: Key must be EC P256 private key\n',
    );
  });

  it('prints help and version', async () => {
    expect((await run(['--help'])).stdout).toMatch(/^Usage: secret <COMMAND>/);
    expect((await run(['seal', '--help'])).stdout).toMatch(/--signing-jwk-path/);
    expect((await run(['-V'])).stdout).toBe('secret 0.1.0 (broker dev)\n');
    expect((await run([])).status).toBe(2);
  });
});

describe('secret unseal', () => {
  let kbs: TestKbs;
  beforeAll(async () => {
    kbs = await startTestKbs();
    await kbs.setResource('default/app/password', 'from the KBS');
    await kbs.setResource('default/type/tag', "that's the unsealed secret");
    await kbs.setResource('default/kek/one', Buffer.alloc(32, 7));
  });
  afterAll(() => kbs.close());

  async function sealToFile(privatePath: string, uri = 'kbs:///default/app/password'): Promise<string> {
    const r = await run([
      'seal',
      '--signing-kid',
      'kbs:///default/signing/jwk_public',
      '--signing-jwk-path',
      privatePath,
      'vault',
      '-r',
      uri,
      '-p',
      'kbs',
    ]);
    await writeFile(join(dir, 'sealed.txt'), r.stdout);
    return r.stdout.trim();
  }

  it('attests to the KBS itself (--kbs-url), verifies and writes F.unsealed', async () => {
    const { privatePath, publicJwk } = await keys();
    await kbs.setResource('default/signing/jwk_public', JSON.stringify(publicJwk));
    await sealToFile(privatePath);
    const r = await run(['unseal', '--file-path', 'sealed.txt', '--kbs-url', kbs.url]);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(
      `unseal success, secret is saved in newly generated file: '"sealed.txt.unsealed"'\n`,
    );
    expect(await readFile(join(dir, 'sealed.txt.unsealed'), 'utf8')).toBe('from the KBS');
    expect((await stat(join(dir, 'sealed.txt.unsealed'))).mode & 0o777).toBe(0o600);
    const again = await run(['unseal', '--file-path', 'sealed.txt', '--kbs-url', kbs.url]);
    expect(again.status).toBe(1);
    expect(again.stderr).toBe('Error: "sealed.txt.unsealed" already exists\n');
  });

  it('refuses a pointer signed by another key and writes nothing', async () => {
    const { publicJwk } = await keys('one');
    await kbs.setResource('default/signing/jwk_public', JSON.stringify(publicJwk));
    const other = await keys('two');
    await sealToFile(other.privatePath);
    const r = await run(['unseal', '-f', 'sealed.txt', '--kbs-url', kbs.url]);
    expect(r.status).toBe(1);
    expect(r.stderr).toBe('Error: Signature Error: signature error\n');
    await expect(stat(join(dir, 'sealed.txt.unsealed'))).rejects.toThrow();
  });

  it('unseals kata CI fake secret with --skip-verification, and an envelope', async () => {
    const fake = unsignedSealedSecret(
      `${JSON.stringify(vaultPayload('kbs:///default/type/tag'), null, 2)}\n`,
    );
    await writeFile(join(dir, 'fake'), `${fake}\n`);
    const r = await run(['unseal', '-f', 'fake', '-s', '--kbs-url', kbs.url]);
    expect(r.status).toBe(0);
    expect(await readFile(join(dir, 'fake.unsealed'), 'utf8')).toBe("that's the unsealed secret");
    expect((await run(['unseal', '-f', 'fake', '--kbs-url', kbs.url])).stderr).toMatch(/already exists/);

    const { privatePath, publicJwk } = await keys();
    await kbs.setResource('default/signing/jwk_public', JSON.stringify(publicJwk));
    await writeFile(join(dir, 'kek.bin'), Buffer.alloc(32, 7));
    await writeFile(join(dir, 'value'), 'in an envelope');
    const sealed = await run([
      'seal',
      '--signing-kid',
      'kbs:///default/signing/jwk_public',
      '--signing-jwk-path',
      privatePath,
      'envelope',
      '-k',
      'kbs:///default/kek/one',
      '-f',
      'value',
      'kbs',
      '--kek-path',
      'kek.bin',
      '--wrap-type',
      'A256CTR',
    ]);
    await writeFile(join(dir, 'env.sealed'), sealed.stdout);
    expect(parsePayload(Buffer.from(sealed.stdout.split('.')[2] as string, 'base64url')).type).toBe(
      'envelope',
    );
    expect((await run(['unseal', '-f', 'env.sealed', '--kbs-url', kbs.url])).status).toBe(0);
    expect(await readFile(join(dir, 'env.sealed.unsealed'), 'utf8')).toBe('in an envelope');
  });

  it('gets tokens from the attestation agent with --aa-kbc-params cc_kbc::<url>', async () => {
    const { privatePath, publicJwk } = await keys();
    await kbs.setResource('default/signing/jwk_public', JSON.stringify(publicJwk));
    await sealToFile(privatePath);
    const aa = await startFakeAa(join(dir, 'aa.sock'), kbs.url);
    stops.push(() => aa.close());
    const r = await run(['unseal', '-f', 'sealed.txt', '-a', `cc_kbc::${kbs.url}`], {
      env: { AA_SOCKET: `unix://${join(dir, 'aa.sock')}` },
    });
    expect(r.stderr).toBe('');
    expect(await readFile(join(dir, 'sealed.txt.unsealed'), 'utf8')).toBe('from the KBS');
    expect(aa.calls()).toBe(1);
    await writeFile(join(dir, 'other.txt'), 'sealed.x');
    const offline = await run(['unseal', '-f', 'other.txt', '-a', 'offline_fs_kbc::null']);
    expect(offline.stderr).toMatch(/`offline_fs_kbc` is not supported here/);
    const twice = await run(['unseal', '-f', 'other.txt', '-a', 'cc_kbc::http://kbs::8080']);
    expect(twice.stderr).toMatch(/invalid value 'cc_kbc::http:\/\/kbs::8080' for '--aa-kbc-params'/);
  });

  it('asks a data hub with --cdh-socket', async () => {
    const { privatePath, publicJwk } = await keys();
    const pointer = await sealToFile(privatePath);
    const hub = await startFakeHub(
      join(dir, 'cdh.sock'),
      new Map([
        ['kbs:///default/signing/jwk_public', Buffer.from(JSON.stringify(publicJwk))],
        ['kbs:///default/app/password', Buffer.from('from the hub')],
      ]),
    );
    stops.push(() => hub.close());
    const r = await run(['unseal', '-f', 'sealed.txt', '--cdh-socket', `unix://${join(dir, 'cdh.sock')}`]);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(hub.calls).toEqual([pointer]);
    expect(await readFile(join(dir, 'sealed.txt.unsealed'), 'utf8')).toBe('from the hub');

    hub.fail = true;
    const failed = await run([
      'unseal',
      '-f',
      'sealed.txt',
      '--cdh-socket',
      `unix://${join(dir, 'cdh.sock')}`,
      '--signing-key-dir',
      dir,
    ]);
    expect(failed.status).toBe(2);
    await writeFile(join(dir, 'b.txt'), pointer);
    const refused = await run(['unseal', '-f', 'b.txt', '--cdh-socket', `unix://${join(dir, 'cdh.sock')}`]);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toBe('Error: [CDH] [ERROR]: Unseal Secret failed: attestation failed\n');
  });

  it('needs exactly one way to reach the secret', async () => {
    await writeFile(join(dir, 'p'), 'sealed.x');
    expect((await run(['unseal', '-f', 'p'])).stderr).toMatch(
      /one of --cdh-socket, --aa-kbc-params or --kbs-url is required/,
    );
    expect((await run(['unseal', '-f', 'p', '--kbs-url', 'http://x', '--cdh-socket', '/s'])).stderr).toMatch(
      /cannot be used together/,
    );
    expect((await run(['unseal', '--kbs-url', 'http://x'])).stderr).toMatch(/--file-path <FILE_PATH>/);
  });

  it('parses the upstream fixture payloads it is given in skip mode', async () => {
    // vault-1 names an aliyun secret: refused with upstream's provider error.
    const body = (await fixture('vault-1.json')).toString('utf8');
    await writeFile(join(dir, 'aliyun'), unsignedSealedSecret(body));
    const r = await run(['unseal', '-f', 'aliyun', '-s', '--kbs-url', kbs.url]);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(
      /^Error: unseal vault secret failed: kms interface when create kms provider: Unsupported provider: aliyun/,
    );
  });
});
