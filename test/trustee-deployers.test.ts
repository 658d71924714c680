// trustee's deployers run `grpc-as`, `restful-as` and `rvps` by name: its docker-compose.yml, its Helm
// chart and trustee-operator. These run the built executables through links with those names (the
// multi-call dispatch on argv0), with the deployers' flags and configuration files (paths under a
// temporary directory; ports free ones), probe them as Kubernetes `grpc:` probes do (Debian's
// python3-grpcio, grpc.health.v1.Health/Check), and stop them with SIGTERM as a container runtime does.
import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { makeTestPki } from '@broker/rvps-core/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { binary, freePort, ROOT, type Running, start, waitForListen } from './helpers/process.js';

const run = promisify(execFile);
const PROBE = join(ROOT, 'test', 'helpers', 'grpc_probe.py');
const SERVING = 1;

const dir = mkdtempSync(join(tmpdir(), 'trustee-deployers-'));
// Links named as the images install them (/usr/local/bin/<name>), to the one multi-call executable.
const bin = join(dir, 'usr', 'local', 'bin');
mkdirSync(bin, { recursive: true });
for (const name of ['grpc-as', 'restful-as', 'rvps']) symlinkSync(binary('broker-tools'), join(bin, name));
const env = { PATH: `${bin}:/usr/bin:/bin`, RUST_LOG: 'info' };

const running: Running[] = [];
afterAll(async () => {
  // A process that never started (spawn failed) never exits either: do not wait for it.
  const settle = (r: Running) =>
    Promise.race([r.stop('SIGKILL'), new Promise((res) => setTimeout(res, 6000))]);
  await Promise.all(running.map(settle));
  rmSync(dir, { recursive: true, force: true });
});

/** As a container runtime runs a command: by name through PATH, or by absolute path. */
function launch(argv: string[]): Running {
  const [cmd, ...args] = argv as [string, ...string[]];
  const r = start(cmd.startsWith('/') ? join(dir, cmd) : join(bin, cmd), args, { env, cwd: dir });
  running.push(r);
  return r;
}

const POLICY = 'package policy\ndefault executables := 33\ntrust_claims := {"executables": executables}\n';

/** Whether nothing listens on 127.0.0.1:port. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer()
      .once('error', () => resolve(false))
      .listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

async function probe(port: number, ...steps: string[]): Promise<unknown[]> {
  const { stdout } = await run('/usr/bin/python3', [PROBE, `127.0.0.1:${port}`, ...steps], {
    timeout: 30_000,
  });
  return JSON.parse(stdout);
}

/** SIGTERM ends the process, with status 0, well before a runtime's grace period. */
async function stopsOnSigterm(r: Running): Promise<void> {
  const t0 = Date.now();
  const code = await r.stop('SIGTERM');
  expect(code, r.output()).toBe(0);
  expect(Date.now() - t0).toBeLessThan(3000);
}

function file(name: string, content: unknown): string {
  const path = join(dir, name);
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  return path;
}

describe("trustee's deployers' command lines on the built executables", () => {
  it('docker-compose and Helm: `rvps [--config FILE] --address 0.0.0.0:PORT`, then `grpc-as --socket 0.0.0.0:PORT --config-file FILE`', async () => {
    // The Helm chart's rvps.json (its LocalFs variant) and as-config.json (GrpcRemote RVPS, a token
    // signer from the user keys, LocalFs storage).
    const rvpsJson = file('rvps.json', {
      storage: {
        storage_type: 'LocalFs',
        backends: { local_fs: { dir_path: join(dir, 'reference_values') }, local_json: {} },
      },
      extractors: { swid_extractor: {} },
    });
    const rvpsPort = await freePort();
    const rvps = launch(['rvps', '--config', rvpsJson, '--address', `0.0.0.0:${rvpsPort}`]);
    await waitForListen({ port: rvpsPort }, rvps);
    expect(await probe(rvpsPort, 'health:', 'health:reference.ReferenceValueProviderService')).toEqual([
      SERVING,
      SERVING,
    ]);
    // No write authentication configured: upstream's open writes, and a warning that says so.
    expect(rvps.output()).toMatch(/WRITES ARE UNAUTHENTICATED/);

    const keys = join(dir, 'user-keys');
    mkdirSync(keys);
    execFileSync('openssl', [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=token-signer',
      '-keyout',
      join(keys, 'token.key'),
      '-out',
      join(keys, 'token-cert-chain.pem'),
    ]);
    const asConfig = file('as-config.json', {
      storage_backend: {
        storage_type: 'LocalFs',
        backends: { local_fs: { dir_path: join(dir, 'as-storage') }, local_json: {} },
      },
      rvps_config: { type: 'GrpcRemote', address: `http://127.0.0.1:${rvpsPort}` },
      attestation_token_broker: {
        duration_min: 5,
        signer: { key_path: join(keys, 'token.key'), cert_path: join(keys, 'token-cert-chain.pem') },
      },
      verifier_config: { nvidia_verifier: { type: 'Remote' } },
    });
    const asPort = await freePort();
    const as = launch(['grpc-as', '--socket', `0.0.0.0:${asPort}`, '--config-file', asConfig]);
    await waitForListen({ port: asPort }, as);
    expect(
      await probe(
        asPort,
        'health:',
        'health:attestation.AttestationService',
        'health:reference.ReferenceValueProviderService',
        'health:no.such.Service',
        'set-policy',
      ),
    ).toEqual([SERVING, SERVING, SERVING, 'NOT_FOUND', ['OK', '']]);
    await stopsOnSigterm(as);
    await stopsOnSigterm(rvps);
  });

  it('docker-compose: `rvps --address 0.0.0.0:PORT` with no configuration file runs on the defaults', async () => {
    // The compose file mounts its rvps.json at the default path; with nothing there, Memory storage.
    const port = await freePort();
    const rvps = launch(['rvps', '--address', `0.0.0.0:${port}`]);
    await waitForListen({ port }, rvps);
    expect(await probe(port, 'health:')).toEqual([SERVING]);
    await stopsOnSigterm(rvps);
  });

  it('trustee-operator: `/usr/local/bin/rvps -c FILE` (its default address) and `/usr/local/bin/grpc-as --socket 0.0.0.0:PORT --config-file FILE`', async () => {
    const rvpsConfig = file('rvps-config.json', {
      storage: {
        storage_type: 'LocalJson',
        backends: { local_json: { file_dir_path: join(dir, 'local_json') } },
      },
    });
    // The operator gives the RVPS no address: trustee's default, 127.0.0.1:50003.
    if (!(await portFree(50003))) {
      console.warn('127.0.0.1:50003 is in use on this machine: the operator command line is not run');
      return;
    }
    const rvps = launch(['/usr/local/bin/rvps', '-c', rvpsConfig]);
    await waitForListen({ port: 50003 }, rvps);
    expect(await probe(50003, 'health:')).toEqual([SERVING]);
    const asConfig = file('as-config-operator.json', {
      storage_backend: {
        storage_type: 'LocalJson',
        backends: { local_json: { file_dir_path: join(dir, 'as-json') } },
      },
      rvps_config: { type: 'GrpcRemote', address: '127.0.0.1:50003' },
      attestation_token_broker: { duration_min: 5 },
    });
    const asPort = await freePort();
    const as = launch(['/usr/local/bin/grpc-as', '--socket', `0.0.0.0:${asPort}`, '--config-file', asConfig]);
    await waitForListen({ port: asPort }, as);
    expect(await probe(asPort, 'health:')).toEqual([SERVING]);
    await stopsOnSigterm(as);
    await stopsOnSigterm(rvps);
  });

  it("restful-as's image command line: `restful-as --socket HOST:PORT --config-file FILE` with trustee's config.json", async () => {
    // trustee's attestation-service/config.json (work_dir is an older key: ignored with a warning).
    const config = file('config.json', {
      work_dir: join(dir, 'work'),
      rvps_config: { type: 'BuiltIn', storage_type: 'LocalFs' },
      attestation_token_broker: { duration_min: 5 },
    });
    const port = await freePort();
    const rest = launch(['restful-as', '--socket', `127.0.0.1:${port}`, '--config-file', config]);
    await waitForListen({ port }, rest);
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    const open = await fetch(`http://127.0.0.1:${port}/policy`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        policy_id: 'p',
        policy: Buffer.from(POLICY).toString('base64url'),
      }),
    });
    expect(open.status, await open.clone().text()).toBe(200);
    await stopsOnSigterm(rest);
  });

  it('with --admin-public-key, grpc-as refuses an unauthenticated SetAttestationPolicy from python3-grpcio and accepts a signed one', async () => {
    const key = join(dir, 'admin.key');
    const pub = join(dir, 'admin.pub');
    execFileSync('openssl', ['genpkey', '-algorithm', 'ed25519', '-out', key]);
    execFileSync('openssl', ['pkey', '-in', key, '-pubout', '-out', pub]);
    const port = await freePort();
    const as = launch(['grpc-as', '--socket', `127.0.0.1:${port}`, '--admin-public-key', pub]);
    await waitForListen({ port }, as);
    expect(as.output()).not.toMatch(/WRITES ARE UNAUTHENTICATED/);
    const { signAdminToken } = await import('@broker/auth');
    const { readFileSync } = await import('node:fs');
    const token = await signAdminToken(readFileSync(key, 'utf8'));
    const [refused, accepted, health] = await probe(port, 'set-policy', `set-policy:${token}`, 'health:');
    expect(refused).toEqual(['UNAUTHENTICATED', expect.stringMatching(/needs authentication/)]);
    expect(accepted).toEqual(['OK', '']);
    expect(health).toBe(SERVING);
    await stopsOnSigterm(as);
  });

  it('with --client-ca, grpc-as and restful-as let only a client certificate from that CA write: python3-grpcio and curl as clients', async () => {
    const pki = makeTestPki(mkdtempSync(join(dir, 'pki-')));
    const tls = ['-t', pki.serverCert, '-k', pki.serverKey, '--client-ca', pki.clientCa];
    const grpcPort = await freePort();
    const as = launch(['grpc-as', '--socket', `127.0.0.1:${grpcPort}`, ...tls]);
    await waitForListen({ port: grpcPort }, as);
    const trust = `tls=${pki.serverCert}`;
    expect(await probe(grpcPort, trust, 'set-policy', 'health:')).toEqual([
      ['UNAUTHENTICATED', expect.stringMatching(/client certificate issued by the client CA/)],
      SERVING,
    ]);
    expect(await probe(grpcPort, `${trust}:${pki.rogueCert}:${pki.rogueKey}`, 'set-policy')).toEqual([
      ['UNAUTHENTICATED', expect.any(String)],
    ]);
    expect(await probe(grpcPort, `${trust}:${pki.clientCert}:${pki.clientKey}`, 'set-policy')).toEqual([
      ['OK', ''],
    ]);
    await stopsOnSigterm(as);

    const restPort = await freePort();
    const rest = launch(['restful-as', '--socket', `127.0.0.1:${restPort}`, ...tls]);
    await waitForListen({ port: restPort }, rest);
    const body = JSON.stringify({ policy_id: 'p', policy: Buffer.from(POLICY).toString('base64url') });
    const curl = async (...extra: string[]) =>
      (
        await run('curl', [
          '-s',
          '-o',
          '/dev/null',
          '-w',
          '%{http_code}',
          '--cacert',
          pki.serverCert,
          ...extra,
          `https://127.0.0.1:${restPort}/policy`,
        ])
      ).stdout;
    const post = ['-H', 'content-type: application/json', '--data-binary', body];
    expect(await curl(...post)).toBe('401');
    expect(await curl(...post, '--cert', pki.rogueCert, '--key', pki.rogueKey)).toBe('401');
    expect(await curl(...post, '--cert', pki.clientCert, '--key', pki.clientKey)).toBe('200');
    expect(await curl()).toBe('200');
    await stopsOnSigterm(rest);
  });
});
