// CCA remote mode (trustee's cca/remote.rs with Veraison's API client): discover the verification
// API, open a challenge-response session with the 64-byte report data as nonce, submit the token,
// and check the EAR that comes back (ES256 by the discovered key, `eat_nonce` = the report data).
// The realm and platform claims are Veraison's annotated evidence of CCA_REALM and CCA_SSD_PLATFORM.
import { createPublicKey, type KeyObject, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { quote, VerificationError } from '../errors.js';

export const CCA_MEDIA_TYPE = 'application/eat-collection; profile="http://arm.com/CCA-SSD/1.0.0"';
const DISCOVERY_PATH = '/.well-known/veraison/verification';
const TIMEOUT_MS = 60_000;
const MAX_ANSWER_BYTES = 1024 * 1024;

export interface VeraisonOptions {
  /** trustee's `address`: the Veraison base URL. */
  readonly address: string;
  /** trustee's `ca-cert`: a PEM file to trust for HTTPS (instead of the default store). */
  readonly caCert?: string;
}

interface Answer {
  readonly status: number;
  readonly location?: string;
  readonly body: string;
}

function unavailable(message: string, cause?: unknown): VerificationError {
  return new VerificationError('COLLATERAL_UNAVAILABLE', `Veraison: ${message}`, { cause });
}
function invalid(message: string, cause?: unknown): VerificationError {
  return new VerificationError('COLLATERAL_INVALID', `Veraison: ${message}`, { cause });
}

function exchange(
  method: string,
  url: string,
  headers: Record<string, string>,
  body: Buffer | undefined,
  ca: string | undefined,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    let u: URL;
    try {
      u = new URL(url);
    } catch (e) {
      reject(unavailable(`${quote(url, 200)} is not a URL`, e));
      return;
    }
    const send = u.protocol === 'https:' ? httpsRequest : u.protocol === 'http:' ? httpRequest : undefined;
    if (send === undefined) {
      reject(unavailable(`${quote(url, 200)}: only http and https are supported`));
      return;
    }
    const req = send(
      u,
      { method, headers, timeout: TIMEOUT_MS, ...(ca !== undefined ? { ca } : {}) },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_ANSWER_BYTES) {
            req.destroy();
            reject(unavailable(`${method} ${url} answered more than ${MAX_ANSWER_BYTES} bytes`));
          } else chunks.push(c);
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            ...(typeof res.headers.location === 'string' ? { location: res.headers.location } : {}),
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', (e) => reject(unavailable(`${method} ${url} failed: ${e.message}`, e)));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', (e) => reject(unavailable(`${method} ${url} failed: ${e.message}`, e)));
    req.end(body);
  });
}

function json(text: string, what: string): Record<string, unknown> {
  try {
    const v = JSON.parse(text);
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch (e) {
    throw invalid(`${what} is not JSON`, e);
  }
  throw invalid(`${what} is not a JSON object`);
}

/** The EAR's payload, once its ES256 signature verifies with `key`. */
export function verifyEar(jwt: string, key: KeyObject): Record<string, unknown> {
  const parts = jwt.split('.');
  if (parts.length !== 3) throw invalid('the attestation result is not a compact JWS');
  const header = json(Buffer.from(parts[0]!, 'base64url').toString('utf8'), 'the EAR header');
  if (header.alg !== 'ES256') throw invalid(`the EAR alg ${quote(String(header.alg))} is not ES256`);
  const ok = verify(
    'sha256',
    Buffer.from(`${parts[0]}.${parts[1]}`),
    { key, dsaEncoding: 'ieee-p1363' },
    Buffer.from(parts[2]!, 'base64url'),
  );
  if (!ok) throw invalid('the EAR signature does not verify with the discovered ear-verification-key');
  return json(Buffer.from(parts[1]!, 'base64url').toString('utf8'), 'the EAR payload');
}

/** Runs the challenge-response exchange; returns the verified EAR payload. */
export async function verifyWithVeraison(
  token: Uint8Array,
  nonce: Buffer,
  opts: VeraisonOptions,
): Promise<Record<string, unknown>> {
  const ca = opts.caCert === undefined ? undefined : readFileSync(opts.caCert, 'utf8');
  const base = opts.address.replace(/\/+$/, '');
  const disco = await exchange(
    'GET',
    `${base}${DISCOVERY_PATH}`,
    { accept: 'application/vnd.veraison.discovery+json' },
    undefined,
    ca,
  );
  if (disco.status !== 200) throw unavailable(`discovery answered ${disco.status}`);
  const api = json(disco.body, 'the discovery document');
  let earKey: KeyObject;
  try {
    earKey = createPublicKey({
      key: api['ear-verification-key'] as import('node:crypto').JsonWebKey,
      format: 'jwk',
    });
  } catch (e) {
    throw invalid('the discovery document has no usable ear-verification-key', e);
  }
  const endpoints = api['api-endpoints'] as Record<string, unknown> | undefined;
  const newSession = endpoints?.newChallengeResponseSession;
  if (typeof newSession !== 'string')
    throw invalid('the discovery document names no newChallengeResponseSession');
  const sessionUrl = `${base}${newSession}?nonce=${nonce.toString('base64url')}`;
  const session = await exchange(
    'POST',
    sessionUrl,
    { accept: 'application/vnd.veraison.challenge-response-session+json' },
    undefined,
    ca,
  );
  if (session.status !== 201 || session.location === undefined) {
    throw unavailable(
      `opening a session answered ${session.status}${session.location ? '' : ' without Location'}`,
    );
  }
  const evidenceUrl = new URL(session.location, sessionUrl).toString();
  const result = await exchange(
    'POST',
    evidenceUrl,
    { 'content-type': CCA_MEDIA_TYPE, accept: 'application/vnd.veraison.challenge-response-session+json' },
    Buffer.from(token),
    ca,
  );
  if (result.status !== 200) throw unavailable(`submitting the token answered ${result.status}`);
  const done = json(result.body, 'the session');
  if (done.status !== 'complete' || typeof done.result !== 'string') {
    throw unavailable(`the session is ${quote(String(done.status))}, not complete with a result`);
  }
  const ear = verifyEar(done.result, earKey);
  const earNonce = ear.eat_nonce;
  if (typeof earNonce !== 'string') throw invalid('the EAR has no eat_nonce');
  if (!Buffer.from(earNonce, 'base64url').equals(nonce)) {
    throw new VerificationError(
      'REPORT_DATA_MISMATCH',
      'Veraison: the EAR nonce is not the expected report data',
    );
  }
  return ear;
}

const REALM_KEYS = [
  'cca-realm-challenge',
  'cca-realm-extensible-measurements',
  'cca-realm-hash-algo-id',
  'cca-realm-initial-measurement',
  'cca-realm-personalization-value',
] as const;
const PLATFORM_KEYS = ['cca-platform-instance-id', 'cca-platform-implementation-id'] as const;

/** trustee's assemble_cca_evidence over the EAR's CCA_REALM and CCA_SSD_PLATFORM annotated evidence. */
export function claimsFromEar(ear: Record<string, unknown>): {
  realm: Record<string, unknown>;
  platform: Record<string, unknown>;
} {
  const submods = ear.submods as Record<string, Record<string, unknown>> | undefined;
  const evidence = (name: string, keys: readonly string[]) => {
    const ae = submods?.[name]?.['ear.veraison.annotated-evidence'] as Record<string, unknown> | undefined;
    if (ae === undefined) throw invalid(`the EAR has no ${name} submodule with annotated evidence`);
    const out: Record<string, unknown> = {};
    for (const k of keys) {
      const v = ae[k];
      const ok =
        k === 'cca-realm-extensible-measurements'
          ? Array.isArray(v) && v.every((x) => typeof x === 'string')
          : typeof v === 'string';
      if (!ok) throw invalid(`${name} annotated evidence lacks ${k}`);
      out[k] = v;
    }
    return out;
  };
  return { realm: evidence('CCA_REALM', REALM_KEYS), platform: evidence('CCA_SSD_PLATFORM', PLATFORM_KEYS) };
}
