/**
 * Pulls through a proxy: Debian's tinyproxy in front of Debian's
 * docker-registry (plain http, and https reached through CONNECT). tinyproxy
 * connects out from 127.0.0.3, so the registry's access log shows, request
 * by request, whether it came through the proxy (127.0.0.3) or directly
 * (127.0.0.1).
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildImage, buildLayer, pushImage } from '../build.js';
import { parsePolicy } from '../policy.js';
import { pullImage } from '../pull.js';
import { createSigstoreSignature } from '../sigstore.js';
import { type RunningTinyproxy, startTinyproxy } from '../testing/tinyproxy.js';
import { RegistryClient } from './client.js';
import { type RunningRegistry, startDockerRegistry } from './local-registry.js';
import { ProxyConfigError, parseNoProxy, proxySettingsFromEnv, resolveProxies } from './proxy.js';
import { pushSigstoreSignatures } from './signatures.js';

describe('no_proxy', () => {
  const url = (s: string) => new URL(s);
  it('matches domains with their subdomains, IPs, CIDR blocks, ports and *', () => {
    const np = parseNoProxy(
      ' Example.com, .corp.test,*.svc.local , 10.1.2.3, 192.168.0.0/16, [::1], fd00::/8, reg.io:5000',
    );
    expect(np.matches(url('https://example.com/v2/'))).toBe(true);
    expect(np.matches(url('https://registry.EXAMPLE.com/v2/'))).toBe(true);
    expect(np.matches(url('https://notexample.com/v2/'))).toBe(false);
    expect(np.matches(url('https://corp.test/'))).toBe(true);
    expect(np.matches(url('https://a.b.corp.test/'))).toBe(true);
    expect(np.matches(url('https://x.svc.local/'))).toBe(true);
    expect(np.matches(url('http://10.1.2.3:5000/'))).toBe(true);
    expect(np.matches(url('http://10.1.2.4/'))).toBe(false);
    expect(np.matches(url('https://192.168.7.9/'))).toBe(true);
    expect(np.matches(url('https://192.169.0.1/'))).toBe(false);
    expect(np.matches(url('https://[::1]:5000/'))).toBe(true);
    expect(np.matches(url('https://[fd12::5]/'))).toBe(true);
    expect(np.matches(url('https://[fe80::1]/'))).toBe(false);
    expect(np.matches(url('https://reg.io:5000/'))).toBe(true);
    expect(np.matches(url('https://reg.io/'))).toBe(false);
    expect(np.matches(url('https://sub.reg.io:5000/'))).toBe(true);
    expect(parseNoProxy('*').matches(url('https://anything.example/'))).toBe(true);
    expect(parseNoProxy('').matches(url('https://anything.example/'))).toBe(false);
    expect(parseNoProxy(null).matches(url('https://anything.example/'))).toBe(false);
    // A port given: the default port of the scheme counts.
    expect(parseNoProxy('reg.io:443').matches(url('https://reg.io/'))).toBe(true);
    expect(parseNoProxy('reg.io:443').matches(url('http://reg.io/'))).toBe(false);
  });

  it('refuses entries that are neither hosts nor blocks', () => {
    expect(() => parseNoProxy('10.0.0.0/40')).toThrow(ProxyConfigError);
    expect(() => parseNoProxy('a*b.com')).toThrow('no_proxy: a*b.com is not a host name');
    expect(() => parseNoProxy('host:70000')).toThrow('has an invalid port');
  });
});

describe('proxy choice', () => {
  it('https URLs take https_proxy, http URLs http_proxy, no_proxy hosts none', () => {
    const p = resolveProxies({
      httpsProxy: 'proxy.example:3128',
      httpProxy: 'http://user:pw@plain.example:8080',
      noProxy: 'internal.example',
    });
    expect(p.proxyFor(new URL('https://quay.io/v2/'))?.href).toBe('http://proxy.example:3128/');
    expect(p.proxyFor(new URL('http://10.0.0.1:5000/v2/'))?.href).toBe('http://user:pw@plain.example:8080/');
    expect(p.proxyFor(new URL('https://r.internal.example/v2/'))).toBeUndefined();
    // Only https_proxy (the kernel command line's usual case): plain-http registries go direct.
    const only = resolveProxies({ httpsProxy: 'http://1.2.3.4:1234' });
    expect(only.proxyFor(new URL('http://10.0.0.1:5000/v2/'))).toBeUndefined();
    expect(only.proxyFor(new URL('https://quay.io/v2/'))?.host).toBe('1.2.3.4:1234');
    expect(
      resolveProxies({ httpsProxy: '', httpProxy: null }).proxyFor(new URL('https://q.io/')),
    ).toBeUndefined();
    expect(() => resolveProxies({ httpsProxy: 'socks5://p:1080' })).toThrow(
      'https_proxy: unsupported proxy scheme socks5: (http or https)',
    );
  });

  it('reads the environment as skopeo does, upper case first', () => {
    expect(proxySettingsFromEnv({})).toBeUndefined();
    expect(proxySettingsFromEnv({ NO_PROXY: 'x' })).toBeUndefined();
    expect(
      proxySettingsFromEnv({ HTTPS_PROXY: 'http://a:1', https_proxy: 'http://b:1', no_proxy: 'n' }),
    ).toEqual({ httpsProxy: 'http://a:1', httpProxy: null, noProxy: 'n' });
  });
});

describe('pulls through tinyproxy (Debian) from docker-registry', () => {
  let proxy: RunningTinyproxy;
  let plain: RunningRegistry;
  let secure: RunningRegistry;
  let ca: string;
  const signer = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  let work: string;

  const image = async () =>
    buildImage({ layers: [await buildLayer([{ name: 'etc/hello', content: 'through the proxy\n' }])] });

  /** Access-log lines written while `f` ran, each the client's address first. */
  async function registryLines(r: RunningRegistry, f: () => Promise<unknown>): Promise<string[]> {
    const before = r.accessLog().length;
    await f();
    // docker-registry writes its access log after the response: give the last line a moment.
    await new Promise((res) => setTimeout(res, 200));
    return r
      .accessLog()
      .slice(before)
      .split('\n')
      .filter((l) => l !== '');
  }

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'proxy-pull-'));
    [proxy, plain, secure] = await Promise.all([
      startTinyproxy(),
      startDockerRegistry({ accessLog: true }),
      startDockerRegistry({ accessLog: true, tls: true }),
    ]);
    ca = secure.certPem ?? '';
    const direct = new RegistryClient({ insecure: (h) => h === plain.host, ca: [ca] });
    await pushImage(direct, { domain: plain.host, path: 'ns/app' }, 'v1', await image());
    const digest = await pushImage(direct, { domain: secure.host, path: 'ns/app' }, 'v1', await image());
    await pushSigstoreSignatures(direct, { domain: secure.host, path: 'ns/app' }, digest, [
      createSigstoreSignature(signer.privateKey, {
        manifestDigest: digest,
        dockerReference: `${secure.host}/ns/app:v1`,
      }),
    ]);
    direct.close();
  }, 60_000);

  afterAll(async () => {
    await Promise.all([proxy?.stop(), plain?.stop(), secure?.stop()]);
    await rm(work, { recursive: true, force: true });
  });

  it('a plain-http registry gets every request through http_proxy, in absolute form', async () => {
    const seen = proxy.requests().length;
    const dest = join(work, 'plain');
    const lines = await registryLines(plain, () =>
      pullImage(`${plain.host}/ns/app:v1`, dest, {
        registry: { insecure: () => true, proxy: { httpProxy: proxy.url } },
      }),
    );
    expect(await readFile(join(dest, 'rootfs/etc/hello'), 'utf8')).toBe('through the proxy\n');
    // Manifest, config and layer at least; every one from the proxy's address.
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const l of lines) expect(l.startsWith(`${proxy.bind} `)).toBe(true);
    const through = proxy.requests().slice(seen);
    expect(through.length).toBe(lines.length);
    for (const r of through) expect(r).toMatch(new RegExp(`^(GET|HEAD) http://${plain.host}/v2/ns/app/`));
  });

  it('an https registry is reached through a CONNECT tunnel of https_proxy (TLS with the registry)', async () => {
    const seen = proxy.requests().length;
    const dest = join(work, 'secure');
    const lines = await registryLines(secure, () =>
      pullImage(`${secure.host}/ns/app:v1`, dest, {
        registry: {
          ca: [ca],
          proxy: { httpsProxy: proxy.url, httpProxy: null, noProxy: 'example.com' },
        },
      }),
    );
    expect(await readFile(join(dest, 'rootfs/etc/hello'), 'utf8')).toBe('through the proxy\n');
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const l of lines) expect(l.startsWith(`${proxy.bind} `)).toBe(true);
    const through = proxy.requests().slice(seen);
    expect(through.length).toBeGreaterThanOrEqual(1);
    for (const r of through) expect(r).toBe(`CONNECT ${secure.host}`);
  });

  it('signatures are fetched through the proxy too: a signed pull sends nothing around it', async () => {
    const policy = parsePolicy(
      JSON.stringify({
        default: [{ type: 'reject' }],
        transports: {
          docker: {
            [secure.host]: [
              {
                type: 'sigstoreSigned',
                keyData: signer.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
              },
            ],
          },
        },
      }),
    );
    const lines = await registryLines(secure, async () => {
      const r = await pullImage(`${secure.host}/ns/app:v1`, join(work, 'signed'), {
        policy,
        registry: { ca: [ca], proxy: { httpsProxy: proxy.url } },
      });
      expect(r.decision?.allowed).toBe(true);
    });
    expect(lines.some((l) => /GET \/v2\/ns\/app\/manifests\/sha256-[0-9a-f]{64}\.sig /.test(l))).toBe(true);
    for (const l of lines) expect(l.startsWith(`${proxy.bind} `)).toBe(true);
  });

  it('proxy credentials in the URL are sent as Proxy-Authorization; without them the proxy refuses', async () => {
    const guarded = await startTinyproxy({ basicAuth: { user: 'puller', password: 's3cret' } });
    try {
      const withCredentials = new URL(guarded.url);
      withCredentials.username = 'puller';
      withCredentials.password = 's3cret';
      const lines = await registryLines(secure, () =>
        pullImage(`${secure.host}/ns/app:v1`, join(work, 'auth'), {
          registry: { ca: [ca], proxy: { httpsProxy: withCredentials.href } },
        }),
      );
      expect(lines.length).toBeGreaterThanOrEqual(3);
      for (const l of lines) expect(l.startsWith(`${guarded.bind} `)).toBe(true);
      await expect(
        pullImage(`${secure.host}/ns/app:v1`, join(work, 'noauth'), {
          registry: { ca: [ca], proxy: { httpsProxy: guarded.url } },
        }),
      ).rejects.toThrow(
        /^Failed to pull image manifest: .*Proxy response \(407\) !== 200 when HTTP Tunneling/,
      );
    } finally {
      await guarded.stop();
    }
  });

  it.each([
    ['the IP', '127.0.0.1'],
    ['host:port', () => secure.host],
    ['a CIDR block', '127.0.0.0/8'],
    ['*', '*'],
  ])('a no_proxy match (%s) goes direct: the proxy sees nothing', async (_what, entry) => {
    const seen = proxy.log().length;
    const noProxy = typeof entry === 'function' ? entry() : entry;
    const dest = await mkdtemp(join(work, 'direct-'));
    const lines = await registryLines(secure, () =>
      pullImage(`${secure.host}/ns/app:v1`, dest, {
        registry: {
          ca: [ca],
          proxy: { httpsProxy: proxy.url, noProxy: `other.example, ${noProxy}` },
        },
      }),
    );
    expect(await readFile(join(dest, 'rootfs/etc/hello'), 'utf8')).toBe('through the proxy\n');
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const l of lines) expect(l.startsWith('127.0.0.1 ')).toBe(true);
    expect(proxy.log().slice(seen)).not.toMatch(/Connect|Request/);
  });

  it('a proxy that is not there fails the pull: nothing is fetched around it', async () => {
    const lines = await registryLines(secure, async () => {
      await expect(
        pullImage(`${secure.host}/ns/app:v1`, join(work, 'none'), {
          registry: { ca: [ca], proxy: { httpsProxy: 'http://127.0.0.1:9' } },
        }),
      ).rejects.toThrow(
        /^Failed to pull image manifest: GET https:\/\/127\.0\.0\.1:\d+\/v2\/ns\/app\/manifests\/v1: .*ECONNREFUSED 127\.0\.0\.1:9$/,
      );
    });
    expect(lines).toEqual([]);
  });
});
