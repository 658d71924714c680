// trustee's `nebula-ca` plugin in a real KBS over HTTP with Debian's nebula-cert: the CA made at start,
// a credential released to a sample-TEE attested client (JWE to its TEE key) that nebula-cert itself
// verifies against the CA, and hostile parameters refused before the tool runs.
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jweDecrypt } from '@broker/protocol';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseKbsConfigText } from '../config.js';
import { type RunningKbs, startKbs } from '../kbs.js';
import { handshake, type Response, send } from '../testing/client.js';

const NEBULA_CERT = '/usr/bin/nebula-cert';
// The policy sees trustee's plugin data: the plugin name and the query.
const POLICY = `package policy
import rego.v1

default allow := false

allow if {
  data.plugin == "nebula-ca"
  data.query.name != "not-this-one"
}
`;
const ERR = 'https://github.com/confidential-containers/kbs/errors/';

let dir: string;
let workDir: string;
/** A nebula-cert that records each subcommand it is asked to run, so a test can tell it did not run. */
let wrapper: string;
let callLog: string;
const calls = () => (existsSync(callLog) ? readFileSync(callLog, 'utf8').split('\n').filter(Boolean) : []);

function config(work: string, bin = wrapper, extra = ''): string {
  return `[http_server]
sockets = ["127.0.0.1:0"]
insecure_http = true
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "InsecureAllowAll"
[[plugins]]
name = "nebula-ca"
work_dir = "${work}"
nebula_cert_bin_path = "${bin}"
${extra}`;
}

const start = (text: string) => startKbs(parseKbsConfigText(text), { logger: pino({ level: 'silent' }) });

function errorOf(r: Response): [number, string] {
  return [r.status, (r.json() as { type: string }).type.replace(ERR, '')];
}

let kbs: RunningKbs;
let base: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kbs-nebula-'));
  workDir = join(dir, 'work');
  callLog = join(dir, 'calls');
  wrapper = join(dir, 'nebula-cert');
  writeFileSync(wrapper, `#!/bin/sh\necho "$1" >> '${callLog}'\nexec ${NEBULA_CERT} "$@"\n`);
  chmodSync(wrapper, 0o755);
  kbs = await start(
    config(workDir, wrapper, '[plugins.ca_config]\nname = "Broker test CA"\nips = "10.9.0.0/16"\n'),
  );
  base = kbs.urls[0] as string;
  const r = await send(`${base}/kbs/v0/resource-policy`, {
    method: 'POST',
    body: JSON.stringify({ policy: Buffer.from(POLICY).toString('base64url') }),
  });
  expect(r.status).toBe(200);
});

afterAll(async () => {
  await kbs?.close();
  rmSync(dir, { recursive: true, force: true });
});

const nebula = (...args: string[]) => execFileSync(NEBULA_CERT, args, { encoding: 'utf8' });

describe('nebula-ca plugin', () => {
  it('creates its CA at start with nebula-cert ca, from [plugins.ca_config]', () => {
    const ca = join(workDir, 'ca', 'ca.crt');
    expect(existsSync(join(workDir, 'ca', 'ca.key'))).toBe(true);
    const details = JSON.parse(nebula('print', '-json', '-path', ca)).details;
    expect([details.name, details.isCa, details.ips]).toEqual(['Broker test CA', true, ['10.9.0.0/16']]);
    expect(calls().slice(0, 3)).toEqual(['-version', 'ca', 'print']);
  });

  it('releases a credential to an attested TEE: JWE to its key, accepted by nebula-cert verify', async () => {
    const { cookie, key } = await handshake(base);
    const query = 'name=pod-a&ip=10.9.8.7/21&groups=ssh,server&subnets=10.9.100.0/24&duration=1h';
    const r = await send(`${base}/kbs/v0/nebula-ca/credential?${query}`, { headers: { cookie } });
    expect(r.status, r.text).toBe(200);
    expect(r.headers['content-type']).toBe('application/json');
    const plain = JSON.parse(jweDecrypt(r.json(), key.privateKey).toString('utf8')) as Record<
      string,
      number[]
    >;
    expect(Object.keys(plain)).toEqual(['node_crt', 'node_key', 'ca_crt']);
    const bytes = (k: string) => Buffer.from(plain[k] as number[]);
    expect(bytes('ca_crt')).toEqual(readFileSync(join(workDir, 'ca', 'ca.crt')));
    expect(bytes('node_key').toString()).toMatch(/^-----BEGIN NEBULA X25519 PRIVATE KEY-----\n/);

    const peer = join(dir, 'peer');
    mkdirSync(peer);
    writeFileSync(join(peer, 'ca.crt'), bytes('ca_crt'));
    writeFileSync(join(peer, 'node.crt'), bytes('node_crt'));
    nebula('verify', '-ca', join(peer, 'ca.crt'), '-crt', join(peer, 'node.crt'));
    const details = JSON.parse(nebula('print', '-json', '-path', join(peer, 'node.crt'))).details;
    expect(details).toMatchObject({
      name: 'pod-a',
      ips: ['10.9.8.7/21'],
      groups: ['ssh', 'server'],
      subnets: ['10.9.100.0/24'],
      isCa: false,
    });
    expect(Date.parse(details.notAfter) - Date.parse(details.notBefore)).toBeLessThanOrEqual(3_600_000);
    // The per-request directory is gone: only the CA stays in work_dir.
    expect(readdirSync(workDir)).toEqual(['ca']);
  });

  it('takes the attestation token as a Bearer header too', async () => {
    const { token } = await handshake(base);
    const r = await send(`${base}/kbs/v0/nebula-ca/credential?name=pod-b&ip=10.9.8.8/21`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(r.status, r.text).toBe(200);
  });

  it('refuses hostile parameters without running nebula-cert', async () => {
    const { cookie } = await handshake(base);
    const before = calls().length;
    for (const q of [
      'name=../x&ip=10.9.8.7/21',
      'name=a%2Fb&ip=10.9.8.7/21',
      'name=pod&ip=999.1.1.1/24',
      `name=${'a'.repeat(5000)}&ip=10.9.8.7/21`,
      `name=pod&ip=10.9.8.7/21&groups=${'g,'.repeat(2000)}g`,
      'name=pod%3Brm%20-rf%20%2F&ip=10.9.8.7/21',
      'name=%24(id)&ip=10.9.8.7/21',
      'name=-ca-key&ip=10.9.8.7/21',
      'name=pod&ip=10.9.8.7/21&duration=1h%3Bid',
      'name=pod&ip=10.9.8.7/21&subnets=10.0.0.0/8%7Cid',
      'name=pod&ip=10.9.8.7/21&out-crt=/tmp/x',
      'name=pod',
    ]) {
      const r = await send(`${base}/kbs/v0/nebula-ca/credential?${q}`, { headers: { cookie } });
      expect(errorOf(r), q.slice(0, 60)).toEqual([401, 'PluginInternalError']);
      expect((r.json() as { detail: string }).detail).toMatch(/^Plugin internal error: /);
    }
    for (const [method, path] of [
      ['POST', 'credential?name=pod&ip=10.9.8.7/21'],
      ['GET', 'other?name=pod&ip=10.9.8.7/21'],
      ['GET', 'credential/x?name=pod&ip=10.9.8.7/21'],
    ] as const) {
      const r = await send(`${base}/kbs/v0/nebula-ca/${path}`, { method, headers: { cookie } });
      expect(errorOf(r), `${method} ${path}`).toEqual([401, 'PluginInternalError']);
    }
    expect(calls().length).toBe(before);
  });

  it('refuses an unauthenticated request, or one the resource policy denies, before the tool runs', async () => {
    const before = calls().length;
    const { cookie } = await handshake(base);
    const denied = await send(`${base}/kbs/v0/nebula-ca/credential?name=not-this-one&ip=10.9.8.7/21`, {
      headers: { cookie },
    });
    expect(errorOf(denied)).toEqual([401, 'PolicyDeny']);
    const r = await send(`${base}/kbs/v0/nebula-ca/credential?name=pod&ip=10.9.8.7/21`);
    expect(errorOf(r)).toEqual([401, 'TokenNotFound']);
    const forged = await send(`${base}/kbs/v0/nebula-ca/credential?name=pod&ip=10.9.8.7/21`, {
      headers: { authorization: 'Bearer a.b.c' },
    });
    expect(errorOf(forged)).toEqual([401, 'TokenVerifierError']);
    expect(calls().length).toBe(before);
  });

  it("passes nebula-cert's own refusal on (an ip outside the CA's ips) as a plugin error", async () => {
    const { cookie } = await handshake(base);
    const before = calls().length;
    const r = await send(`${base}/kbs/v0/nebula-ca/credential?name=pod&ip=192.168.1.1/24`, {
      headers: { cookie },
    });
    expect(errorOf(r)).toEqual([401, 'PluginInternalError']);
    expect(calls().slice(before)).toEqual(['sign']);
    expect(readdirSync(workDir)).toEqual(['ca']);
  });

  it('reuses an existing CA; refuses to start with half a CA or without the tool', async () => {
    const crt = readFileSync(join(workDir, 'ca', 'ca.crt'));
    const again = await start(config(workDir));
    await again.close();
    expect(readFileSync(join(workDir, 'ca', 'ca.crt'))).toEqual(crt);

    const half = join(dir, 'half');
    mkdirSync(join(half, 'ca'), { recursive: true });
    writeFileSync(join(half, 'ca', 'ca.key'), 'x');
    await expect(start(config(half))).rejects.toThrow(
      /Initialize 'nebula-ca' plugin failed: Nebula CA not found/,
    );

    await expect(start(config(join(dir, 'none'), join(dir, 'missing-nebula-cert')))).rejects.toThrow(
      /missing-nebula-cert -version: not found \(set nebula_cert_bin_path\)/,
    );
  });
});
