// dist/bin/kbs under hostile load (issue 14), as one real process over HTTPS on 127.0.0.1:
//  - 400 requests with unique 120 KB bearer tokens whose signature is 64 zero bytes, on the resource and
//    the admin endpoints: the KBS must keep nothing of them (its RSS is read from /proc);
//  - a bounded soak (20 s of load, under 60 s in all): sample-TEE guests doing full handshakes while
//    other clients send bogus tokens, oversized /auth requests and trickle request heads; every guest must
//    get its resource and the RSS must stay under the stated bound.
// Set KBS_SOAK_REPORT=<file> to get the measured figures as JSON.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type TLSSocket } from 'node:tls';
import { jweDecrypt } from '@broker/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sampleGuest } from './helpers/replicas.js';
import { type KbsHandle, mustSucceed, prepareKbs } from './helpers/stack.js';

const MiB = 1024 * 1024;
/**
 * Growth allowed after the 400 bogus tokens: with the fix it measured 6–24 MiB, before it (the verifier
 * kept every decoded token) 570 MiB on the same machine.
 */
const BOGUS_GROWTH_BOUND = 96 * MiB;
/**
 * The KBS's RSS during the soak may not pass this: about 220 MiB after start and 380 MiB at the peak
 * measured with the fix; before it, the bogus tokens alone kept about 600 MiB.
 */
const SOAK_RSS_BOUND = 640 * MiB;
const SOAK_MS = 20_000;

const dir = mkdtempSync(join(tmpdir(), 'broker-kbs-soak-'));
const secret = randomBytes(32);
const figures: Record<string, number> = {};
let kbs: KbsHandle;
let agent: Agent;

function rss(): number {
  const pid = kbs.process.child.pid;
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1];
  if (kb === undefined) throw new Error('no VmRSS for the KBS process');
  return Number(kb) * 1024;
}

/** One request over the keep-alive agent; resolves with the status and body. */
function call(
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port: kbs.port, path, method, agent, headers, timeout: 20_000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * A token of about `size` characters that parses (JSON header and payload) with a signature of 64 zero
 * bytes; every call gives a different one. The payload is mostly empty arrays, three characters of JSON
 * each and some tens of bytes each once parsed: the shape that costs a server most per byte it keeps.
 */
function bogusToken(header: Record<string, unknown>, size: number): string {
  const payload = {
    exp: Math.floor(Date.now() / 1000) + 3600,
    nonce: randomBytes(8).toString('hex'),
    pad: Array.from({ length: Math.floor(size / 4) }, () => []),
  };
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  return `${b64(header)}.${b64(payload)}.${Buffer.alloc(64).toString('base64url')}`;
}

/** The header of a real token: its key is endorsed by the trusted certificate, so x5c checks pass. */
let endorsedHeader: Record<string, unknown>;

beforeAll(async () => {
  kbs = await prepareKbs(dir);
  await kbs.start();
  agent = new Agent({ keepAlive: true, maxSockets: 16, ca: kbs.tls.certPem });
  writeFileSync(join(dir, 'key.bin'), secret);
  await mustSucceed(
    kbs.admin('set-resource', '--path', 'default/soak/key', '--resource-file', join(dir, 'key.bin')),
  );
  await mustSucceed(kbs.admin('set-resource-policy', '--allow-all'));
  const token = (await mustSucceed(kbs.client('attest'))).trim();
  endorsedHeader = JSON.parse(Buffer.from(token.split('.')[0] as string, 'base64url').toString());
}, 60_000);

afterAll(async () => {
  agent?.destroy();
  await kbs?.stop();
  if (process.env.KBS_SOAK_REPORT)
    writeFileSync(process.env.KBS_SOAK_REPORT, JSON.stringify(figures, null, 2));
  rmSync(dir, { recursive: true, force: true });
});

async function bogusRound(n: number, size: number): Promise<void> {
  const headers = [endorsedHeader, { alg: 'ES256', kid: 'nobody' }, { alg: 'ES256' }];
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      const authorization = `Bearer ${bogusToken(headers[i % 3] as Record<string, unknown>, size)}`;
      // One in four goes to an admin endpoint, which verifies bearer tokens with the same verifier.
      const r =
        i % 4 === 3
          ? await call('POST', '/kbs/v0/resource-policy', { authorization }, '{}')
          : await call('GET', '/kbs/v0/resource/default/soak/key', { authorization });
      expect(r.status, r.body).toBe(401);
    }
  };
  await Promise.all(Array.from({ length: 4 }, worker));
}

describe('kbs under hostile load, one real process', () => {
  it('keeps nothing of 400 bogus 120 KB tokens (RSS growth bounded)', async () => {
    // Warm-up, so the figures measure retention and not the first use of each code path.
    await bogusRound(40, 120 * 1024);
    const before = rss();
    await bogusRound(400, 120 * 1024);
    const after = rss();
    figures.rss_before_bogus_mib = before / MiB;
    figures.rss_after_400_bogus_120k_mib = after / MiB;
    figures.rss_growth_400_bogus_120k_mib = (after - before) / MiB;
    expect(after - before).toBeLessThan(BOGUS_GROWTH_BOUND);
    // The KBS still serves a guest.
    const r = await mustSucceed(kbs.client('get-resource', '--path', 'default/soak/key'));
    expect(Buffer.from(r.trim(), 'base64')).toEqual(secret);
  }, 120_000);

  it(`serves valid guests through ${SOAK_MS / 1000} s of bogus tokens, huge /auth bodies and slow clients`, async () => {
    const ca = kbs.tls.certPem;
    const deadline = Date.now() + SOAK_MS;
    let peak = rss();
    const sampler = setInterval(() => {
      peak = Math.max(peak, rss());
    }, 250);
    const counts = { handshakes: 0, failures: 0, bogus: 0, hugeAuth: 0, slowOpened: 0 };
    const failures: string[] = [];

    const guestLoop = async () => {
      while (Date.now() < deadline && counts.handshakes < 2000) {
        const guest = sampleGuest(ca);
        const auth = await guest.auth(kbs.url);
        const attest = auth.status === 200 ? await guest.attest(kbs.url, auth.cookie, auth.nonce) : undefined;
        const res =
          attest?.status === 200
            ? await guest.resource(kbs.url, 'default/soak/key', { cookie: auth.cookie })
            : undefined;
        if (
          res?.status === 200 &&
          Buffer.from(jweDecrypt(JSON.parse(res.body), guest.key.privateKey)).equals(secret)
        ) {
          counts.handshakes++;
        } else {
          counts.failures++;
          failures.push(`${auth.status} ${attest?.status} ${res?.status} ${(res ?? attest ?? auth).body}`);
        }
      }
    };
    const bogusLoop = async () => {
      while (Date.now() < deadline && counts.bogus < 2000) {
        const authorization = `Bearer ${bogusToken(counts.bogus % 2 ? endorsedHeader : { alg: 'ES256' }, 120 * 1024)}`;
        const r = await call('GET', '/kbs/v0/resource/default/soak/key', { authorization });
        expect(r.status).toBe(401);
        counts.bogus++;
      }
    };
    // Bodies just under the 2 MiB limit, refused for their extra-params (issue 14, defect 8).
    const huge = JSON.stringify({
      version: '0.4.0',
      tee: 'sample',
      'extra-params': 'x'.repeat(2 * MiB - 64),
    });
    const hugeAuthLoop = async () => {
      while (Date.now() < deadline && counts.hugeAuth < 200) {
        const r = await call('POST', '/kbs/v0/auth', { 'content-type': 'application/json' }, huge);
        expect(r.status).toBe(401);
        counts.hugeAuth++;
      }
    };
    // Clients that open TLS, then send a request head one byte a second and never finish it.
    const slow = new Set<TLSSocket>();
    const slowLoop = async () => {
      const head = 'GET /kbs/v0/resource/default/soak/key HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ';
      while (Date.now() < deadline) {
        while (slow.size < 64 && counts.slowOpened < 1000) {
          const s = connect({ host: '127.0.0.1', port: kbs.port, ca, servername: 'localhost' });
          counts.slowOpened++;
          slow.add(s);
          let i = 0;
          const drip = setInterval(() => {
            if (!s.destroyed) s.write(i < head.length ? (head[i++] ?? 'x') : 'x');
          }, 1000);
          const drop = () => {
            clearInterval(drip);
            slow.delete(s);
          };
          s.on('error', drop);
          s.on('close', drop);
        }
        await new Promise((r) => setTimeout(r, 500));
      }
      for (const s of slow) s.destroy();
    };

    await Promise.all([guestLoop(), guestLoop(), bogusLoop(), bogusLoop(), hugeAuthLoop(), slowLoop()]);
    clearInterval(sampler);
    peak = Math.max(peak, rss());
    Object.assign(figures, {
      soak_seconds: SOAK_MS / 1000,
      soak_handshakes: counts.handshakes,
      soak_guest_failures: counts.failures,
      soak_bogus_tokens: counts.bogus,
      soak_huge_auth: counts.hugeAuth,
      soak_slow_connections: counts.slowOpened,
      soak_peak_rss_mib: peak / MiB,
    });
    expect(failures).toEqual([]);
    expect(counts.handshakes).toBeGreaterThan(10);
    expect(counts.bogus).toBeGreaterThan(10);
    expect(counts.slowOpened).toBeGreaterThanOrEqual(64);
    expect(peak).toBeLessThan(SOAK_RSS_BOUND);
  }, 60_000);
});
