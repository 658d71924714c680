import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type CliIo, main, parseBool, parseI32, rustDebugString } from './cli.js';
import {
  AFFIRMING_RESOURCE_POLICY,
  ALLOW_ALL_RESOURCE_POLICY,
  DENY_ALL_RESOURCE_POLICY,
} from './policies.js';
import { TeeKeyPair } from './tee-key.js';
import { errorBody, FakeKbs } from './testing/fake-kbs.js';

const SECRET = Buffer.from('top secret bytes');

let kbs: FakeKbs;
let dir: string;

interface Run {
  code: number;
  out: string;
  err: string;
}

async function run(argv: string[], io: Partial<CliIo> = {}): Promise<Run> {
  let out = '';
  let err = '';
  const code = await main(argv, {
    stdout: (t) => {
      out += t;
    },
    stderr: (t) => {
      err += t;
    },
    env: { HOME: join(dir, 'home') },
    cwd: dir,
    readFile: (p) => readFile(p),
    sleep: async () => {},
    ...io,
  });
  return { code, out, err };
}

function file(name: string, content: string | Buffer): string {
  const p = join(dir, name);
  writeFileSync(p, content);
  return p;
}

function body(i = 0): Record<string, unknown> {
  return JSON.parse(kbs.requests[i]!.body.toString('utf8'));
}

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kbs-client-cli-'));
  kbs = await new FakeKbs().start();
  kbs.resources.set('default/key/one', SECRET);
});
afterEach(async () => {
  await kbs.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('kbs-client usage', () => {
  it('prints help and version', async () => {
    const help = await run(['--help']);
    expect(help.code).toBe(0);
    expect(help.out).toContain('Usage: kbs-client [OPTIONS] <COMMAND>');
    expect(help.out).toContain('http://127.0.0.1:8080');
    expect((await run(['config', '--help'])).out).toContain('set-sample-reference-value');
    expect((await run(['config', 'set-resource-policy', '--help'])).out).toContain('--affirming');
    expect((await run(['get-resource', '--help'])).out).toContain('--attestation-token');
    expect((await run(['attest', '-h'])).out).toContain('[INIT_DATA]');
    expect(await run(['-V'])).toMatchObject({ code: 0, out: 'kbs-client 0.1.0 (broker dev)\n' });
    expect((await run(['config', '--help'])).out).toContain('Exit status:');
  });

  it('exits 2 on usage errors', async () => {
    expect((await run([])).code).toBe(2);
    expect(await run(['frobnicate'])).toMatchObject({
      code: 2,
      err: "kbs-client: unknown command 'frobnicate' (one of: attest, get-resource, config, keygen, admin-token)\nRun 'kbs-client --help' for usage.\n",
    });
    expect(await run(['attest', '--url', kbs.url])).toMatchObject({
      code: 2,
      err: expect.stringContaining("unknown option '--url'"),
    });
    expect((await run(['--url'])).err).toContain("option '--url' needs a value");
    expect((await run(['--url', 'a', '--url', 'b', 'attest'])).err).toContain(
      "option '--url' given more than once",
    );
    expect((await run(['get-resource'])).code).toBe(2);
    expect((await run(['--url', kbs.url, 'get-resource', '--tee-key-file', 'x'])).err).toContain(
      '--path <PATH>',
    );
    expect((await run(['config'])).code).toBe(2);
    expect((await run(['config', 'set-resource', '--path', 'a/b/c'])).err).toContain('--resource-file');
    expect((await run(['config', 'set-resource-policy', '--allow-all', '--deny-all'])).err).toContain(
      "'--allow-all' cannot be used with '--deny-all'",
    );
    expect(
      (await run(['config', 'set-sample-reference-value', 'n', '1', '--as-integer', '--as-bool'])).code,
    ).toBe(2);
    expect(kbs.requests).toHaveLength(0);
  });
});

describe('kbs-client attest and get-resource', () => {
  it('attest prints the token', async () => {
    const r = await run(['--url', kbs.url, 'attest']);
    expect(r.code).toBe(0);
    const token = r.out.trim();
    expect([...kbs.tokens.keys()]).toEqual([token]);
    expect(r.out).toBe(`${token}\n`);
    expect(body(0)).toMatchObject({ tee: 'sample', version: '0.4.0' });
    expect(body(1)['init-data']).toBeNull();
    // Detection found no TEE, as upstream would say on stderr.
    expect(r.err).toContain('No TEE platform detected');
  });

  it('attest sends positional init-data text, or --init-data from a file', async () => {
    await run(['--url', kbs.url, 'attest', 'version = "0.1.0"']);
    expect(body(1)['init-data']).toEqual({ format: 'toml', body: 'version = "0.1.0"' });
    kbs.requests.length = 0;
    const f = file('initdata.toml', 'algorithm = "sha256"\n');
    await run(['--url', kbs.url, 'attest', '--init-data', f]);
    expect(body(1)['init-data']).toEqual({ format: 'toml', body: 'algorithm = "sha256"\n' });
    expect((await run(['--url', kbs.url, 'attest', '--init-data', f, 'inline'])).code).toBe(2);
  });

  it('attest certifies the key from --tee-key-file', async () => {
    const key = TeeKeyPair.generate('RSA-OAEP-256');
    const r = await run(['--url', kbs.url, 'attest', '--tee-key-file', file('tee.pem', key.toPem())]);
    expect(r.code).toBe(0);
    expect((body(1)['runtime-data'] as Record<string, unknown>)['tee-pubkey']).toEqual(key.publicJwk);
  });

  it('get-resource prints the plaintext in standard base64', async () => {
    const r = await run(['--url', kbs.url, 'get-resource', '--path', 'default/key/one']);
    expect(r).toMatchObject({ code: 0, out: `${SECRET.toString('base64')}\n` });
    expect(kbs.requests.map((q) => q.url)).toEqual([
      '/kbs/v0/auth',
      '/kbs/v0/attest',
      '/kbs/v0/resource/default/key/one',
    ]);
  });

  it('get-resource with --attestation-token uses Bearer and needs --tee-key-file', async () => {
    const key = TeeKeyPair.generate();
    const keyFile = file('tee.pem', key.toPem());
    const token = (await run(['--url', kbs.url, 'attest', '--tee-key-file', keyFile])).out.trim();
    const tokenFile = file('token', `${token}\n`);
    kbs.requests.length = 0;

    const missing = await run([
      '--url',
      kbs.url,
      'get-resource',
      '--path',
      'default/key/one',
      '--attestation-token',
      tokenFile,
    ]);
    expect(missing.code).toBe(1);
    expect(missing.err).toContain('`--tee-key-file` must be set too');

    const r = await run([
      '--url',
      kbs.url,
      'get-resource',
      '--path',
      'default/key/one',
      '--attestation-token',
      tokenFile,
      '--tee-key-file',
      keyFile,
    ]);
    expect(r).toMatchObject({ code: 0, out: `${SECRET.toString('base64')}\n` });
    expect(kbs.requests).toHaveLength(1);
    expect(kbs.requests[0]!.headers.authorization).toBe(`Bearer ${token}`);
  });

  it('get-resource --plugin asks the plugin: the request of a kbs+<plugin>:/// URI', async () => {
    const r = await run([
      '--url',
      kbs.url,
      'get-resource',
      '--plugin',
      'nebula-ca',
      '--path',
      'credential?name=node-1&ip=10.9.0.5%2F24',
    ]);
    // The fake KBS serves no plugins: what matters is where the client went.
    expect(r.code).toBe(1);
    expect(kbs.requests.map((q) => q.url)).toEqual([
      '/kbs/v0/auth',
      '/kbs/v0/attest',
      '/kbs/v0/nebula-ca/credential?name=node-1&ip=10.9.0.5%2F24',
    ]);
    kbs.requests.length = 0;
    const bad = await run(['--url', kbs.url, 'get-resource', '--plugin', '../admin', '--path', 'x']);
    expect(bad.code).toBe(1);
    expect(bad.err).toContain('plugin name');
    expect(kbs.requests).toHaveLength(0);
  });

  it('reports KBS refusals with the error type and exits 1', async () => {
    kbs.override = (q) =>
      q.method === 'GET'
        ? { status: 401, body: errorBody('PolicyDeny', 'Access denied by policy') }
        : undefined;
    const r = await run(['--url', kbs.url, 'get-resource', '--path', 'default/key/one']);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(
      /^Error: get resource \/kbs\/v0\/resource\/default\/key\/one: HTTP 401 \(PolicyDeny\): Access denied by policy/m,
    );
  });

  it('reports unreadable files the way upstream does', async () => {
    const r = await run(['--url', kbs.url, '--cert-file', join(dir, 'missing.pem'), 'attest']);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`Failed to read: ${join(dir, 'missing.pem')}`);
  });

  it('refuses a bad resource path', async () => {
    const r = await run(['--url', kbs.url, 'get-resource', '--path', '../etc/passwd']);
    expect(r.code).toBe(1);
    expect(kbs.requests).toHaveLength(0);
  });
});

describe('kbs-client config', () => {
  const admin = () => ['--url', kbs.url, 'config', '--admin-token-file', file('admin-token', ' tok.en.x \n')];

  it('set-resource and delete-resource', async () => {
    const r = await run([
      ...admin(),
      'set-resource',
      '--path',
      'default/key/two',
      '--resource-file',
      file('res', SECRET),
    ]);
    expect(r).toMatchObject({
      code: 0,
      out: `Set resource success \n resource: ${SECRET.toString('base64')}\n`,
    });
    const q = kbs.requests[0]!;
    expect([q.method, q.url, q.headers.authorization, q.headers['content-type']]).toEqual([
      'POST',
      '/kbs/v0/resource/default/key/two',
      'Bearer tok.en.x',
      'application/octet-stream',
    ]);
    expect(q.body).toEqual(SECRET);
    const d = await run([...admin(), 'delete-resource', '--path', 'default/key/two']);
    expect(d).toMatchObject({ code: 0, out: 'Delete resource success\n' });
    expect(kbs.requests[1]!.method).toBe('DELETE');
  });

  it('set-resource-policy sends the built-in texts; --default sends deny_all as upstream', async () => {
    const cases: [string, string][] = [
      ['--allow-all', ALLOW_ALL_RESOURCE_POLICY],
      ['--deny-all', DENY_ALL_RESOURCE_POLICY],
      ['--affirming', AFFIRMING_RESOURCE_POLICY],
      ['--default', DENY_ALL_RESOURCE_POLICY],
    ];
    for (const [flag, text] of cases) {
      kbs.requests.length = 0;
      const r = await run([...admin(), 'set-resource-policy', flag]);
      expect(r.code).toBe(0);
      expect(r.out).toBe(`Set resource policy success \n policy: ${Buffer.from(text).toString('base64')}\n`);
      expect(body()).toEqual({ policy: Buffer.from(text).toString('base64url') });
    }
    kbs.requests.length = 0;
    await run([...admin(), 'set-resource-policy', '--policy-file', file('p.rego', 'package policy\n')]);
    expect(body()).toEqual({ policy: Buffer.from('package policy\n').toString('base64url') });
    const none = await run([...admin(), 'set-resource-policy']);
    expect(none).toMatchObject({ code: 1, err: 'Error: No policy specified\n' });
  });

  it('get-resource-policy prints the ids', async () => {
    expect(await run([...admin(), 'get-resource-policy'])).toMatchObject({
      code: 0,
      out: '["resource-policy"]\n',
    });
  });

  it('set-attestation-policy defaults to rego/default_cpu and warns about the id', async () => {
    const policy = 'package policy\ndefault allow := true\n';
    const r = await run([...admin(), 'set-attestation-policy', '--policy-file', file('a.rego', policy)]);
    expect(r.code).toBe(0);
    expect(r.out).toBe(
      `Set attestation policy success \n policy: ${Buffer.from(policy).toString('base64')}\n`,
    );
    expect(r.err).toContain('no policy_id set; using default_cpu');
    expect(body()).toEqual({
      type: 'rego',
      policy_id: 'default_cpu',
      policy: Buffer.from(policy).toString('base64url'),
    });
    kbs.requests.length = 0;
    await run([
      ...admin(),
      'set-attestation-policy',
      '--type',
      'rego',
      '--id',
      'default_gpu',
      '--policy-file',
      file('a.rego', policy),
    ]);
    expect(body().policy_id).toBe('default_gpu');
  });

  it('set-sample-reference-value: a string in a list by default; integer, bool and single value on request', async () => {
    const payload = () => JSON.parse(Buffer.from(body().payload as string, 'base64').toString());
    const cases: [string[], unknown][] = [
      [['svn', '1'], { svn: ['1'] }],
      [['svn', '1', '--as-integer'], { svn: [1] }],
      [['--as-integer', 'svn', '--', '-7'], { svn: [-7] }],
      [['debug', 'false', '--as-bool', '--as-single-value'], { debug: false }],
      [['launch_digest', 'abcde', '--as-single-value'], { launch_digest: 'abcde' }],
    ];
    for (const [args, expected] of cases) {
      kbs.requests.length = 0;
      const r = await run([...admin(), 'set-sample-reference-value', ...args]);
      expect(r, args.join(' ')).toMatchObject({ code: 0, out: 'Reference Values Updated\n' });
      expect(body()).toMatchObject({ version: '0.1.0', type: 'sample' });
      expect(payload()).toEqual(expected);
    }
    kbs.requests.length = 0;
    expect(
      (await run([...admin(), 'set-sample-reference-value', 'svn', '1.5', '--as-integer'])).err,
    ).toContain('invalid digit found in string');
    expect((await run([...admin(), 'set-sample-reference-value', 'x', 'yes', '--as-bool'])).code).toBe(1);
    expect(kbs.requests).toHaveLength(0);
  });

  it('get-reference-value prints the body as a Rust debug string', async () => {
    const r = await run([...admin(), 'get-reference-value', '--id', 'svn']);
    expect(r).toMatchObject({ code: 0, out: '"[\\"1.0.0\\",\\"a\\\\\\"b\\"]"\n' });
    expect(kbs.requests[0]!.url).toBe('/kbs/v0/reference-value/svn');
  });

  it('falls back to ./kbs/config/docker-compose/admin-token, then ~/.trustee/admin-token, then anonymous', async () => {
    const anon = await run(['--url', kbs.url, 'config', 'delete-resource', '--path', 'a/b/c']);
    expect(anon.code).toBe(0);
    expect(anon.err).toContain('No admin token configured');
    expect(kbs.requests[0]!.headers.authorization).toBeUndefined();

    mkdirSync(join(dir, 'home', '.trustee'), { recursive: true });
    writeFileSync(join(dir, 'home', '.trustee', 'admin-token'), 'home-token\n');
    await run(['--url', kbs.url, 'config', 'delete-resource', '--path', 'a/b/c']);
    expect(kbs.requests[1]!.headers.authorization).toBe('Bearer home-token');

    mkdirSync(join(dir, 'kbs', 'config', 'docker-compose'), { recursive: true });
    writeFileSync(join(dir, 'kbs', 'config', 'docker-compose', 'admin-token'), 'compose-token');
    await run(['--url', kbs.url, 'config', 'delete-resource', '--path', 'a/b/c']);
    expect(kbs.requests[2]!.headers.authorization).toBe('Bearer compose-token');
  });

  it('--auth-private-key signs a short-lived admin JWT', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const keyFile = file('admin.key', privateKey.export({ format: 'pem', type: 'pkcs8' }).toString());
    const r = await run([
      '--url',
      kbs.url,
      'config',
      '--auth-private-key',
      keyFile,
      '--auth-issuer',
      'ops',
      'delete-resource',
      '--path',
      'a/b/c',
    ]);
    expect(r.code).toBe(0);
    const token = (kbs.requests[0]!.headers.authorization ?? '').replace(/^Bearer /, '');
    expect(decodeProtectedHeader(token).alg).toBe('EdDSA');
    await jwtVerify(token, publicKey, { issuer: 'ops' });
    const claims = decodeJwt(token);
    expect(claims.role).toBe('admin');
    expect((claims.exp ?? 0) - (claims.iat ?? 0)).toBe(7200);

    const both = await run([
      '--url',
      kbs.url,
      'config',
      '--auth-private-key',
      keyFile,
      '--admin-token-file',
      keyFile,
      'get-resource-policy',
    ]);
    expect(both.code).toBe(2);
    expect((await run(['--url', kbs.url, 'config', '--auth-role', 'x', 'get-resource-policy'])).code).toBe(2);
  });

  it('reports an admin refusal', async () => {
    kbs.override = () => ({ status: 401, body: errorBody('AdminAuthAccess', 'admin access denied') });
    const r = await run([...admin(), 'get-reference-value', '--id', 'x']);
    expect(r.code).toBe(1);
    expect(r.err).toContain('(AdminAuthAccess): admin access denied');
  });
});

describe('upstream value parsing', () => {
  it('parses i32 and bool as Rust does', () => {
    expect(parseI32('+5')).toBe(5);
    expect(parseI32('-2147483648')).toBe(-2147483648);
    expect(() => parseI32('2147483648')).toThrow('number too large to fit in target type');
    expect(() => parseI32('')).toThrow('cannot parse integer from empty string');
    expect(() => parseI32(' 1')).toThrow('invalid digit found in string');
    expect(parseBool('true')).toBe(true);
    expect(() => parseBool('True')).toThrow('provided string was not `true` or `false`');
  });

  it('formats a string as Rust {:?}', () => {
    expect(rustDebugString('a"b\\c\nd\te\r\0\x01\u007f\'é')).toBe(
      '"a\\"b\\\\c\\nd\\te\\r\\0\\u{1}\\u{7f}\'é"',
    );
  });
});
