// NVIDIA's Remote Attestation Service (trustee's `nvidia_verifier = { type = "Remote" }`): each
// device's report and chain go to NRAS, which answers with an overall JWT and one device JWT;
// both must be ES384 tokens signed by a key of NRAS's JWKS, and the device must say its report
// carried our nonce. The claims are the device token's payload plus the overall result.
import { createPublicKey, type KeyObject, verify } from 'node:crypto';
import { quote, VerificationError } from '../errors.js';

export const NRAS_URL = 'https://nras.attestation.nvidia.com/v4/attest';
export const NRAS_JWKS_URL = 'https://nras.attestation.nvidia.com/.well-known/jwks.json';
/** NRAS verifies the chain and RIMs itself; trustee allows it a minute. */
export const NRAS_TIMEOUT_MS = 60_000;
const MAX_ANSWER_BYTES = 1024 * 1024;
/** jsonwebtoken's default leeway for `exp`. */
const EXP_LEEWAY_S = 60;

export interface NrasOptions {
  /** trustee's `verifier_url`: the attest base URL (`/gpu` or `/switch` is appended). */
  readonly verifierUrl?: string;
  /** Where NRAS's signing keys are fetched; trustee always uses NVIDIA's (this project's addition for mocks). */
  readonly jwksUrl?: string;
  readonly timeoutMs?: number;
}

function remoteError(message: string, cause?: unknown): VerificationError {
  return new VerificationError('COLLATERAL_UNAVAILABLE', `NRAS: ${message}`, { cause });
}
function tokenError(message: string, cause?: unknown): VerificationError {
  return new VerificationError('COLLATERAL_INVALID', `NRAS token: ${message}`, { cause });
}

/** One HTTP exchange with a deadline and a body limit; the body as text. */
async function exchange(url: string, init: RequestInit, timeoutMs: number): Promise<string> {
  let res: Response;
  try {
    res = await fetch(url, { ...init, redirect: 'error', signal: AbortSignal.timeout(timeoutMs) });
  } catch (e) {
    throw remoteError(`${init.method ?? 'GET'} ${url} failed: ${(e as Error).message}`, e);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = res.body?.getReader();
  for (;;) {
    const r = reader ? await reader.read() : { done: true as const, value: undefined };
    if (r.done) break;
    size += r.value.length;
    if (size > MAX_ANSWER_BYTES) {
      await reader?.cancel();
      throw remoteError(`${url} answered more than ${MAX_ANSWER_BYTES} bytes`);
    }
    chunks.push(r.value);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (!res.ok) throw remoteError(`${url} answered ${res.status}: ${quote(text, 200)}`);
  return text;
}

/** The JWKS keys by `kid` (EC keys only: NRAS signs with ES384). */
export async function fetchNrasKeys(
  url: string,
  timeoutMs = NRAS_TIMEOUT_MS,
): Promise<Map<string, KeyObject>> {
  let set: unknown;
  try {
    set = JSON.parse(await exchange(url, { method: 'GET' }, timeoutMs));
  } catch (e) {
    if (e instanceof VerificationError) throw e;
    throw remoteError(`the JWKS at ${url} is not JSON`, e);
  }
  const keys = (set as { keys?: unknown })?.keys;
  if (!Array.isArray(keys)) throw remoteError(`the JWKS at ${url} has no keys array`);
  const out = new Map<string, KeyObject>();
  for (const k of keys) {
    if (k === null || typeof k !== 'object' || typeof k.kid !== 'string' || k.kty !== 'EC') continue;
    try {
      out.set(k.kid, createPublicKey({ key: { kty: 'EC', crv: k.crv, x: k.x, y: k.y }, format: 'jwk' }));
    } catch {
      // A key we cannot use cannot have signed a token we accept.
    }
  }
  return out;
}

function jsonPart(part: string | undefined, what: string): Record<string, unknown> {
  try {
    const v = JSON.parse(Buffer.from(part ?? '', 'base64url').toString('utf8'));
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch (e) {
    throw tokenError(`${what} is not base64url JSON`, e);
  }
  throw tokenError(`${what} is not a JSON object`);
}

const isTime = (v: unknown) => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/**
 * trustee's validate_jwt: a kid of the JWKS, ES384 over `header.payload`, integer `exp` (not past,
 * 60 s leeway), `iat` and `nbf`, string `iss`. Returns the payload.
 */
export function verifyNrasJwt(jwt: string, keys: ReadonlyMap<string, KeyObject>, now: Date, what: string) {
  const parts = jwt.split('.');
  if (parts.length !== 3) throw tokenError(`${what} is not a compact JWS`);
  const header = jsonPart(parts[0], `${what} header`);
  if (header.alg !== 'ES384') throw tokenError(`${what} alg ${quote(String(header.alg))} is not ES384`);
  const key = typeof header.kid === 'string' ? keys.get(header.kid) : undefined;
  if (key === undefined) throw tokenError(`${what} kid is not in NRAS's JWKS`);
  const ok = verify(
    'sha384',
    Buffer.from(`${parts[0]}.${parts[1]}`),
    { key, dsaEncoding: 'ieee-p1363' },
    Buffer.from(parts[2]!, 'base64url'),
  );
  if (!ok) throw tokenError(`${what} signature does not verify with its JWKS key`);
  const payload = jsonPart(parts[1], `${what} payload`);
  if (
    !isTime(payload.exp) ||
    !isTime(payload.iat) ||
    !isTime(payload.nbf) ||
    typeof payload.iss !== 'string'
  ) {
    throw tokenError(`${what} lacks integer exp, iat, nbf or a string iss`);
  }
  if ((payload.exp as number) + EXP_LEEWAY_S < Math.floor(now.getTime() / 1000)) {
    throw tokenError(`${what} expired`);
  }
  return payload;
}

export interface NrasDevice {
  readonly endpoint: 'gpu' | 'switch';
  readonly arch: string;
  /** Base64 of the report (hex evidence is re-encoded, as trustee does). */
  readonly evidence: string;
  readonly certificate: string;
}

/** Sends one device to NRAS and returns its checked claims. */
export async function attestWithNras(
  device: NrasDevice,
  nonce: Buffer,
  keys: ReadonlyMap<string, KeyObject>,
  opts: NrasOptions & { readonly now: Date },
): Promise<Record<string, unknown>> {
  const url = `${opts.verifierUrl ?? NRAS_URL}/${device.endpoint}`;
  const body = JSON.stringify({
    nonce: nonce.toString('hex'),
    arch: device.arch.toUpperCase(),
    evidence_list: [{ evidence: device.evidence, certificate: device.certificate }],
    claims_version: '3.0',
  });
  const text = await exchange(
    url,
    { method: 'POST', headers: { 'content-type': 'application/json' }, body },
    opts.timeoutMs ?? NRAS_TIMEOUT_MS,
  );
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch (e) {
    throw tokenError('the answer is not JSON', e);
  }
  // [["JWT", <overall>], {"<device>": <device token>}]
  const [overall, devices] = Array.isArray(answer) && answer.length === 2 ? answer : [];
  if (!Array.isArray(overall) || overall.length !== 2 || typeof overall[1] !== 'string') {
    throw tokenError('the answer is not [["JWT", overall], {device: token}]');
  }
  const deviceTokens =
    devices !== null && typeof devices === 'object' && !Array.isArray(devices) ? Object.values(devices) : [];
  if (deviceTokens.length !== 1 || typeof deviceTokens[0] !== 'string') {
    throw tokenError('the answer must hold exactly one device token');
  }
  const overallClaims = verifyNrasJwt(overall[1], keys, opts.now, 'overall token');
  const claims = verifyNrasJwt(deviceTokens[0], keys, opts.now, 'device token');
  if (Object.hasOwn(overallClaims, 'x-nvidia-overall-att-result')) {
    claims['x-nvidia-overall-att-result'] = overallClaims['x-nvidia-overall-att-result'];
  }
  const match = claims[`x-nvidia-${device.endpoint}-attestation-report-nonce-match`];
  if (typeof match !== 'boolean') throw tokenError('the device token does not say whether the nonce matched');
  if (!match)
    throw new VerificationError('REPORT_DATA_MISMATCH', 'NRAS: the device report nonce is not ours');
  return claims;
}
