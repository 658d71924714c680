// trustee's external plugin configs (kbs/test/config/external-plugin*.toml and
// kbs/test/test_data/configs/external-plugin-test.toml, which adds the built-in sample plugin) start our KBS unchanged
// (listen address, plugin ports and ./work file locations aside) and forward /kbs/v0/external/<backend>/
// to gRPC plugins: our example plugin (plaintext and TLS, admin- and attestation-gated, JWE replies) and
// a plugin written in Python against plugin.proto with Debian's python3-grpcio.
import { type ChildProcessWithoutNullStreams, execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SampleAttester } from '@broker/attester';
import { signAdminToken } from '@broker/auth';
import { createLogger } from '@broker/cli';
import { vector } from '@broker/cli/testing';
import {
  ExternalPlugin,
  type KbsMetrics,
  parseKbsConfigText,
  type RunningExamplePlugin,
  type RunningKbs,
  startExamplePlugin,
  startKbs,
} from '@broker/kbs';
import { KbsAdminClient, KbsClient } from '@broker/kbs-client';
import { jweDecrypt } from '@broker/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binary, freePort, ROOT, start, waitForListen } from './helpers/process.js';
import { makeKbsKeyFiles, openssl } from './helpers/stack.js';
import { listenOn } from './helpers/upstream-config.js';

const PROTOS = join(ROOT, 'packages', 'trustee-protos', 'protos');
const PEER = join(ROOT, 'test', 'helpers', 'kbs_plugin_peer.py');

const silent = createLogger({
  name: 'ext-plugin',
  env: { RUST_LOG: 'off' },
  format: 'json',
  destination: { write() {} },
});

// Releases to any token for external backends other than "forbidden" (proves the policy sees
// plugin = "external" and the backend as the first resource-path segment).
const PLUGIN_POLICY = `package policy
import rego.v1

default allow := false

allow if {
  data.plugin == "external"
  data["resource-path"][0] != "forbidden"
}
`;

interface Answer {
  readonly status: number;
  readonly type: string | undefined;
  readonly body: Buffer;
}

function call(
  url: string,
  options: { method?: string; token?: string; body?: Uint8Array; ca?: string } = {},
): Promise<Answer> {
  const u = new URL(url);
  const request = u.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(
      u,
      {
        method: options.method ?? 'GET',
        headers: options.token ? { authorization: `Bearer ${options.token}` } : {},
        ...(options.ca !== undefined && { ca: options.ca }),
      },
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
    req.end(options.body);
  });
}

function errorType(a: Answer): string {
  return (JSON.parse(a.body.toString('utf8')) as { type: string }).type.split('/').pop() as string;
}

/** A CA and a server certificate for 127.0.0.1 signed by it, as trustee's plugin-e2e.mk makes them. */
function pluginCa(dir: string, name: string) {
  const caKey = join(dir, `${name}-ca.key`);
  const caCert = join(dir, `${name}-ca.pem`);
  const key = join(dir, `${name}-server.key`);
  const csr = join(dir, `${name}-server.csr`);
  const cert = join(dir, `${name}-server.pem`);
  const ext = join(dir, `${name}-server.ext`);
  openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    caKey,
    '-out',
    caCert,
    '-days',
    '2',
    '-subj',
    `/CN=${name} CA`,
  );
  openssl(
    'req',
    '-new',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    key,
    '-out',
    csr,
    '-subj',
    '/CN=127.0.0.1',
  );
  execFileSync('sh', ['-c', `printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > '${ext}'`]);
  openssl(
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    caCert,
    '-CAkey',
    caKey,
    '-CAcreateserial',
    '-out',
    cert,
    '-days',
    '2',
    '-extfile',
    ext,
  );
  return { caCert, tls: { certChain: readFileSync(cert), privateKey: readFileSync(key) } };
}

describe('KBS external plugins (trustee external-plugin*.toml)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ext-plugin-'));
  const work = join(dir, 'work');
  const closers: (() => Promise<unknown> | unknown)[] = [];
  let trusted: ReturnType<typeof pluginCa>;
  let keys: ReturnType<typeof makeKbsKeyFiles>;

  beforeAll(() => {
    mkdirSync(work);
    trusted = pluginCa(work, 'echo-plugin');
    copyFileSync(trusted.caCert, join(work, 'echo-plugin-ca.pem'));
    const keyDir = join(dir, 'keys');
    mkdirSync(keyDir);
    keys = makeKbsKeyFiles(keyDir);
    // The file names trustee's configs use, below ./work.
    copyFileSync(keys.tls.keyPath, join(work, 'https.key'));
    copyFileSync(keys.tls.certPath, join(work, 'https.crt'));
    copyFileSync(keys.tokenKey, join(work, 'token.key'));
    copyFileSync(keys.tokenCert, join(work, 'token-cert-chain.pem'));
    copyFileSync(keys.tokenCert, join(work, 'ca-cert.pem'));
    copyFileSync(keys.adminPub, join(work, 'kbs.pem'));
  });
  afterAll(async () => {
    for (const c of closers.reverse()) await c();
    rmSync(dir, { recursive: true, force: true });
  });

  /** trustee's config file with our ports and folder, started in this process. */
  async function kbsFrom(file: string, pluginPort: number): Promise<{ kbs: RunningKbs; url: string }> {
    const port = await freePort();
    const text = listenOn(readFileSync(vector(`trustee/configs/kbs/test/config/${file}`), 'utf8'), port)
      .replaceAll('./work/', `${work}/`)
      .replace(/127\.0\.0\.1:5005\d/g, `127.0.0.1:${pluginPort}`);
    const kbs = await startKbs(parseKbsConfigText(text, file), { logger: silent });
    closers.push(() => kbs.close());
    const tls = text.includes('insecure_http = false');
    return { kbs, url: `${tls ? 'https' : 'http'}://127.0.0.1:${port}` };
  }

  async function plugin(
    options: Partial<Parameters<typeof startExamplePlugin>[0]> = {},
  ): Promise<RunningExamplePlugin> {
    const p = await startExamplePlugin({ address: '127.0.0.1:0', ...options });
    closers.push(() => p.close());
    return p;
  }

  async function allowPlugins(url: string, adminToken: string | null, ca?: string): Promise<void> {
    await new KbsAdminClient({ url, adminToken, ...(ca !== undefined && { certPem: ca }) }).setResourcePolicy(
      PLUGIN_POLICY,
    );
  }

  async function attest(url: string, ca?: string) {
    const client = new KbsClient({
      url,
      attester: new SampleAttester(),
      ...(ca !== undefined && { certPem: ca }),
    });
    try {
      return await client.attest();
    } finally {
      client.close();
    }
  }

  it('external-plugin.toml: admin POST and token GET reach the plugin; policy, unknown backends and metrics as trustee', async () => {
    const p = await plugin();
    const { kbs, url } = await kbsFrom('external-plugin.toml', p.port);
    const posted = await call(`${url}/kbs/v0/external/echo-test/hello?x=1`, {
      method: 'POST',
      body: Buffer.from('abc'),
    });
    expect(posted.status).toBe(200);
    expect(posted.type).toBe('text/xml');
    expect(posted.body.toString()).toBe('Echo: method=POST, path=["hello"], query={"x": "1"}, body_len=3');

    // GET is attestation-gated: no token, then a token the policy refuses, then one it allows.
    const none = await call(`${url}/kbs/v0/external/echo-test/hello`);
    expect([none.status, errorType(none)]).toEqual([401, 'TokenNotFound']);
    await allowPlugins(url, null);
    const { token } = await attest(url);
    const got = await call(`${url}/kbs/v0/external/echo-test/a/b`, { token });
    expect(got.status).toBe(200);
    expect(got.body.toString()).toBe('Echo: method=GET, path=["a","b"], query={}, body_len=0');

    // Unregistered backend and a missing name: plugin errors (401), as trustee.
    for (const path of ['external/nobody/x', 'external']) {
      const a = await call(`${url}/kbs/v0/${path}`, { method: 'POST' });
      expect([a.status, errorType(a)]).toEqual([401, 'PluginInternalError']);
    }
    const metrics = await kbs.metrics.text();
    expect(metrics).toMatch(/kbs_plugin_requests_total\{plugin_name="echo-test"\} 2/);
    expect(metrics).toMatch(/kbs_plugin_request_duration_seconds_count\{plugin_name="echo-test"\} 2/);
  });

  it('external-plugin-test.toml: the built-in sample plugin starts beside the external gateway (with its [admin] in the current form)', async () => {
    const p = await plugin();
    const port = await freePort();
    const file = 'trustee/configs/kbs/test/test_data/configs/external-plugin-test.toml';
    const shipped = listenOn(readFileSync(vector(file), 'utf8'), port).replace(
      /127\.0\.0\.1:50051/,
      `127.0.0.1:${p.port}`,
    );
    // The file (referenced by nothing upstream) predates two of trustee's config changes: its [admin]
    // says `type`, which trustee's AdminConfig (tag authorization_mode, deny_unknown_fields) refuses
    // too, and it has no [attestation_token] trust material. Its plugins are not what is refused.
    expect(() => parseKbsConfigText(shipped, file)).toThrow(/\[admin\] authorization_mode is required/);
    const text = shipped.replace(
      '[admin]\ntype = "InsecureAllowAll"',
      '[attestation_token]\ninsecure_header_jwk = true\n\n[admin]\nauthorization_mode = "InsecureAllowAll"',
    );
    const kbs = await startKbs(parseKbsConfigText(text, file), { logger: silent });
    closers.push(() => kbs.close());
    const url = `http://127.0.0.1:${port}`;
    // sample is admin-gated ([admin] InsecureAllowAll here) and answers its fixed body.
    const sample = await call(`${url}/kbs/v0/sample/anything?x=1`);
    expect([sample.status, sample.type, sample.body.toString()]).toEqual([
      200,
      'text/xml',
      'sample plugin response',
    ]);
    const echoed = await call(`${url}/kbs/v0/external/echo-plugin/hello`, {
      method: 'POST',
      body: Buffer.from('a'),
    });
    expect([echoed.status, echoed.body.toString()]).toEqual([
      200,
      'Echo: method=POST, path=["hello"], query={}, body_len=1',
    ]);
  });

  it('the resource policy sees plugin "external" and the backend name first', async () => {
    const p = await plugin();
    const port = await freePort();
    const text = listenOn(
      readFileSync(vector('trustee/configs/kbs/test/config/external-plugin.toml'), 'utf8'),
      port,
    ).replace(
      /backends = \[[^\]]*\]/s,
      `backends = [{ name = "forbidden", endpoint = "http://127.0.0.1:${p.port}" }]`,
    );
    const kbs = await startKbs(parseKbsConfigText(text), { logger: silent });
    closers.push(() => kbs.close());
    const url = `http://127.0.0.1:${port}`;
    await allowPlugins(url, null);
    const { token } = await attest(url);
    const denied = await call(`${url}/kbs/v0/external/forbidden/x`, { token });
    expect([denied.status, errorType(denied)]).toEqual([401, 'PolicyDeny']);
  });

  it('external-plugin-tls.toml: the plugin over TLS verified against ca_cert_path; another CA is refused at start', async () => {
    const p = await plugin({ tls: trusted.tls });
    const { url } = await kbsFrom('external-plugin-tls.toml', p.port);
    const posted = await call(`${url}/kbs/v0/external/echo-test/hello`, { method: 'POST' });
    expect(posted.status).toBe(200);
    expect(posted.body.toString()).toMatch(/^Echo: method=POST/);

    // A plugin whose certificate another CA signed: the backend never becomes ready.
    const other = pluginCa(dir, 'other');
    const impostor = await plugin({ tls: other.tls });
    const deps = {
      admin: undefined as never,
      sessions: undefined as never,
      tokens: undefined as never,
      policy: undefined as never,
      metrics: undefined as unknown as KbsMetrics,
      logger: silent,
    };
    await expect(
      ExternalPlugin.connect(
        {
          backends: [
            {
              name: 'x',
              endpoint: `https://127.0.0.1:${impostor.port}`,
              target: `127.0.0.1:${impostor.port}`,
              caCertPath: trusted.caCert,
            },
          ],
        },
        deps,
        { connectWindowMs: 1500 },
      ),
    ).rejects.toThrow(/Initialize 'external' plugin failed: Failed to initialise backend 'x'/);
  });

  it('external-plugin-attest.toml: HTTPS KBS, admin JWT for POST, attestation token for GET', async () => {
    const p = await plugin({ store: true });
    const { url } = await kbsFrom('external-plugin-attest.toml', p.port);
    const ca = keys.tls.certPem;
    const adminJwt = await signAdminToken(readFileSync(keys.adminKey, 'utf8'), {
      issuer: 'issuer',
      audience: 'kbs',
    });
    const secret = Buffer.from('attest-gated secret');
    const unauth = await call(`${url}/kbs/v0/external/echo-test/k`, { method: 'POST', body: secret, ca });
    expect([unauth.status, errorType(unauth)]).toEqual([401, 'AdminAuthInitialization']);
    const stored = await call(`${url}/kbs/v0/external/echo-test/k`, {
      method: 'POST',
      body: secret,
      ca,
      token: adminJwt,
    });
    expect(stored.status).toBe(200);
    // trustee's test: without a token the GET fails; with one it is served.
    expect((await call(`${url}/kbs/v0/external/echo-test/k`, { ca })).status).toBe(401);
    await allowPlugins(url, adminJwt, ca);
    const { token } = await attest(url, ca);
    const got = await call(`${url}/kbs/v0/external/echo-test/k`, { ca, token });
    expect(got.status).toBe(200);
    expect(got.body.equals(secret)).toBe(true);
  });

  it.each([
    ['external-plugin-resource.toml', false],
    ['external-plugin-resource-tls.toml', true],
  ])('%s: store a secret (admin), fetch it JWE-encrypted to the TEE key', async (file, tls) => {
    const p = await plugin({ store: true, encryptGet: true, ...(tls && { tls: trusted.tls }) });
    const { url } = await kbsFrom(file, p.port);
    const secret = Buffer.from(Array.from({ length: 16 }, (_, i) => (i * 37 + 11) & 0xff));
    const stored = await call(`${url}/kbs/v0/external/resource/default/key/1`, {
      method: 'POST',
      body: secret,
      token: 'dummy',
    });
    expect(stored.status).toBe(200);
    await allowPlugins(url, null);
    const { token, teeKeyPair } = await attest(url);
    const got = await call(`${url}/kbs/v0/external/resource/default/key/1`, { token });
    expect(got.status).toBe(200);
    expect(got.type).toBe('application/json');
    const jwe = JSON.parse(got.body.toString('utf8'));
    expect(jwe.ciphertext).toBeTypeOf('string');
    expect(jweDecrypt(jwe, teeKeyPair.privateKey).equals(secret)).toBe(true);
  });

  it("kbs-plugin-example (broker-tools) configured by trustee's PLUGIN_* variables serves the KBS", async () => {
    const port = await freePort();
    const proc = start(binary('kbs-plugin-example'), [], {
      env: {
        ...process.env,
        PLUGIN_LISTEN_ADDR: `127.0.0.1:${port}`,
        PLUGIN_STORE_DATA: 'true',
        RUST_LOG: 'off',
      },
    });
    closers.push(() => proc.stop());
    await waitForListen({ port }, proc);
    const { url } = await kbsFrom('external-plugin-resource.toml', port);
    const secret = Buffer.from('from the example command');
    const stored = await call(`${url}/kbs/v0/external/resource/a/b`, {
      method: 'POST',
      body: secret,
      token: 'dummy',
    });
    expect(stored.status).toBe(200);
    await allowPlugins(url, null);
    const { token } = await attest(url);
    const got = await call(`${url}/kbs/v0/external/resource/a/b`, { token });
    expect(got.body.equals(secret)).toBe(true);
  });

  it('the plugin down mid-run: 401 PluginInternalError, no hang; served again once it is back', async () => {
    const p = await plugin();
    const { kbs, url } = await kbsFrom('external-plugin.toml', p.port);
    expect((await call(`${url}/kbs/v0/external/echo-test/x`, { method: 'POST' })).status).toBe(200);
    await p.close();
    const down = await call(`${url}/kbs/v0/external/echo-test/x`, { method: 'POST' });
    expect([down.status, errorType(down)]).toEqual([401, 'PluginInternalError']);
    expect(await kbs.metrics.text()).toMatch(/kbs_plugin_errors_total\{plugin_name="echo-test"\} [1-9]/);
    await plugin({ address: `127.0.0.1:${p.port}` });
    let back: Answer | undefined;
    for (let i = 0; i < 40 && back?.status !== 200; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 250));
      back = await call(`${url}/kbs/v0/external/echo-test/x`, { method: 'POST' });
    }
    expect(back?.status).toBe(200);
  });

  describe('a plugin we did not write (python3-grpcio, stubs from plugin.proto by protoc)', () => {
    let peer: ChildProcessWithoutNullStreams;
    let peerPort: number;
    beforeAll(async () => {
      peer = spawn('/usr/bin/python3', [PEER, PROTOS]);
      closers.push(() => {
        peer.stdin.end();
        return new Promise((r) => peer.once('exit', r));
      });
      let err = '';
      peer.stderr.on('data', (c: Buffer) => {
        err += c.toString();
      });
      peerPort = await new Promise<number>((resolve, reject) => {
        let out = '';
        peer.stdout.on('data', (c: Buffer) => {
          out += c.toString();
          const m = /PORT (\d+)/.exec(out);
          if (m) resolve(Number(m[1]));
        });
        peer.once('exit', (code) => reject(new Error(`python plugin exited ${code}: ${err}`)));
      });
    });

    it('forwards method, path, query and body; admin on PUT; encryption on request; non-2xx is an error', async () => {
      const port = await freePort();
      const text = listenOn(
        readFileSync(vector('trustee/configs/kbs/test/config/external-plugin.toml'), 'utf8'),
        port,
      ).replace(
        /backends = \[[^\]]*\]/s,
        `backends = [{ name = "py", endpoint = "http://127.0.0.1:${peerPort}", timeout_ms = 5000 }]`,
      );
      const kbs = await startKbs(parseKbsConfigText(text), { logger: silent });
      closers.push(() => kbs.close());
      const url = `http://127.0.0.1:${port}`;
      const body = Buffer.from('from the test');
      const put = await call(`${url}/kbs/v0/external/py/a/b%20c?k=v&z=%C3%A9`, { method: 'PUT', body });
      expect(put.status).toBe(200);
      expect(JSON.parse(put.body.toString())).toEqual({
        peer: 'python',
        method: 'PUT',
        path: ['a', 'b c'],
        query: { k: 'v', z: 'é' },
        body_sha256: createHash('sha256').update(body).digest('hex'),
      });
      await allowPlugins(url, null);
      const { token, teeKeyPair } = await attest(url);
      const plain = await call(`${url}/kbs/v0/external/py/x`, { token });
      expect(JSON.parse(plain.body.toString()).method).toBe('GET');
      const sealed = await call(`${url}/kbs/v0/external/py/x?encrypt=yes`, { token });
      expect(sealed.type).toBe('application/json');
      const opened = JSON.parse(
        jweDecrypt(JSON.parse(sealed.body.toString()), teeKeyPair.privateKey).toString(),
      );
      expect(opened).toMatchObject({ method: 'GET', path: ['x'], query: { encrypt: 'yes' } });
      const teapot = await call(`${url}/kbs/v0/external/py/teapot`, { token });
      expect([teapot.status, errorType(teapot)]).toEqual([401, 'PluginInternalError']);
      // A reply over MAX_PLUGIN_RESPONSE_BYTES (16 MiB) is refused by grpc-js; the KBS keeps serving.
      const huge = await call(`${url}/kbs/v0/external/py/huge`, { token });
      expect([huge.status, errorType(huge)]).toEqual([401, 'PluginInternalError']);
      expect((await call(`${url}/kbs/v0/external/py/x`, { token })).status).toBe(200);
    });
  });
});
