/**
 * A local registry for demos, benchmarks and tests: Debian's
 * `docker-registry` (distribution 2.8) on a free loopback port with a
 * temporary storage root, plain http. A missing binary is an error that says
 * how to install it (`scripts/install-deps.sh`); `skopeo` and `umoci` are
 * found the same way.
 */

import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { get as httpGet } from 'node:http';
import { get as httpsGet } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { ImageError } from '../errors.js';

const run = promisify(execFile);

/** The path of `name` on PATH; throws telling to run the install script when absent. */
export function requireTool(name: string): string {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const p = join(dir, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // next
    }
  }
  throw new ImageError(
    `${name} is not installed: run scripts/install-deps.sh (it installs docker-registry, skopeo and umoci)`,
    { code: 'LOCAL_REGISTRY_FAILED' },
  );
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const address = s.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      s.close(() => resolve(port));
    });
  });
}

export interface RunningRegistry {
  /** `127.0.0.1:PORT`. */
  readonly host: string;
  readonly port: number;
  /** The access log so far (one line per request, the client's address first), when asked for. */
  accessLog(): string;
  /** The registry's self-signed certificate (PEM) when it serves https. */
  readonly certPem?: string;
  stop(): Promise<void>;
}

export interface DockerRegistryOptions {
  /** Serve https with a fresh self-signed certificate for 127.0.0.1 (openssl); plain http otherwise. */
  readonly tls?: boolean;
  /** Keep the access log (`accessLog()`); off otherwise. */
  readonly accessLog?: boolean;
}

/** A P-256 certificate for 127.0.0.1 (SAN IP), self-signed by openssl, in `dir`. */
async function selfSignedCertificate(
  dir: string,
): Promise<{ certPath: string; keyPath: string; certPem: string }> {
  const keyPath = join(dir, 'registry.key');
  const certPath = join(dir, 'registry.crt');
  await run(requireTool('openssl'), [
    ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2'],
    ...['-keyout', keyPath, '-out', certPath, '-subj', '/CN=127.0.0.1'],
    ...['-addext', 'subjectAltName=IP:127.0.0.1'],
  ]);
  return { certPath, keyPath, certPem: await readFile(certPath, 'utf8') };
}

/** GET `url` (trusting `ca` when given) and resolve with the status, or reject. */
function probe(url: string, ca: string | undefined): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = (url.startsWith('https:') ? httpsGet : httpGet)(
      url,
      ca !== undefined ? { ca } : {},
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on('error', reject);
  });
}

async function waitForRegistry(
  url: string,
  child: ChildProcess,
  log: () => string,
  ca: string | undefined,
): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null)
      throw new ImageError(`docker-registry exited (${child.exitCode}): ${log()}`, {
        code: 'LOCAL_REGISTRY_FAILED',
      });
    try {
      if ((await probe(url, ca)) === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline)
      throw new ImageError(`docker-registry did not start: ${log()}`, { code: 'LOCAL_REGISTRY_FAILED' });
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts `docker-registry serve` on a free loopback port with a fresh storage root. */
export async function startDockerRegistry(options: DockerRegistryOptions = {}): Promise<RunningRegistry> {
  const binary = requireTool('docker-registry');
  const root = await mkdtemp(join(tmpdir(), 'docker-registry-'));
  const tls = options.tls === true ? await selfSignedCertificate(root) : undefined;
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const config = join(root, 'config.yml');
    await writeFile(
      config,
      [
        'version: 0.1',
        'log:',
        '  level: error',
        '  accesslog:',
        `    disabled: ${options.accessLog === true ? 'false' : 'true'}`,
        'storage:',
        '  filesystem:',
        `    rootdirectory: ${join(root, 'data')}`,
        '  delete:',
        '    enabled: true',
        'http:',
        `  addr: 127.0.0.1:${port}`,
        ...(tls !== undefined
          ? ['  tls:', `    certificate: ${tls.certPath}`, `    key: ${tls.keyPath}`]
          : []),
        '',
      ].join('\n'),
    );
    const child = spawn(binary, ['serve', config], {
      stdio: ['ignore', options.accessLog === true ? 'pipe' : 'ignore', 'pipe'],
    });
    let stderr = '';
    let access = '';
    child.stderr?.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    child.stdout?.on('data', (d: Buffer) => {
      access += d.toString();
    });
    const scheme = tls !== undefined ? 'https' : 'http';
    try {
      await waitForRegistry(`${scheme}://127.0.0.1:${port}/v2/`, child, () => stderr, tls?.certPem);
    } catch (e) {
      child.kill('SIGKILL');
      if (attempt < 3 && /address already in use/.test(stderr)) continue;
      throw e;
    }
    return {
      host: `127.0.0.1:${port}`,
      port,
      accessLog: () => access,
      ...(tls !== undefined ? { certPem: tls.certPem } : {}),
      async stop() {
        if (child.exitCode === null) {
          const exited = new Promise((r) => child.once('exit', r));
          child.kill('SIGTERM');
          await exited;
        }
        await rm(root, { recursive: true, force: true });
      },
    };
  }
}
