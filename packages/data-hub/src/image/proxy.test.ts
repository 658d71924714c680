/**
 * PullImage through `[image.image_pull_proxy]` and the kernel command line's
 * `agent.https_proxy` / `agent.no_proxy`: Debian's tinyproxy in front of
 * Debian's docker-registry. tinyproxy connects out from 127.0.0.3, so the
 * registry's access log shows which requests came through it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildImage, buildLayer, pushImage, RegistryClient } from '@broker/image';
import {
  type RunningRegistry,
  type RunningTinyproxy,
  startDockerRegistry,
  startTinyproxy,
} from '@broker/image/testing';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type CdhConfig, defaultCdhConfig, parseCdhConfig } from '../config.js';
import { captureLogger, tempDir } from '../testing/helpers.js';
import { ImagePullService } from './service.js';

let proxy: RunningTinyproxy;
let plain: RunningRegistry;
let secure: RunningRegistry;
const digests = new Map<string, string>();

beforeAll(async () => {
  [proxy, plain, secure] = await Promise.all([
    startTinyproxy(),
    startDockerRegistry({ accessLog: true }),
    startDockerRegistry({ accessLog: true, tls: true }),
  ]);
  const client = new RegistryClient({ insecure: (h) => h === plain.host, ca: [secure.certPem ?? ''] });
  for (const r of [plain, secure]) {
    const image = buildImage({
      layers: [await buildLayer([{ name: 'etc/where', content: `${r.host}\n` }])],
    });
    digests.set(r.host, await pushImage(client, { domain: r.host, path: 'app/proxied' }, 'v1', image));
  }
  client.close();
}, 60_000);

afterAll(async () => {
  await Promise.all([proxy?.stop(), plain?.stop(), secure?.stop()]);
});

let dir: string;
let cleanup: () => Promise<void>;
const services: ImagePullService[] = [];
beforeEach(async () => {
  ({ dir, cleanup } = await tempDir('cdh-proxy-'));
});
afterEach(async () => {
  for (const s of services.splice(0)) s.close();
  await cleanup();
});

function service(cfg: CdhConfig, ca?: string) {
  const { logger, lines } = captureLogger();
  const s = new ImagePullService(
    cfg,
    {
      logger,
      getResource: async (uri) => {
        throw new Error(`no KBS here (${uri})`);
      },
    },
    {
      extendMeasurement: async () => undefined,
      ...(ca !== undefined ? { registry: { ca: [ca] } } : {}),
    },
  );
  services.push(s);
  return { s, lines };
}

/** The registry's access-log lines written while `f` ran. */
async function registryLines(r: RunningRegistry, f: () => Promise<unknown>): Promise<string[]> {
  const before = r.accessLog().length;
  await f();
  await new Promise((res) => setTimeout(res, 200));
  return r
    .accessLog()
    .slice(before)
    .split('\n')
    .filter((l) => l !== '');
}

const socket = () => `socket = "unix://${join(dir, 'cdh.sock')}"`;

describe('[image.image_pull_proxy]', () => {
  it('http_proxy carries every request to a plain-http registry', async () => {
    const cfg = parseCdhConfig(
      [
        socket(),
        '[kbc]',
        'name = "offline_fs_kbc"',
        '[image]',
        `work_dir = "${join(dir, 'work')}"`,
        '[image.image_pull_proxy]',
        `http_proxy = "${proxy.url}"`,
        'no_proxy = "registry.example"',
        '[[image.registry_config.registry]]',
        `prefix = "${plain.host}"`,
        `location = "${plain.host}"`,
        'insecure = true',
        '',
      ].join('\n'),
    );
    const { s, lines: log } = service(cfg);
    const seen = proxy.requests().length;
    const bundle = join(dir, 'bundle');
    const lines = await registryLines(plain, async () => {
      expect(await s.pullImage(`${plain.host}/app/proxied:v1`, bundle)).toBe(digests.get(plain.host));
    });
    expect(readFileSync(join(bundle, 'rootfs/etc/where'), 'utf8')).toBe(`${plain.host}\n`);
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const l of lines) expect(l.startsWith(`${proxy.bind} `)).toBe(true);
    expect(proxy.requests().slice(seen).length).toBe(lines.length);
    expect(log.join('\n')).toContain('pulling images through a proxy');
    expect(log.join('\n')).not.toContain('is not supported');
  });

  it('https_proxy with extra_root_certificates: CONNECT, then TLS with the registry checked against that CA', async () => {
    const cfg = parseCdhConfig(
      [
        socket(),
        '[kbc]',
        'name = "offline_fs_kbc"',
        '[image]',
        `work_dir = "${join(dir, 'work')}"`,
        `extra_root_certificates = ['''${secure.certPem ?? ''}''']`,
        '[image.image_pull_proxy]',
        `https_proxy = "${proxy.url}"`,
        '',
      ].join('\n'),
    );
    const { s } = service(cfg);
    const seen = proxy.requests().length;
    const lines = await registryLines(secure, async () => {
      expect(await s.pullImage(`${secure.host}/app/proxied:v1`, join(dir, 'bundle'))).toBe(
        digests.get(secure.host),
      );
    });
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const l of lines) expect(l.startsWith(`${proxy.bind} `)).toBe(true);
    expect(proxy.requests().slice(seen)).toContain(`CONNECT ${secure.host}`);
    // Without the CA the tunnel opens, and the registry's certificate is refused.
    const { s: untrusting } = service(
      parseCdhConfig(
        [
          socket(),
          '[kbc]',
          'name = "offline_fs_kbc"',
          '[image]',
          `work_dir = "${join(dir, 'work2')}"`,
          '[image.image_pull_proxy]',
          `https_proxy = "${proxy.url}"`,
          '',
        ].join('\n'),
      ),
    );
    await expect(untrusting.pullImage(`${secure.host}/app/proxied:v1`, join(dir, 'bundle2'))).rejects.toThrow(
      /self[- ]signed certificate/,
    );
  });

  it('a proxy setting that is not a proxy URL fails the image client', async () => {
    const cfg = parseCdhConfig(
      [
        socket(),
        '[kbc]',
        'name = "offline_fs_kbc"',
        '[image]',
        `work_dir = "${join(dir, 'work')}"`,
        '[image.image_pull_proxy]',
        'https_proxy = "socks5://127.0.0.1:1080"',
        '',
      ].join('\n'),
    );
    const { s } = service(cfg);
    await expect(s.pullImage(`${secure.host}/app/proxied:v1`, join(dir, 'b'))).rejects.toThrow(
      'Image Client error: Invalid image pull proxy: https_proxy: unsupported proxy scheme socks5: (http or https)',
    );
  });
});

describe('the kernel command line (no [image] section)', () => {
  const fromCmdline = (cmdline: string) =>
    defaultCdhConfig({ env: {}, kernelCmdline: `console=ttyS0 ${cmdline} quiet` });

  it('agent.https_proxy tunnels every request to an https registry through CONNECT', async () => {
    const cfg = fromCmdline(`agent.https_proxy=${proxy.url}`);
    expect(cfg.image.imagePullProxy).toEqual({ httpsProxy: proxy.url, httpProxy: null, noProxy: null });
    const { s } = service({ ...cfg, image: { ...cfg.image, workDir: join(dir, 'work') } }, secure.certPem);
    const seen = proxy.requests().length;
    const bundle = join(dir, 'bundle');
    const lines = await registryLines(secure, async () => {
      expect(await s.pullImage(`${secure.host}/app/proxied:v1`, bundle)).toBe(digests.get(secure.host));
    });
    expect(readFileSync(join(bundle, 'rootfs/etc/where'), 'utf8')).toBe(`${secure.host}\n`);
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const l of lines) expect(l.startsWith(`${proxy.bind} `)).toBe(true);
    const through = proxy.requests().slice(seen);
    expect(through.length).toBeGreaterThanOrEqual(1);
    for (const r of through) expect(r).toBe(`CONNECT ${secure.host}`);
  });

  it('agent.no_proxy names the registry: it is contacted directly and the proxy sees nothing', async () => {
    const cfg = fromCmdline(`agent.https_proxy=${proxy.url} agent.no_proxy=localhost,${secure.host}`);
    const { s } = service({ ...cfg, image: { ...cfg.image, workDir: join(dir, 'work') } }, secure.certPem);
    const seen = proxy.log().length;
    const lines = await registryLines(secure, () =>
      s.pullImage(`${secure.host}/app/proxied:v1`, join(dir, 'bundle')),
    );
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const l of lines) expect(l.startsWith('127.0.0.1 ')).toBe(true);
    expect(proxy.log().slice(seen)).not.toMatch(/Connect|Request/);
  });
});
