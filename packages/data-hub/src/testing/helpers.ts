// Helpers shared by this package's tests (not exported from index.ts): a real in-process KBS, a fake
// attestation agent speaking ttrpc, and temporary folders.
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SampleAttester } from '@broker/attester';
import { parseKbsConfigText, type RunningKbs, startKbs } from '@broker/kbs';
import { ALLOW_ALL_RESOURCE_POLICY, KbsAdminClient, KbsClient } from '@broker/kbs-client';
import { Code, defineProto, messageCodec, serverMethod, TtrpcError, TtrpcServer } from '@broker/ttrpc';
import pino from 'pino';

export async function tempDir(prefix = 'cdh-test-'): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

export interface TestKbs {
  readonly url: string;
  /** PEM of the HTTPS certificate, when TLS is on. */
  readonly certPem: string | null;
  setResource(path: string, value: string | Uint8Array): Promise<void>;
  close(): Promise<void>;
}

/** A KBS on 127.0.0.1 with the allow-all resource policy, over HTTP or HTTPS. */
export async function startTestKbs(options: { tls?: { dir: string } } = {}): Promise<TestKbs> {
  let http = 'sockets = ["127.0.0.1:0"]\ninsecure_http = true';
  let certPem: string | null = null;
  if (options.tls !== undefined) {
    const { dir } = options.tls;
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        'kbs-key.pem',
        '-out',
        'kbs-cert.pem',
        '-days',
        '2',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ],
      { cwd: dir, stdio: 'pipe' },
    );
    certPem = await readFile(join(dir, 'kbs-cert.pem'), 'utf8');
    http = `sockets = ["127.0.0.1:0"]\nprivate_key = "${join(dir, 'kbs-key.pem')}"\ncertificate = "${join(dir, 'kbs-cert.pem')}"`;
  }
  const toml =
    `[http_server]\n${http}\n[attestation_token]\ninsecure_header_jwk = true\n` +
    '[admin]\nauthorization_mode = "InsecureAllowAll"\n[[plugins]]\nname = "resource"\n';
  const kbs: RunningKbs = await startKbs(parseKbsConfigText(toml), { logger: pino({ level: 'silent' }) });
  const url = kbs.urls[0] as string;
  const admin = new KbsAdminClient({
    url,
    adminToken: null,
    logger: { warn() {} },
    ...(certPem !== null ? { certPem } : {}),
  });
  await admin.setResourcePolicy(ALLOW_ALL_RESOURCE_POLICY);
  return {
    url,
    certPem,
    setResource: (path, value) => admin.setResource(path, value),
    async close() {
      await kbs.close();
    },
  };
}

/** What the fake agent answers to one `GetToken` call. */
export type AaBehaviour =
  /** a real token: a full RCAR with the sample attester and a fresh key, as upstream's agent */
  | 'good'
  /** a real token whose signature is broken: the KBS answers 401 */
  | 'tampered'
  /** bytes that are not the `{"token","tee_keypair"}` JSON */
  | 'garbage'
  /** an INTERNAL error, as upstream's agent when attestation fails */
  | 'fail';

const aaRoot = defineProto(`
syntax = "proto3";
package attestation_agent;
message GetTokenRequest { string TokenType = 1; }
message GetTokenResponse { bytes Token = 1; }
`);
const GetTokenRequest = messageCodec<{ TokenType: string }>(aaRoot, 'attestation_agent.GetTokenRequest');
const GetTokenResponse = messageCodec<{ Token: Uint8Array }>(aaRoot, 'attestation_agent.GetTokenResponse');

/** Flips one character of the JWT signature. */
export function tamperToken(token: string): string {
  const last = token.at(-2) === 'A' ? 'B' : 'A';
  return `${token.slice(0, -2)}${last}${token.at(-1)}`;
}

/** A fake attestation agent serving `GetToken` on a unix socket. */
export class FakeAa {
  readonly tokenTypes: string[] = [];
  /** Behaviours for the next calls, in order; `fallback` after they run out. */
  readonly queue: AaBehaviour[] = [];
  fallback: AaBehaviour = 'good';
  readonly #server: TtrpcServer;
  readonly #kbsUrl: string;
  readonly #certPem: string | null;
  readonly #initData: string | null;

  private constructor(server: TtrpcServer, kbsUrl: string, certPem: string | null, initData: string | null) {
    this.#server = server;
    this.#kbsUrl = kbsUrl;
    this.#certPem = certPem;
    this.#initData = initData;
  }

  get calls(): number {
    return this.tokenTypes.length;
  }

  /** `initData`: the init-data TOML the agent attests with (as the guest's measured initdata). */
  static async start(
    path: string,
    kbs: { url: string; certPem: string | null; initData?: string },
  ): Promise<FakeAa> {
    const server = new TtrpcServer();
    const aa = new FakeAa(server, kbs.url, kbs.certPem, kbs.initData ?? null);
    server.register('attestation_agent.AttestationAgentService', {
      GetToken: serverMethod(GetTokenRequest, GetTokenResponse, async (req) => {
        aa.tokenTypes.push(req.TokenType);
        return { Token: await aa.#answer(aa.queue.shift() ?? aa.fallback) };
      }),
    });
    await server.listen({ path });
    return aa;
  }

  async #answer(behaviour: AaBehaviour): Promise<Uint8Array> {
    if (behaviour === 'garbage') return Buffer.from('not json');
    if (behaviour === 'fail') {
      throw new TtrpcError(Code.INTERNAL, '[ERROR:attestation-agent] AA-KBC get token failed');
    }
    const client = new KbsClient({
      url: this.#kbsUrl,
      attester: new SampleAttester(),
      initData: this.#initData,
      ...(this.#certPem !== null ? { certPem: this.#certPem } : {}),
    });
    try {
      const { token, teeKeyPair } = await client.getToken();
      const sent = behaviour === 'tampered' ? tamperToken(token) : token;
      return Buffer.from(JSON.stringify({ token: sent, tee_keypair: teeKeyPair.toPem() }));
    } finally {
      client.close();
    }
  }

  close(): Promise<void> {
    return this.#server.close({ graceMs: 0 });
  }
}

/** A TCP server that accepts connections and never answers: a hung KBS. */
export async function blackHole(): Promise<{ url: string; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A loopback port nothing listens on. */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A pino logger collecting JSON lines. */
export function captureLogger(level = 'debug'): { logger: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  return { logger: pino({ level }, { write: (s: string) => lines.push(s) }), lines };
}
