// GetResource end to end over a real unix socket: DataHubClient → the hub → a fake attestation agent
// (ttrpc) for tokens → a real in-process KBS for the resource.
import { existsSync } from 'node:fs';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DataHubClient } from '@broker/guest-api';
import { Code, TtrpcError } from '@broker/ttrpc';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type CdhConfig, parseCdhConfig } from './config.js';
import { HubInitializationFailed } from './errors.js';
import { type RunningDataHub, type StartDataHubOptions, startDataHub } from './server.js';
import {
  blackHole,
  captureLogger,
  closedPort,
  FakeAa,
  startTestKbs,
  type TestKbs,
  tempDir,
} from './testing/helpers.js';

const SECRET = 'the 32-byte key the workload uses';

let kbs: TestKbs;
let kbsDir: { dir: string; cleanup: () => Promise<void> };
beforeAll(async () => {
  kbsDir = await tempDir('cdh-kbs-');
  kbs = await startTestKbs();
  await kbs.setResource('default/key/one', SECRET);
  await kbs.setResource('default/attestation-status/status', 'success');
});
afterAll(async () => {
  await kbs.close();
  await kbsDir.cleanup();
});

let dir: string;
let cleanup: () => Promise<void>;
const stops: (() => Promise<void> | void)[] = [];
beforeEach(async () => {
  ({ dir, cleanup } = await tempDir());
});
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
  await cleanup();
});

function config(extra = '', kbc = `name = "cc_kbc"\nurl = "${kbs.url}"`): CdhConfig {
  return parseCdhConfig(
    `socket = "unix://${join(dir, 'cdh', 'cdh.sock')}"\n${extra.includes('[[credentials]]') ? '' : 'credentials = []\n'}[aa]\naa_socket = "unix://${join(dir, 'aa.sock')}"\n[kbc]\n${kbc}\n${extra}`,
  );
}

async function startAa(target: { url: string; certPem: string | null } = kbs): Promise<FakeAa> {
  const aa = await FakeAa.start(join(dir, 'aa.sock'), target);
  stops.push(() => aa.close());
  return aa;
}

async function startHub(
  cfg: CdhConfig = config(),
  options: StartDataHubOptions = {},
): Promise<{ hub: RunningDataHub; client: DataHubClient; lines: string[] }> {
  const { logger, lines } = captureLogger();
  const hub = await startDataHub(cfg, { logger, credentialRoot: join(dir, 'kbs'), ...options });
  stops.push(() => hub.close({ graceMs: 0 }));
  const client = await DataHubClient.connect(cfg.socket, { timeoutMs: 20_000 });
  stops.push(() => client.close());
  return { hub, client, lines };
}

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
 * A refused GetResource: the caller gets upstream's text and nothing more (no KBS answer, socket,
 * key size or state of the hub); resolves with the reason the hub logged for it.
 */
async function refusal(p: Promise<unknown>, lines: string[]): Promise<string> {
  const err = await failure(p);
  expect(err.code).toBe(Code.INTERNAL);
  expect(err.message).toBe('[CDH] [ERROR]: Get Resource failed');
  const logged = lines
    .map((l) => JSON.parse(l) as { msg: string; err?: string })
    .filter((e) => e.msg === 'GetResource failed');
  return logged.at(-1)?.err ?? '';
}

describe('GetResource through the KBS', () => {
  it('fetches with one token from the agent for several calls (token cached)', async () => {
    const aa = await startAa();
    const { client, hub } = await startHub();
    expect(hub.services).toContain('api.GetResourceService');
    expect(text(await client.getResource('kbs:///default/key/one'))).toBe(SECRET);
    expect(text(await client.getResource('kbs:///default/attestation-status/status'))).toBe('success');
    expect(text(await client.getResource('kbs:///default/key/one'))).toBe(SECRET);
    expect(aa.calls).toBe(1);
    expect(aa.tokenTypes).toEqual(['kbs']);
  });

  it('shares one token request between concurrent first calls', async () => {
    const aa = await startAa();
    const { client } = await startHub();
    const results = await Promise.all(
      Array.from({ length: 5 }, () => client.getResource('kbs:///default/key/one')),
    );
    expect(results.map(text)).toEqual(Array(5).fill(SECRET));
    expect(aa.calls).toBe(1);
  });

  it('ignores the host part of the URI: the configured KBS is asked', async () => {
    const aa = await startAa();
    const { client } = await startHub();
    const port = await closedPort();
    expect(text(await client.getResource(`kbs://127.0.0.1:${port}/default/key/one`))).toBe(SECRET);
    expect(text(await client.getResource('kbs://kbs.elsewhere.example/default/key/one'))).toBe(SECRET);
    expect(aa.calls).toBe(1);
  });

  it('on a 401 gets a new token from the agent and tries again', async () => {
    const aa = await startAa();
    aa.queue.push('tampered');
    const { client, lines } = await startHub();
    expect(text(await client.getResource('kbs:///default/key/one'))).toBe(SECRET);
    expect(aa.calls).toBe(2);
    expect(lines.join('')).toMatch(/KBS refused the token/);
    // The new token is cached from then on.
    expect(text(await client.getResource('kbs:///default/key/one'))).toBe(SECRET);
    expect(aa.calls).toBe(2);
  });

  it('gives up after 3 attempts, each with a new token', async () => {
    const aa = await startAa();
    aa.fallback = 'tampered';
    const { client, lines } = await startHub();
    const reason = await refusal(client.getResource('kbs:///default/key/one'), lines);
    expect(reason).toMatch(/^request unauthorized \(/);
    expect(aa.calls).toBe(3);
  });

  it('reports a resource the KBS does not release (trustee answers 401 for a missing one)', async () => {
    const aa = await startAa();
    const { client, lines } = await startHub();
    const reason = await refusal(client.getResource('kbs:///default/key/missing'), lines);
    expect(reason).toMatch(/^request unauthorized \(PluginInternalError/);
    expect(aa.calls).toBe(3);
  });

  it('works over HTTPS with kbs_cert', async () => {
    const tls = await tempDir('cdh-tls-');
    stops.push(tls.cleanup);
    const secure = await startTestKbs({ tls });
    stops.push(() => secure.close());
    await secure.setResource('default/key/one', 'over https');
    await startAa(secure);
    const cert = (secure.certPem as string).trim();
    const { client } = await startHub(
      config('', `name = "cc_kbc"\nurl = "${secure.url}"\nkbs_cert = """\n${cert}\n"""`),
    );
    expect(text(await client.getResource('kbs:///default/key/one'))).toBe('over https');
    // Without the certificate the KBS is not trusted.
    const other = config('', `name = "cc_kbc"\nurl = "${secure.url}"`);
    const untrusted = await startHub({
      ...other,
      socket: `unix://${join(dir, 'b.sock')}`,
      socketAddress: { path: join(dir, 'b.sock') },
    });
    const reason = await refusal(untrusted.client.getResource('kbs:///default/key/one'), untrusted.lines);
    expect(reason).toMatch(
      /^http request failed: get failed: GET https:\/\/127\.0\.0\.1:\d+\/kbs\/v0\/resource\/default\/key\/one: /,
    );
  });
});

describe('refusals and failures', () => {
  it('rejects URIs that are not kbs:///repository/type/tag, without asking the agent', async () => {
    const aa = await startAa();
    const { client, lines } = await startHub();
    const cases: [string, RegExp][] = [
      ['', /scheme must be kbs:\/\/ or kbs\+<plugin>:\/\//],
      ['http://kbs/default/key/one', /scheme must be kbs:\/\//],
      ['kbs:///default/key', /expected exactly 3 segments/],
      ['kbs:///default/key/one/two', /expected exactly 3 segments/],
      ['kbs:///default/../one', /does not match/],
      ['kbs:///default/key/%2e%2e', /percent-encoding/],
      ['kbs+:///a/b/c', /needs a plugin name/],
      ['kbs+sample:///a/../c', /path segment 2/],
      ['kbs+resource:///a/b', /expected exactly 3 segments/],
      ['kbs://user@host/a/b/c', /user information/],
      ['kbs:///a/b/c#frag', /fragments/],
      [`kbs:///${'a'.repeat(5000)}/b/c`, /too long/],
    ];
    for (const [uri, why] of cases) {
      const reason = await refusal(client.getResource(uri), lines);
      expect(reason.startsWith('illegal kbs resource uri: ')).toBe(true);
      expect(reason).toMatch(why);
      expect(reason.length).toBeLessThan(600);
    }
    expect(aa.calls).toBe(0);
  });

  it('shows control characters of a hostile URI escaped', async () => {
    const { client, lines } = await startHub();
    const reason = await refusal(client.getResource('kbs:///a\n/b\u0000/c'), lines);
    expect(reason).toContain('kbs:///a\\x0a/b\\x00/c');
    expect(reason).not.toContain('\n');
  });

  it('gives a clear error when the agent is down, and recovers once it is up', async () => {
    const { client, lines } = await startHub();
    const reason = await refusal(client.getResource('kbs:///default/key/one'), lines);
    expect(reason).toMatch(
      /^get token failed: Attestation Agent token provider error: ttrpc connect failed: cannot reach the attestation agent at unix:\/\/.*aa\.sock: /,
    );
    const aa = await startAa();
    expect(text(await client.getResource('kbs:///default/key/one'))).toBe(SECRET);
    expect(aa.calls).toBe(1);
  });

  it('reconnects after the agent restarts', async () => {
    let aa = await startAa();
    aa.queue.push('tampered', 'tampered', 'tampered');
    const { client } = await startHub();
    await failure(client.getResource('kbs:///default/key/one'));
    await aa.close();
    aa = await startAa();
    expect(text(await client.getResource('kbs:///default/key/one'))).toBe(SECRET);
    expect(aa.calls).toBe(1);
  });

  it("passes the agent's own error and a malformed reply on", async () => {
    const aa = await startAa();
    aa.queue.push('fail', 'garbage');
    const { client, lines } = await startHub();
    const first = await refusal(client.getResource('kbs:///default/key/one'), lines);
    expect(first).toBe(
      'get token failed: Attestation Agent token provider error: cal ttrpc failed: [ERROR:attestation-agent] AA-KBC get token failed',
    );
    const second = await refusal(client.getResource('kbs:///default/key/one'), lines);
    expect(second).toMatch(
      /^get token failed: Attestation Agent token provider error: deserialize attestation-agent reply failed: /,
    );
    expect(text(await client.getResource('kbs:///default/key/one'))).toBe(SECRET);
  });

  it('gives a clear error when the KBS is down', async () => {
    await startAa();
    const port = await closedPort();
    const { client, lines } = await startHub(config('', `name = "cc_kbc"\nurl = "http://127.0.0.1:${port}"`));
    const reason = await refusal(client.getResource('kbs:///default/key/one'), lines);
    expect(reason).toMatch(
      new RegExp(
        `^http request failed: get failed: GET http://127\\.0\\.0\\.1:${port}/kbs/v0/resource/default/key/one: .*ECONNREFUSED`,
      ),
    );
  });

  it('does not hang on a KBS that never answers (bounded timeout)', async () => {
    const hole = await blackHole();
    stops.push(hole.close);
    await startAa();
    const { client, lines } = await startHub(config('', `name = "cc_kbc"\nurl = "${hole.url}"`), {
      kbsTimeoutMs: 300,
    });
    const reason = await refusal(client.getResource('kbs:///default/key/one'), lines);
    expect(reason).toMatch(/^http request failed: get failed: .*no complete response within 300 ms/);
  });

  it('does not hang on an agent that never answers (bounded timeout)', async () => {
    const { createServer } = await import('node:net');
    const accepted: import('node:net').Socket[] = [];
    const silent = createServer((s) => accepted.push(s));
    await new Promise<void>((resolve) => silent.listen(join(dir, 'aa.sock'), resolve));
    stops.push(
      () =>
        new Promise<void>((resolve) => {
          for (const s of accepted) s.destroy();
          silent.close(() => resolve());
        }),
    );
    const { client, lines } = await startHub(config(), { aaCallTimeoutMs: 300 });
    const reason = await refusal(client.getResource('kbs:///default/key/one'), lines);
    expect(reason).toMatch(/get token failed: .*cal ttrpc failed: context deadline exceeded/);
  });

  it('says so when no KBS URL is configured', async () => {
    await startAa();
    const { client, lines } = await startHub(config('', 'name = "cc_kbc"'));
    const reason = await refusal(client.getResource('kbs:///default/key/one'), lines);
    expect(reason).toBe('no KBS is configured: [kbc] url is empty');
  });

  it('never logs resource contents or tokens', async () => {
    const aa = await startAa();
    aa.queue.push('tampered');
    const { client, lines } = await startHub();
    await client.getResource('kbs:///default/key/one');
    const all = lines.join('\n');
    expect(all).toContain('get resource called');
    expect(all).not.toContain(SECRET);
    expect(all).not.toMatch(/eyJ[A-Za-z0-9_-]{20,}/); // no JWT
    expect(all).not.toContain('PRIVATE KEY');
  });
});

describe('credentials at start-up', () => {
  const creds = (entries: [string, string][]) =>
    entries.map(([uri, path]) => `[[credentials]]\nresource_uri = "${uri}"\npath = "${path}"\n`).join('');

  it('writes each credential before the socket opens, readable by the owner only', async () => {
    const aa = await startAa();
    const root = join(dir, 'kbs');
    const cfg = parseCdhConfig(
      `socket = "unix://${join(dir, 'cdh.sock')}"\n[aa]\naa_socket = "unix://${join(dir, 'aa.sock')}"\n[kbc]\nname = "cc_kbc"\nurl = "${kbs.url}"\n` +
        creds([
          ['kbs:///default/key/one', `${root}/kms-credential/aliyun/key.json`],
          ['kbs://ignored.host/default/attestation-status/status', `${root}/status`],
        ]),
    );
    const { client } = await startHub(cfg);
    expect(await readFile(`${root}/kms-credential/aliyun/key.json`, 'utf8')).toBe(SECRET);
    expect(await readFile(`${root}/status`, 'utf8')).toBe('success');
    expect((await stat(`${root}/status`)).mode & 0o777).toBe(0o600);
    expect(aa.calls).toBe(1);
    // The same cached token serves later calls.
    expect(text(await client.getResource('kbs:///default/key/one'))).toBe(SECRET);
    expect(aa.calls).toBe(1);
  });

  it('replaces an existing file', async () => {
    await startAa();
    const root = join(dir, 'kbs');
    const { mkdir } = await import('node:fs/promises');
    await mkdir(root, { recursive: true });
    await writeFile(`${root}/status`, 'stale');
    const cfg = config(creds([['kbs:///default/attestation-status/status', `${root}/status`]]));
    await startHub(cfg);
    expect(await readFile(`${root}/status`, 'utf8')).toBe('success');
  });

  it('refuses paths outside the folder or with . and .., before fetching anything', async () => {
    const aa = await startAa();
    const root = join(dir, 'kbs');
    for (const bad of ['/etc/passwd', `${root}/../escape`, `${root}/a/./b`, `${root}-other/x`, `${root}/`]) {
      const cfg = config(creds([['kbs:///default/key/one', bad]]));
      const err = await startDataHub(cfg, { credentialRoot: root }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(HubInitializationFailed);
      expect((err as Error).message).toBe(`init Hub failed: illegal path to put credential : ${bad}`);
      expect(existsSync(cfg.socketAddress.path)).toBe(false);
    }
    expect(aa.calls).toBe(0);
  });

  it('fails start-up when a credential cannot be fetched', async () => {
    await startAa();
    const cfg = config(creds([['kbs:///default/key/missing', `${join(dir, 'kbs')}/x`]]));
    const err = await startDataHub(cfg, { credentialRoot: join(dir, 'kbs') }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HubInitializationFailed);
    expect((err as Error).message).toMatch(
      /^init Hub failed: kbs client get resource failed: request unauthorized \(PluginInternalError/,
    );
    expect(existsSync(cfg.socketAddress.path)).toBe(false);
    expect(existsSync(`${join(dir, 'kbs')}/x`)).toBe(false);
  });
});

describe('offline_fs_kbc', () => {
  it('serves resources from local JSON files', async () => {
    const file = join(dir, 'resources.json');
    await writeFile(file, JSON.stringify({ 'default/key/one': Buffer.from('offline').toString('base64') }));
    const { client, lines } = await startHub(config('', 'name = "offline_fs_kbc"'), {
      offlineFsKbcFiles: [join(dir, 'absent.json'), file],
    });
    expect(text(await client.getResource('kbs:///default/key/one'))).toBe('offline');
    const reason = await refusal(client.getResource('kbs:///default/key/two'), lines);
    expect(reason).toBe('offline-fs-kbc: resource not found default/key/two');
    // As upstream's offline_fs_kbc, the path is the key whatever plugin the URI names.
    expect(text(await client.getResource('kbs+sample:///default/key/one'))).toBe('offline');
  });

  it('refuses a malformed resource file', async () => {
    const file = join(dir, 'resources.json');
    for (const [content, why] of [
      ['{not json', /illegal resource file/],
      ['[1]', /not a JSON object/],
      ['{"a/b/c": "%%%"}', /is not standard base64/],
      ['{"a/b/c": 3}', /is not standard base64/],
    ] as const) {
      await writeFile(file, content);
      const { client, lines } = await startHub(
        {
          ...config('', 'name = "offline_fs_kbc"'),
          socket: `unix://${join(dir, `${stops.length}.sock`)}`,
          socketAddress: { path: join(dir, `${stops.length}.sock`) },
        },
        { offlineFsKbcFiles: [file] },
      );
      expect(await refusal(client.getResource('kbs:///a/b/c'), lines)).toMatch(why);
    }
  });
});
