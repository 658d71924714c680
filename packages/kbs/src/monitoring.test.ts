// What production monitoring sees of the KBS: the separate metrics listener, the secret paths kept out of
// the metrics unless asked for, the HTTP metrics' templated labels, and the certificate expiry gauge.
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeChain } from '@broker/auth/testing';
import { generateTeeKeyPair } from '@broker/protocol';
import { parseSnpReport, SNP_REPORT_SIZE, sevJsonFromReport } from '@broker/verifier';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseKbsConfigText } from './config.js';
import { methodLabel, OTHER_ROUTE, routeOf } from './http-route.js';
import { type RunningKbs, startKbs } from './kbs.js';
import { BUILTIN_RESOURCE_POLICIES } from './policy/resource-policy.js';
import { AUTH_BODY, attestationBody, cookieOf, handshake, send } from './testing/client.js';
import type { Verdict } from './verdicts/log.js';

const running: RunningKbs[] = [];
afterEach(async () => {
  while (running.length > 0) await running.pop()?.close();
});
let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'kbs-monitoring-'));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

let lines: string[] = [];

async function start(httpServer = '', tls = 'insecure_http = true'): Promise<RunningKbs> {
  lines = [];
  const toml = `[http_server]\nsockets = ["127.0.0.1:0"]\n${tls}\n${httpServer}\n[attestation_token]\ninsecure_header_jwk = true\n[admin]\nauthorization_mode = "InsecureAllowAll"\n[[plugins]]\nname = "resource"\n`;
  const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(l) });
  const kbs = await startKbs(parseKbsConfigText(toml), { logger });
  running.push(kbs);
  return kbs;
}

const SECRET_PATH = 'prod-db/credentials/password';

/** Stores a resource, and has an attested guest read it (and miss another one). */
async function readSecret(base: string): Promise<void> {
  const b64u = (s: string) => Buffer.from(s).toString('base64url');
  const policy = await send(`${base}/kbs/v0/resource-policy`, {
    method: 'POST',
    body: JSON.stringify({ policy: b64u(BUILTIN_RESOURCE_POLICIES.allow_all) }),
  });
  expect(policy.status).toBe(200);
  const put = await send(`${base}/kbs/v0/resource/${SECRET_PATH}`, { method: 'POST', body: 's3cret' });
  expect(put.status).toBe(200);
  const { cookie } = await handshake(base);
  expect((await send(`${base}/kbs/v0/resource/${SECRET_PATH}`, { headers: { cookie } })).status).toBe(200);
  expect(
    (await send(`${base}/kbs/v0/resource/prod-db/credentials/other`, { headers: { cookie } })).status,
  ).toBe(401);
}

describe('metrics listener ([http_server] metrics_socket)', () => {
  it('serves /metrics only on its own plain-HTTP socket: the public port answers 404', async () => {
    const kbs = await start('metrics_socket = "127.0.0.1:0"');
    const base = kbs.urls[0] as string;
    expect((await send(`${base}/metrics`)).status).toBe(404);
    expect((await send(`${base}/healthz`)).status).toBe(200);
    expect(kbs.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    const metricsUrl = kbs.metricsUrl as string;
    const scraped = await send(metricsUrl);
    expect(scraped.status).toBe(200);
    expect(scraped.headers['content-type']).toContain('text/plain');
    expect(scraped.text).toContain('kbs_build_info');
    const metricsBase = metricsUrl.replace(/\/metrics$/, '');
    expect((await send(`${metricsBase}/healthz`)).status).toBe(200);
    // Nothing of the KBS API is reachable there.
    expect((await send(`${metricsBase}/kbs/v0/auth`, { method: 'POST', body: '{}' })).status).toBe(404);
    expect((await send(`${metricsBase}/metrics`, { method: 'POST' })).status).toBe(405);
  });

  it('is refused when it is not an IP:port socket address', () => {
    expect(() =>
      parseKbsConfigText(
        '[http_server]\ninsecure_http = true\nmetrics_socket = "localhost:9090"\n[admin]\nauthorization_mode = "DenyAll"\n',
      ),
    ).toThrow(/\[http_server\] metrics_socket: "localhost:9090" is not an IP:port socket address/);
  });

  it('keeps serving /metrics on the public port when it is not configured (trustee)', async () => {
    const kbs = await start();
    expect((await send(`${kbs.urls[0]}/metrics`)).status).toBe(200);
    expect(kbs.metricsUrl).toBeUndefined();
  });
});

describe('resource paths in metrics', () => {
  it('are not exported by default: the counters count, without naming any secret', async () => {
    const kbs = await start();
    const base = kbs.urls[0] as string;
    await readSecret(base);
    const text = (await send(`${base}/metrics`)).text;
    expect(text).not.toContain('prod-db');
    expect(text).not.toContain('resource_path');
    expect(text).toMatch(/^kbs_resource_reads_total 1$/m);
    expect(text).toMatch(/^kbs_resource_writes_total 1$/m);
  });

  it('label the resource counters with metrics_resource_paths = true', async () => {
    const kbs = await start('metrics_resource_paths = true');
    const base = kbs.urls[0] as string;
    await readSecret(base);
    const text = (await send(`${base}/metrics`)).text;
    expect(text).toContain(`kbs_resource_reads_total{resource_path="${SECRET_PATH}"} 1`);
    expect(text).toContain(`kbs_resource_writes_total{resource_path="${SECRET_PATH}"} 1`);
  });
});

describe('HTTP metrics labels', () => {
  it('count requests by method, templated route and status, never by raw path', async () => {
    const kbs = await start();
    const base = kbs.urls[0] as string;
    await readSecret(base);
    expect((await send(`${base}/no/such/${SECRET_PATH}`)).status).toBe(404);
    expect((await send(`${base}/kbs/v0/nosuchplugin/${SECRET_PATH}`)).status).toBe(404);
    const text = await kbs.metrics.registry.metrics();
    const route = '/kbs/v0/resource/{repository}/{type}/{tag}';
    expect(text).toContain(`kbs_http_requests_total{method="GET",route="${route}",status="200"} 1`);
    expect(text).toContain(`kbs_http_requests_total{method="GET",route="${route}",status="401"} 1`);
    expect(text).toContain(`kbs_http_requests_total{method="POST",route="${route}",status="200"} 1`);
    expect(text).toContain('kbs_http_requests_total{method="POST",route="/kbs/v0/auth",status="200"} 1');
    expect(text).toContain('kbs_http_requests_total{method="POST",route="/kbs/v0/attest",status="200"} 1');
    expect(text).toContain('kbs_http_requests_total{method="GET",route="other",status="404"} 2');
    expect(text).toContain(`kbs_http_request_duration_seconds_count{method="GET",route="${route}"} 2`);
    expect(text).not.toContain('prod-db');
  });

  it('template every endpoint', () => {
    expect(routeOf('/kbs/v0/resource/a/b/c')).toBe('/kbs/v0/resource/{repository}/{type}/{tag}');
    expect(routeOf('/kbs/v0/resource/b/c')).toBe(OTHER_ROUTE);
    expect(routeOf('/kbs/v0/resource/a/b/c/d')).toBe(OTHER_ROUTE);
    expect(routeOf('/kbs/v0/reference-value/snp_pcr03')).toBe('/kbs/v0/reference-value/{id}');
    expect(routeOf('/kbs/v0/resource-policy')).toBe('/kbs/v0/resource-policy');
    expect(routeOf('/kbs/v0/admin/verdicts')).toBe('/kbs/v0/admin/{path}');
    expect(routeOf('/kbs/v0/external/vault/a/b')).toBe('/kbs/v0/external/{plugin}/{path}');
    expect(routeOf('/kbs/v0/provisioner/default/u/root')).toBe('/kbs/v0/provisioner/{path}');
    expect(routeOf('/kbs/v0/secret-name')).toBe(OTHER_ROUTE);
    expect(routeOf('/console/app.js')).toBe('/console/{file}');
    expect(routeOf('/metrics')).toBe('/metrics');
    expect(routeOf('/anything')).toBe(OTHER_ROUTE);
    expect(methodLabel('GET')).toBe('GET');
    expect(methodLabel('PROPFIND')).toBe(OTHER_ROUTE);
  });
});

describe('certificate expiry gauge', () => {
  it('exports when the HTTPS certificate stops being valid', async () => {
    const chain = makeChain(tmp, 'https');
    const kbs = await start('', `private_key = "${chain.leafKeyPath}"\ncertificate = "${chain.chainPath}"`);
    const notAfter = Date.parse(new X509Certificate(readFileSync(chain.chainPath)).validTo) / 1000;
    const text = await kbs.metrics.registry.metrics();
    expect(text).toContain(`kbs_certificate_expiry_timestamp_seconds{certificate="https"} ${notAfter}`);
  });

  it('follows the certificate when the key pair is reloaded', async () => {
    const chain = makeChain(tmp, 'reloaded');
    const keyPath = join(tmp, 'reload-key.pem');
    const certPath = join(tmp, 'reload-cert.pem');
    copyFileSync(chain.leafKeyPath, keyPath);
    copyFileSync(chain.chainPath, certPath);
    const kbs = await start('', `private_key = "${keyPath}"\ncertificate = "${certPath}"`);
    const gauge = async () => (await kbs.metrics.certificateExpiry.get()).values[0]?.value;
    const before = await gauge();
    expect(before).toBe(Date.parse(new X509Certificate(readFileSync(certPath)).validTo) / 1000);
    // A renewed pair that expires sooner (3 days, the chain's leaf 30).
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '3'].concat(
        ['-keyout', keyPath, '-out', certPath, '-subj', '/CN=renewed'],
      ),
      { stdio: 'pipe' },
    );
    await kbs.reload();
    const after = Date.parse(new X509Certificate(readFileSync(certPath)).validTo) / 1000;
    expect(after).toBeLessThan(before as number);
    expect(await gauge()).toBe(after);
  });
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The access-log entries of this test's KBS. */
function accessLines(): Record<string, unknown>[] {
  return lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((e) => e.msg === 'access');
}

describe('request ids', () => {
  it('answer every request with x-request-id, the one its access-log line carries', async () => {
    const kbs = await start();
    const base = kbs.urls[0] as string;
    const generated = await send(`${base}/healthz`);
    const id = generated.headers['x-request-id'] as string;
    expect(id).toMatch(UUID);
    const own = await send(`${base}/kbs/v0/auth`, {
      method: 'POST',
      body: AUTH_BODY,
      headers: { 'x-request-id': 'lb-7f3a:42' },
    });
    expect(own.headers['x-request-id']).toBe('lb-7f3a:42');
    // Too long, or with a space: not the client's, a new one.
    for (const bad of ['x'.repeat(65), 'has space', '']) {
      const r = await send(`${base}/healthz`, { headers: { 'x-request-id': bad } });
      expect(r.headers['x-request-id'], bad).toMatch(UUID);
    }
    await expect.poll(() => accessLines().length).toBe(5);
    const access = accessLines();
    expect(access[0]).toMatchObject({ path: '/healthz', requestId: id });
    expect(access[1]).toMatchObject({ path: '/kbs/v0/auth', status: 200, requestId: 'lb-7f3a:42' });
    // The request id comes after the fields shared with api-server-rest (scripts match on them).
    expect(lines.find((l) => l.includes('lb-7f3a:42'))).toMatch(
      /"method":"POST","path":"\/kbs\/v0\/auth","status":200,.*"requestId":"lb-7f3a:42"/,
    );
  });

  it('are in the verdicts: an access-log line leads to the attestation and resource verdicts', async () => {
    const kbs = await start();
    const base = kbs.urls[0] as string;
    await readSecret(base);
    const auth = await send(`${base}/kbs/v0/auth`, { method: 'POST', body: AUTH_BODY });
    const cookie = cookieOf(auth);
    const { nonce } = auth.json() as { nonce: string };
    const attest = await send(`${base}/kbs/v0/attest`, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/json', 'x-request-id': 'attest-1' },
      body: attestationBody(nonce, generateTeeKeyPair()),
    });
    expect(attest.status).toBe(200);
    const fetched = await send(`${base}/kbs/v0/resource/${SECRET_PATH}`, { headers: { cookie } });
    expect(fetched.status).toBe(200);
    const fetchId = fetched.headers['x-request-id'] as string;
    expect(fetchId).toMatch(UUID);
    const verdicts = async () =>
      ((await send(`${base}/kbs/v0/admin/verdicts`)).json() as { verdicts: Verdict[] }).verdicts;
    await expect.poll(async () => (await verdicts()).some((v) => v.requestId === 'attest-1')).toBe(true);
    const all = await verdicts();
    const attestation = all.find((v) => v.requestId === 'attest-1');
    expect(attestation).toMatchObject({ kind: 'attestation', tee: 'sample' });
    const resource = all.find((v) => v.requestId === fetchId);
    expect(resource).toMatchObject({ kind: 'resource', status: 'allowed', resource: SECRET_PATH });
    // The verdict log finds a request's verdicts by its id.
    const byId = await send(`${base}/kbs/v0/admin/verdicts?request_id=${encodeURIComponent(fetchId)}`);
    expect((byId.json() as { verdicts: Verdict[] }).verdicts.map((v) => v.kind)).toEqual(['resource']);
    const none = await send(`${base}/kbs/v0/admin/verdicts?request_id=no-such-request`);
    expect((none.json() as { verdicts: Verdict[] }).verdicts).toEqual([]);
    expect((await send(`${base}/kbs/v0/admin/verdicts?request_id=${'x'.repeat(65)}`)).status).toBe(400);
    const line = accessLines().find((a) => a.requestId === fetchId);
    expect(line).toMatchObject({ method: 'GET', path: `/kbs/v0/resource/${SECRET_PATH}`, status: 200 });
  });
});

describe('collateral fetch failures', () => {
  it('are counted by source when KDS answers 500: the attestation fails and the counter says why', async () => {
    const kds = createServer((_req, res) => {
      res.writeHead(500, { 'content-length': 4 });
      res.end('boom');
    });
    await new Promise<void>((resolve) => kds.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = kds.address() as AddressInfo;
      const toml = `[http_server]\nsockets = ["127.0.0.1:0"]\ninsecure_http = true\n[attestation_token]\ninsecure_header_jwk = true\n[admin]\nauthorization_mode = "InsecureAllowAll"\n[attestation_service.verifier_config.snp_verifier]\nvcek_sources = [{ type = "KDS", base_url = "http://127.0.0.1:${port}" }]\n[[plugins]]\nname = "resource"\n`;
      const kbs = await startKbs(parseKbsConfigText(toml), { logger: pino({ level: 'silent' }) });
      running.push(kbs);
      const base = kbs.urls[0] as string;
      const failures = async () =>
        (await send(`${base}/metrics`)).text
          .split('\n')
          .filter((l) => l.startsWith('attestation_collateral_fetch_failures_total{'));
      expect(await failures()).toEqual([]);
      // A Milan report without a certificate table: its VCEK must come from KDS, asked before anything
      // else of the report is checked, so an unsigned report is enough to make the KBS ask.
      const report = Buffer.alloc(SNP_REPORT_SIZE);
      report.writeUInt32LE(3, 0);
      report.writeUInt32LE(1, 0x34);
      report[0x188] = 0x19;
      report[0x189] = 0x01;
      report[0x18a] = 1;
      report.fill(0x42, 0x1a0, 0x1e0); // the chip ID names the VCEK to ask for
      const evidence = { attestation_report: sevJsonFromReport(parseSnpReport(report)), cert_chain: null };
      const auth = await send(`${base}/kbs/v0/auth`, {
        method: 'POST',
        body: JSON.stringify({ version: '0.4.0', tee: 'snp', 'extra-params': '' }),
      });
      expect(auth.status).toBe(200);
      const { nonce } = auth.json() as { nonce: string };
      const attest = await send(`${base}/kbs/v0/attest`, {
        method: 'POST',
        headers: { cookie: cookieOf(auth), 'content-type': 'application/json' },
        body: attestationBody(nonce, generateTeeKeyPair(), evidence),
      });
      expect(attest.status).toBe(401);
      expect(await failures()).toEqual(['attestation_collateral_fetch_failures_total{source="kds"} 1']);
    } finally {
      await new Promise((resolve) => kds.close(resolve));
    }
  });
});
