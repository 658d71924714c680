// Test-only HTTP client and sample-TEE guest: just enough of the guest side to drive a KBS.
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { generateTeeKeyPair, runtimeDataDigest, type TeeKeyPair } from '@broker/protocol';

export interface Response {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
  json(): unknown;
}

export interface RequestOptions {
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string | Uint8Array;
  /** CA certificate(s) to trust for https. */
  readonly ca?: string;
}

export function send(url: string, options: RequestOptions = {}): Promise<Response> {
  const u = new URL(url);
  const req = (u.protocol === 'https:' ? httpsRequest : httpRequest)({
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port: u.port,
    path: `${u.pathname}${u.search}`,
    method: options.method ?? 'GET',
    headers: options.headers,
    ...(options.ca !== undefined && { ca: options.ca }),
  });
  return new Promise((resolve, reject) => {
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: () => JSON.parse(text) });
      });
    });
    req.end(options.body);
  });
}

/** The `name=value` part of a Set-Cookie header. */
export function cookieOf(res: Response): string {
  const h = res.headers['set-cookie'];
  const first = Array.isArray(h) ? h[0] : h;
  if (first === undefined) throw new Error('no Set-Cookie');
  return first.split(';')[0] as string;
}

export function sampleEvidence(nonce: string, key: TeeKeyPair, additional = ''): Record<string, unknown> {
  const digest = runtimeDataDigest({ nonce, 'tee-pubkey': key.publicJwk, 'additional-evidence': additional });
  return { svn: '1', report_data: digest.toString('base64') };
}

export function attestationBody(
  nonce: string,
  key: TeeKeyPair,
  evidence: unknown = sampleEvidence(nonce, key),
  additional = '',
): string {
  return JSON.stringify({
    'init-data': null,
    'runtime-data': { nonce, 'tee-pubkey': key.publicJwk },
    'tee-evidence': { primary_evidence: evidence, additional_evidence: additional },
  });
}

export const AUTH_BODY = JSON.stringify({
  version: '0.4.0',
  tee: 'sample',
  'extra-params': { 'supported-hash-algorithms': ['sha256', 'sha384', 'sha512', 'sm3'] },
});

/** auth + attest with the sample TEE; returns the cookie, the token and the TEE key. */
export async function handshake(
  base: string,
  options: { ca?: string; key?: TeeKeyPair } = {},
): Promise<{ cookie: string; token: string; key: TeeKeyPair; nonce: string }> {
  const key = options.key ?? generateTeeKeyPair();
  const ca = options.ca !== undefined ? { ca: options.ca } : {};
  const auth = await send(`${base}/kbs/v0/auth`, { method: 'POST', body: AUTH_BODY, ...ca });
  if (auth.status !== 200) throw new Error(`auth: ${auth.status} ${auth.text}`);
  const cookie = cookieOf(auth);
  const { nonce } = auth.json() as { nonce: string };
  const attest = await send(`${base}/kbs/v0/attest`, {
    method: 'POST',
    headers: { cookie, 'content-type': 'application/json' },
    body: attestationBody(nonce, key),
    ...ca,
  });
  if (attest.status !== 200) throw new Error(`attest: ${attest.status} ${attest.text}`);
  return { cookie, token: (attest.json() as { token: string }).token, key, nonce };
}
