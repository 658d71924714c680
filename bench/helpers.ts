// What the benchmarks share: percentiles of sorted samples, timing a call repeatedly or a command, the
// CPU time of a process, and HTTP calls and the sample-TEE handshake against a KBS.
// Each bench is bundled with this module by bench/run.mjs.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { type Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { runtimeDataDigest, type TeeKeyPair } from '@broker/protocol';

/** The `p`th percentile (0 to 100) of ascending `sorted` (nearest rank, rounded down); NaN when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

/** Runs `once` `n` times in sequence; the durations in microseconds, ascending. */
export async function timeEach(n: number, once: () => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    await once();
    out.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  return out.sort((a, b) => a - b);
}

/** Runs a command to its end (HOME a temporary folder, output dropped); milliseconds. Throws when it fails. */
export function timeCommand(cmd: string, args: string[]): number {
  const t = performance.now();
  const r = spawnSync(cmd, args, {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, HOME: tmpdir() },
  });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr.toString()}`);
  return performance.now() - t;
}

/** /proc times are in clock ticks of 10 ms (USER_HZ = 100 on Linux). */
export const TICK_US = 10_000;

/** utime + stime of a process from /proc, in microseconds (0 once it is gone). */
export function processCpuUs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_US;
  } catch {
    return 0;
  }
}

/** An HTTP answer: status, body, and the first cookie set (`name=value`). */
export interface Answer {
  readonly status: number;
  readonly body: string;
  readonly cookie: string | undefined;
}

/** One HTTP/1.1 request over `agent` (keep-alive); a body is sent as JSON. */
export function call(
  agent: Agent,
  url: URL,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        method,
        path,
        headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString(),
            cookie: res.headers['set-cookie']?.[0]?.split(';')[0],
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The KBS protocol's Attestation of the sample TEE for `nonce`, bound to `key`. */
export function sampleAttestation(nonce: string, key: TeeKeyPair): string {
  const digest = runtimeDataDigest({ nonce, 'tee-pubkey': key.publicJwk, 'additional-evidence': '' });
  return JSON.stringify({
    'init-data': null,
    'runtime-data': { nonce, 'tee-pubkey': key.publicJwk },
    'tee-evidence': {
      primary_evidence: { svn: '1', report_data: digest.toString('base64') },
      additional_evidence: '',
    },
  });
}

/** /auth (with `authBody`), /attest with sample evidence, then a GET of `resource`; throws unless all are 200. */
export async function sampleHandshake(
  agent: Agent,
  url: URL,
  key: TeeKeyPair,
  authBody: string,
  resource: string,
): Promise<void> {
  const auth = await call(agent, url, 'POST', '/kbs/v0/auth', {}, authBody);
  if (auth.status !== 200 || auth.cookie === undefined) throw new Error(`auth ${auth.status} ${auth.body}`);
  const { nonce } = JSON.parse(auth.body) as { nonce: string };
  const cookie = { cookie: auth.cookie };
  const attest = await call(agent, url, 'POST', '/kbs/v0/attest', cookie, sampleAttestation(nonce, key));
  if (attest.status !== 200) throw new Error(`attest ${attest.status} ${attest.body}`);
  const res = await call(agent, url, 'GET', resource, cookie);
  if (res.status !== 200) throw new Error(`resource ${res.status} ${res.body}`);
}
