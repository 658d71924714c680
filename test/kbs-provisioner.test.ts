// trustee's provisioner plugin end to end: a KBS over HTTPS with JWT-authenticated admin, a built-in AS
// and LocalFs storage; the operator provisions a VM with an admin token, a sample-TEE guest whose
// initdata names the key attests with kbs-client, fetches the key JWE-encrypted to its TEE key and
// decrypts it; the resource policy can refuse it; the key survives a restart in trustee's storage layout;
// DELETE removes it.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SampleAttester } from '@broker/attester';
import { signAdminToken } from '@broker/auth';
import { createLogger } from '@broker/cli';
import { parseKbsConfigText, type RunningKbs, startKbs } from '@broker/kbs';
import { KbsAdminClient, KbsClient } from '@broker/kbs-client';
import { jweDecrypt } from '@broker/protocol';
import { parse as parseToml } from 'smol-toml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from './helpers/process.js';
import { type KbsKeyFiles, makeKbsKeyFiles, renderKbsConfig } from './helpers/stack.js';

const silent = createLogger({
  name: 'provisioner-e2e',
  env: { RUST_LOG: 'off' },
  format: 'json',
  destination: { write() {} },
});

interface Answer {
  readonly status: number;
  readonly type: string | undefined;
  readonly body: Buffer;
}

function call(url: string, ca: string, method: string, token?: string, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method, ca, headers: token !== undefined ? { authorization: `Bearer ${token}` } : {} },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            type: res.headers['content-type'],
            body: Buffer.concat(chunks),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const errorType = (a: Answer) =>
  (JSON.parse(a.body.toString('utf8')) as { type: string }).type.split('/').pop();

// Keys go to attested guests, except to the VM called "quarantined".
const POLICY = (quarantined: string) => `package policy
import rego.v1

default allow := false

allow if {
  data.plugin == "provisioner"
  data["resource-path"][1] != "${quarantined}"
}
`;

describe('provisioner plugin (trustee kbs/src/plugins/implementations/provisioner)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kbs-provisioner-'));
  const storageDir = join(dir, 'storage');
  let keys: KbsKeyFiles;
  let kbs: RunningKbs | undefined;
  let url: string;
  let text: string;
  let admin: string;

  beforeAll(async () => {
    keys = makeKbsKeyFiles(dir);
    const port = await freePort();
    url = `https://127.0.0.1:${port}`;
    text = renderKbsConfig({
      port,
      keys,
      storageBackend: `[storage_backend]\nstorage_type = "LocalFs"\n\n[storage_backend.backends.local_fs]\ndir_path = "${storageDir}"\n`,
      resourcePlugin:
        'storage_backend_type = "kvstorage"\n\n[[plugins]]\nname = "provisioner"\nkey_length = 32\n',
    });
    kbs = await startKbs(parseKbsConfigText(text), { logger: silent });
    admin = await signAdminToken(readFileSync(keys.adminKey, 'utf8'));
  });
  afterAll(async () => {
    await kbs?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const provision = (vm: string, token: string | null = admin) =>
    call(
      `${url}/kbs/v0/provisioner/provision`,
      keys.tls.certPem,
      'POST',
      token ?? undefined,
      JSON.stringify({ vm_name: vm }),
    );

  /** A sample-TEE guest with `resource` in its initdata: its token and TEE key. */
  async function guest(resource: string) {
    const client = new KbsClient({
      url,
      certPem: keys.tls.certPem,
      attester: new SampleAttester(),
      initData: `version = "0.1.0"\nalgorithm = "sha384"\n\n[data]\n"trustee.kbs.resource" = "${resource}"\n`,
    });
    try {
      return await client.attest();
    } finally {
      client.close();
    }
  }

  it('admin provisions; the bound guest fetches and decrypts the key; it survives a restart; DELETE removes it', async () => {
    await new KbsAdminClient({ url, adminToken: admin, certPem: keys.tls.certPem }).setResourcePolicy(
      POLICY('none'),
    );
    // Without admin credentials nothing is provisioned.
    const refused = await provision('web-0', null);
    expect(refused.status, refused.body.toString()).toBe(401);
    expect(errorType(refused)).toBe('AdminAuthInitialization');

    const posted = await provision('web-0');
    expect([posted.status, posted.type]).toEqual([200, 'text/xml']);
    const { uuid, resource_path } = JSON.parse(posted.body.toString('utf8')) as {
      uuid: string;
      resource_path: string;
    };
    // uuid.uuid5(uuid.uuid5(uuid.NAMESPACE_URL, "provisioner_plugin"), "default/web-0"), computed with CPython.
    expect(uuid).toBe('50655e5f-130b-5283-a3f7-d228a6bcdfc0');
    expect(resource_path).toBe(`default/${uuid}/root`);
    // trustee's LocalFs layout: one flat file per key in the namespace's directory.
    expect(readdirSync(join(storageDir, 'provisioner'))).toEqual([`default\\x2F${uuid}\\x2Froot`]);

    const { token, teeKeyPair } = await guest(`kbs+provisioner:///${resource_path}`);
    const fetchKey = async () => {
      const got = await call(`${url}/kbs/v0/provisioner/${resource_path}`, keys.tls.certPem, 'GET', token);
      expect([got.status, got.type]).toEqual([200, 'application/json']);
      const doc = jweDecrypt(JSON.parse(got.body.toString('utf8')), teeKeyPair.privateKey).toString('utf8');
      return (parseToml(doc) as { version: string; data: Record<string, string> }).data[
        'io.cryptsetup.key.text.root'
      ] as string;
    };
    const key = await fetchKey();
    expect(key).toMatch(/^[A-Za-z0-9]{32}$/);
    // The plaintext key is nowhere in the answer.
    const raw = await call(`${url}/kbs/v0/provisioner/${resource_path}`, keys.tls.certPem, 'GET', token);
    expect(raw.body.toString('latin1')).not.toContain(key);

    await kbs?.close();
    kbs = await startKbs(parseKbsConfigText(text), { logger: silent });
    expect(await fetchKey()).toBe(key);
    // Provisioning the same VM again keeps its key.
    expect((await provision('web-0')).body.toString()).toBe(posted.body.toString());
    expect(await fetchKey()).toBe(key);

    const deleted = await call(
      `${url}/kbs/v0/provisioner/provision/${uuid}`,
      keys.tls.certPem,
      'DELETE',
      admin,
    );
    expect([deleted.status, deleted.body.toString()]).toEqual([200, '{"status":"deleted"}']);
    const gone = await call(`${url}/kbs/v0/provisioner/${resource_path}`, keys.tls.certPem, 'GET', token);
    expect([gone.status, errorType(gone)]).toEqual([401, 'PluginInternalError']);
    expect(readdirSync(join(storageDir, 'provisioner'))).toEqual([]);
  });

  it('the resource policy can refuse the key to an attested, bound guest', async () => {
    const posted = JSON.parse((await provision('db-0')).body.toString('utf8')) as {
      uuid: string;
      resource_path: string;
    };
    await new KbsAdminClient({ url, adminToken: admin, certPem: keys.tls.certPem }).setResourcePolicy(
      POLICY(posted.uuid),
    );
    const { token } = await guest(`kbs+provisioner:///${posted.resource_path}`);
    const denied = await call(
      `${url}/kbs/v0/provisioner/${posted.resource_path}`,
      keys.tls.certPem,
      'GET',
      token,
    );
    expect([denied.status, errorType(denied)]).toEqual([401, 'PolicyDeny']);
    // A guest bound to another VM's key does not get this one either.
    const other = JSON.parse((await provision('db-1')).body.toString('utf8')) as { resource_path: string };
    const { token: token1 } = await guest(`kbs+provisioner:///${other.resource_path}`);
    const crossed = await call(
      `${url}/kbs/v0/provisioner/${posted.resource_path}`,
      keys.tls.certPem,
      'GET',
      token1,
    );
    expect([crossed.status, errorType(crossed)]).toEqual([401, 'PolicyDeny']);
    await new KbsAdminClient({ url, adminToken: admin, certPem: keys.tls.certPem }).setResourcePolicy(
      POLICY('none'),
    );
    const mismatch = await call(
      `${url}/kbs/v0/provisioner/${posted.resource_path}`,
      keys.tls.certPem,
      'GET',
      token1,
    );
    expect([mismatch.status, errorType(mismatch)]).toEqual([401, 'PluginInternalError']);
  });
});
