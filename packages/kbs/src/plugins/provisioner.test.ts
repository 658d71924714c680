// trustee's `provisioner` plugin: the UUID derivation against vectors computed independently, the
// confdata document, hostile POST bodies, its configuration, and the three calls in a real KBS over HTTP
// (admin POST/DELETE, attested GET bound by initdata, JWE to the TEE key, the resource policy).

import { MemoryStorage } from '@broker/kv-storage';
import { generateTeeKeyPair, jweDecrypt } from '@broker/protocol';
import pino from 'pino';
import { parse as parseToml } from 'smol-toml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseKbsConfigText } from '../config.js';
import { type RunningKbs, startKbs } from '../kbs.js';
import { AUTH_BODY, cookieOf, type Response, sampleEvidence, send } from '../testing/client.js';
import { PluginRequestError } from './builtin.js';
import {
  CONFDATA_ROOT_KEY,
  confdataToml,
  PROVISIONER_UUID_NAMESPACE,
  ProvisionerPlugin,
  parseProvisionRequest,
  provisionerUuid,
  randomAlphanumeric,
  uuidV5,
} from './provisioner.js';

const ERR = 'https://github.com/confidential-containers/kbs/errors/';
const URL_NAMESPACE = '6ba7b811-9dad-11d1-80b4-00c04fd430c8';
const DNS_NAMESPACE = '6ba7b810-9dad-11d1-80b4-00c04fd430c8';

describe('provisioner UUIDs', () => {
  it("trustee's UUID namespace is the version-5 UUID of provisioner_plugin in the URL namespace", () => {
    expect(uuidV5(URL_NAMESPACE, 'provisioner_plugin')).toBe(PROVISIONER_UUID_NAMESPACE);
  });

  it('matches RFC 9562 (appendix A.4: www.example.com in the DNS namespace)', () => {
    expect(uuidV5(DNS_NAMESPACE, 'www.example.com')).toBe('2ed6657d-e927-568b-95e1-2665a8aea6a2');
  });

  // Computed with CPython's uuid module: uuid.uuid5(uuid.uuid5(uuid.NAMESPACE_URL, 'provisioner_plugin'), n).
  it.each([
    ['default', 'my-vm', '211568cd-f669-5123-9f71-ce4765de93d6'],
    ['kube-system', 'vm-1', '5695de14-c836-5821-b5e3-2a4b704c64cf'],
    ['default', '', '78426ad1-c861-57fe-9f94-cbbba75479d7'],
    ['ns', '名前', '496a8fda-e7b3-57a4-965e-abcf36004455'],
  ])('%s/%s → %s (the name is `<namespace>/<vm_name>` in UTF-8)', (ns, vm, uuid) => {
    expect(provisionerUuid(ns, vm)).toBe(uuid);
  });
});

describe('provisioner documents and requests', () => {
  it("writes trustee's confdata TOML, which a TOML parser reads back", () => {
    const text = confdataToml('abcXYZ019');
    expect(text).toBe('version = "0.1.0"\n\n[data]\n"io.cryptsetup.key.text.root" = "abcXYZ019"\n');
    expect(parseToml(text)).toEqual({ version: '0.1.0', data: { [CONFDATA_ROOT_KEY]: 'abcXYZ019' } });
    expect(() => confdataToml('a"b')).toThrow(/alphanumeric/);
  });

  it('draws keys of the asked length from [A-Za-z0-9], different each time', () => {
    const a = randomAlphanumeric(64);
    expect(a).toMatch(/^[A-Za-z0-9]{64}$/);
    expect(randomAlphanumeric(64)).not.toBe(a);
    // All 62 characters occur over enough draws (a fixed or truncated alphabet would not).
    expect(new Set(randomAlphanumeric(20_000)).size).toBe(62);
  });

  it('reads vm_name and namespace (default "default"), ignoring other fields as serde does', () => {
    const body = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
    expect(parseProvisionRequest(body({ vm_name: 'a' }))).toEqual({ vmName: 'a', namespace: 'default' });
    expect(parseProvisionRequest(body({ vm_name: 'a', namespace: 'n', x: 1 }))).toEqual({
      vmName: 'a',
      namespace: 'n',
    });
  });

  it.each([
    ['not JSON', Buffer.from('{vm_name')],
    ['invalid UTF-8', Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d])],
    ['an array', Buffer.from('["vm_name"]')],
    ['null', Buffer.from('null')],
    ['a string', Buffer.from('"x"')],
    ['no vm_name', Buffer.from('{"namespace":"x"}')],
    ['a number as vm_name', Buffer.from('{"vm_name":1}')],
    ['null namespace', Buffer.from('{"vm_name":"a","namespace":null}')],
    ['vm_name only on the prototype', Buffer.from('{"__proto__":{"vm_name":"a"}}')],
    ['a huge name', Buffer.from(JSON.stringify({ vm_name: 'v'.repeat(5000) }))],
    ['an empty body', Buffer.alloc(0)],
  ])('refuses a POST body that is %s', (_what, bytes) => {
    expect(() => parseProvisionRequest(bytes)).toThrow(PluginRequestError);
  });
});

describe('provisioner configuration', () => {
  const base = '[http_server]\ninsecure_http = true\n[admin]\nauthorization_mode = "DenyAll"\n';
  const parse = (plugin: string) => parseKbsConfigText(`${base}[[plugins]]\nname = "provisioner"\n${plugin}`);

  it('key_length defaults to 32 and is bounded', () => {
    expect(parse('').builtinPlugins?.provisioner).toEqual({ keyLength: 32 });
    expect(parse('key_length = 64\n').builtinPlugins?.provisioner).toEqual({ keyLength: 64 });
    expect(() => parse('key_length = 8\n')).toThrow(/key_length/);
    expect(() => parse('key_length = 100000\n')).toThrow(/key_length/);
    expect(() => parse('key_length = "32"\n')).toThrow(/key_length/);
    // trustee ignores unknown keys here (no deny_unknown_fields): a warning, as for other plugins.
    expect(parse('keylength = 32\n').warnings.join('\n')).toMatch(/unknown key "keylength"/);
  });

  it('may be configured once', () => {
    expect(() => parse('[[plugins]]\nname = "provisioner"\n')).toThrow(/configured twice/);
  });
});

// Releases provisioner keys to any attested guest except for the one VM the test names.
const POLICY = `package policy
import rego.v1

default allow := false

allow if {
  data.plugin == "provisioner"
  data["resource-path"][1] != "${provisionerUuid('default', 'denied-vm')}"
}
`;

function errorOf(r: Response): [number, string] {
  return [r.status, (r.json() as { type: string }).type.replace(ERR, '')];
}

/** A sample-TEE attestation sending `initData` as its init-data; the cookie, token and TEE key. */
async function attest(base: string, initData: string | null) {
  const key = generateTeeKeyPair();
  const auth = await send(`${base}/kbs/v0/auth`, { method: 'POST', body: AUTH_BODY });
  const cookie = cookieOf(auth);
  const { nonce } = auth.json() as { nonce: string };
  const r = await send(`${base}/kbs/v0/attest`, {
    method: 'POST',
    headers: { cookie, 'content-type': 'application/json' },
    body: JSON.stringify({
      'init-data': initData === null ? null : { format: 'toml', body: initData },
      'runtime-data': { nonce, 'tee-pubkey': key.publicJwk },
      'tee-evidence': { primary_evidence: sampleEvidence(nonce, key), additional_evidence: '' },
    }),
  });
  expect(r.status, r.text).toBe(200);
  return { cookie, key };
}

const initDataFor = (resource: string) =>
  `version = "0.1.0"\nalgorithm = "sha384"\n\n[data]\n"trustee.kbs.resource" = "${resource}"\n`;

describe('provisioner plugin in a KBS', () => {
  let kbs: RunningKbs;
  let base: string;

  beforeAll(async () => {
    const toml = `[http_server]\nsockets = ["127.0.0.1:0"]\ninsecure_http = true\n[attestation_token]\ninsecure_header_jwk = true\n[admin]\nauthorization_mode = "InsecureAllowAll"\n[[plugins]]\nname = "provisioner"\nkey_length = 48\n`;
    kbs = await startKbs(parseKbsConfigText(toml), { logger: pino({ level: 'silent' }) });
    base = kbs.urls[0] as string;
    const r = await send(`${base}/kbs/v0/resource-policy`, {
      method: 'POST',
      body: JSON.stringify({ policy: Buffer.from(POLICY).toString('base64url') }),
    });
    expect(r.status).toBe(200);
  });
  afterAll(async () => {
    await kbs?.close();
  });

  const provision = (body: unknown) =>
    send(`${base}/kbs/v0/provisioner/provision`, { method: 'POST', body: JSON.stringify(body) });

  it('provisions, serves the key to the bound guest only, and deprovisions', async () => {
    const posted = await provision({ vm_name: 'my-vm' });
    expect([posted.status, posted.headers['content-type']]).toEqual([200, 'text/xml']);
    const uuid = '211568cd-f669-5123-9f71-ce4765de93d6';
    expect(posted.text).toBe(`{"uuid":"${uuid}","resource_path":"default/${uuid}/root"}`);
    const path = `default/${uuid}/root`;

    const guest = await attest(base, initDataFor(`kbs+provisioner:///${path}`));
    const got = await send(`${base}/kbs/v0/provisioner/${path}`, { headers: { cookie: guest.cookie } });
    expect([got.status, got.headers['content-type']]).toEqual([200, 'application/json']);
    const doc = jweDecrypt(got.json(), guest.key.privateKey).toString('utf8');
    const key = (parseToml(doc) as { data: Record<string, string> }).data[CONFDATA_ROOT_KEY];
    expect(key).toMatch(/^[A-Za-z0-9]{48}$/);

    // Provisioning again keeps the key.
    expect((await provision({ vm_name: 'my-vm', namespace: 'default' })).text).toBe(posted.text);
    const again = await send(`${base}/kbs/v0/provisioner/${path}`, { headers: { cookie: guest.cookie } });
    expect(jweDecrypt(again.json(), guest.key.privateKey).toString('utf8')).toBe(doc);

    // Another namespace is another VM with another key.
    const other = JSON.parse((await provision({ vm_name: 'my-vm', namespace: 'team-b' })).text);
    expect(other.uuid).toBe(provisionerUuid('team-b', 'my-vm'));
    expect(other.uuid).not.toBe(uuid);

    const deleted = await send(`${base}/kbs/v0/provisioner/provision/${uuid}`, { method: 'DELETE' });
    expect([deleted.status, deleted.text]).toEqual([200, '{"status":"deleted"}']);
    const gone = await send(`${base}/kbs/v0/provisioner/${path}`, { headers: { cookie: guest.cookie } });
    expect(errorOf(gone)).toEqual([401, 'PluginInternalError']);
    expect((gone.json() as { detail: string }).detail).toMatch(/provisioner resource not found/);
    // Deleting what is not there answers as trustee does.
    const twice = await send(`${base}/kbs/v0/provisioner/provision/${uuid}`, { method: 'DELETE' });
    expect(twice.text).toBe('{"status":"deleted"}');
  });

  it('refuses a guest whose initdata does not name the resource, or that sent none', async () => {
    const posted = JSON.parse((await provision({ vm_name: 'vm-a' })).text);
    const otherVm = JSON.parse((await provision({ vm_name: 'vm-b' })).text);
    for (const [initData, why] of [
      [null, /requires init_data/],
      ['version = "0.1.0"\nalgorithm = "sha384"\n[data]\n"x" = "y"\n', /missing trustee\.kbs\.resource/],
      [initDataFor(`kbs+provisioner:///${otherVm.resource_path}`), /resource mismatch/],
      [initDataFor(`kbs:///${posted.resource_path}`), /resource mismatch/],
    ] as const) {
      const guest = await attest(base, initData);
      const r = await send(`${base}/kbs/v0/provisioner/${posted.resource_path}`, {
        headers: { cookie: guest.cookie },
      });
      expect(errorOf(r)).toEqual([401, 'PluginInternalError']);
      expect((r.json() as { detail: string }).detail).toMatch(why);
      expect(r.text).not.toContain('io.cryptsetup');
    }
  });

  it('serves nothing but a stored default/<uuid>/root, whatever path the initdata names', async () => {
    await provision({ vm_name: 'vm-c' });
    // (Paths of at least two segments: the test's policy looks at the second.)
    for (const path of [
      'provision/x',
      'default/x/root',
      'default/x',
      `default/${provisionerUuid('default', 'vm-c')}/other`,
      // A segment after the key's name.
      [`default/${provisionerUuid('default', 'vm-c')}`, 'root', 'extra'].join('/'),
    ]) {
      const guest = await attest(base, initDataFor(`kbs+provisioner:///${path}`));
      const r = await send(`${base}/kbs/v0/provisioner/${path}`, { headers: { cookie: guest.cookie } });
      expect(errorOf(r), path).toEqual([401, 'PluginInternalError']);
      expect((r.json() as { detail: string }).detail, path).toMatch(/provisioner resource not found/);
    }
  });

  it('needs a token, and the resource policy decides', async () => {
    const denied = JSON.parse((await provision({ vm_name: 'denied-vm' })).text);
    const guest = await attest(base, initDataFor(`kbs+provisioner:///${denied.resource_path}`));
    const r = await send(`${base}/kbs/v0/provisioner/${denied.resource_path}`, {
      headers: { cookie: guest.cookie },
    });
    expect(errorOf(r)).toEqual([401, 'PolicyDeny']);
    const none = await send(`${base}/kbs/v0/provisioner/${denied.resource_path}`);
    expect(errorOf(none)).toEqual([401, 'TokenNotFound']);
  });

  it('refuses hostile POST bodies, DELETE paths and other methods', async () => {
    for (const body of ['{', '[]', '{"vm_name":7}', '']) {
      const r = await send(`${base}/kbs/v0/provisioner/provision`, { method: 'POST', body });
      expect(errorOf(r), body).toEqual([401, 'PluginInternalError']);
    }
    for (const path of [
      'provision',
      'provision/../kbs',
      'provision/not-a-uuid',
      'provision/211568CD-F669-5123-9F71-CE4765DE93D6',
      'provision/211568cd-f669-5123-9f71-ce4765de93d6/extra',
    ]) {
      const r = await send(`${base}/kbs/v0/provisioner/${path}`, { method: 'DELETE' });
      expect(errorOf(r), path).toEqual([401, 'PluginInternalError']);
    }
    const put = await send(`${base}/kbs/v0/provisioner/provision`, { method: 'PUT', body: '{}' });
    expect(errorOf(put)).toEqual([401, 'PluginInternalError']);
    const postElsewhere = await send(`${base}/kbs/v0/provisioner/provision/x`, {
      method: 'POST',
      body: '{}',
    });
    expect(errorOf(postElsewhere)).toEqual([401, 'PluginInternalError']);
  });

  it('POST and DELETE are admin calls', async () => {
    const toml = `[http_server]\nsockets = ["127.0.0.1:0"]\ninsecure_http = true\n[attestation_token]\ninsecure_header_jwk = true\n[admin]\nauthorization_mode = "DenyAll"\n[[plugins]]\nname = "provisioner"\n`;
    const denyAll = await startKbs(parseKbsConfigText(toml), { logger: pino({ level: 'silent' }) });
    try {
      const url = denyAll.urls[0] as string;
      const r = await send(`${url}/kbs/v0/provisioner/provision`, {
        method: 'POST',
        body: '{"vm_name":"a"}',
      });
      expect(errorOf(r)).toEqual([401, 'AdminAuthInitialization']);
      const d = await send(`${url}/kbs/v0/provisioner/provision/${provisionerUuid('default', 'a')}`, {
        method: 'DELETE',
      });
      expect(errorOf(d)).toEqual([401, 'AdminAuthInitialization']);
    } finally {
      await denyAll.close();
    }
  });
});

describe('provisioner storage', () => {
  it("keeps each key under default/<uuid>/root in the storage namespace provisioner, first writer's key kept", async () => {
    const storage = new MemoryStorage();
    const plugin = new ProvisionerPlugin({ keyLength: 32 }, storage);
    const call = { method: 'POST', path: ['provision'], query: {}, body: Buffer.from('{"vm_name":"x"}') };
    await Promise.all([plugin.handle(call), plugin.handle(call), plugin.handle(call)]);
    const uuid = provisionerUuid('default', 'x');
    expect(await storage.list('provisioner')).toEqual([`default/${uuid}/root`]);
    const stored = Buffer.from((await storage.get('provisioner', `default/${uuid}/root`)) as Uint8Array);
    await plugin.handle(call);
    expect(Buffer.from((await storage.get('provisioner', `default/${uuid}/root`)) as Uint8Array)).toEqual(
      stored,
    );
  });
});
