/**
 * The VCEK from Azure's instance metadata service (IMDS), as the
 * az-snp-vtpm crate fetches it: GET /metadata/THIM/amd/certification with
 * `Metadata: true`, answering `{"vcekCert": PEM, "certificateChain": PEM}`.
 */
import { EvidenceCollectionFailed } from '../attester.js';

/** Environment variable overriding the IMDS base URL (the mock TEE serves one on loopback). */
export const BROKER_AZURE_IMDS_URL = 'BROKER_AZURE_IMDS_URL';
export const DEFAULT_IMDS_URL = 'http://169.254.169.254';
export const IMDS_CERT_PATH = '/metadata/THIM/amd/certification';
/** The answer is two or three PEM certificates; anything far larger is not IMDS. */
export const MAX_IMDS_RESPONSE_SIZE = 256 * 1024;
export const DEFAULT_IMDS_TIMEOUT_MS = 30_000;

export interface AmdCertificates {
  /** PEM of the VCEK. */
  readonly vcek: string;
  /** PEM of the ASK and ARK. */
  readonly amdChain: string;
}

async function readLimited(response: Response, limit: number): Promise<Uint8Array> {
  const declared = Number(response.headers.get('content-length') ?? Number.NaN);
  if (declared > limit)
    throw new EvidenceCollectionFailed(`IMDS answer of ${declared} bytes exceeds ${limit}`);
  const reader = response.body?.getReader();
  if (reader === undefined) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > limit) {
      await reader.cancel();
      throw new EvidenceCollectionFailed(`IMDS answer exceeds ${limit} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, total);
}

export async function fetchAmdCertificates(
  baseUrl: string,
  options: { readonly timeoutMs?: number } = {},
): Promise<AmdCertificates> {
  const url = `${baseUrl.replace(/\/+$/, '')}${IMDS_CERT_PATH}`;
  let response: Response;
  try {
    response = await fetch(url, {
      headers: { Metadata: 'true' },
      signal: AbortSignal.timeout(options.timeoutMs ?? DEFAULT_IMDS_TIMEOUT_MS),
      redirect: 'error',
    });
  } catch (err) {
    throw new EvidenceCollectionFailed(`IMDS request to ${url} failed: ${(err as Error).message}`, {
      cause: err,
    });
  }
  const body = await readLimited(response, MAX_IMDS_RESPONSE_SIZE);
  if (!response.ok) {
    throw new EvidenceCollectionFailed(`IMDS answered ${url} with HTTP ${response.status}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
  } catch (err) {
    throw new EvidenceCollectionFailed(`IMDS answer from ${url} is not JSON`, { cause: err });
  }
  const o = json as Record<string, unknown> | null;
  if (
    typeof o !== 'object' ||
    o === null ||
    typeof o.vcekCert !== 'string' ||
    typeof o.certificateChain !== 'string'
  ) {
    throw new EvidenceCollectionFailed(`IMDS answer from ${url} lacks vcekCert and certificateChain strings`);
  }
  return { vcek: o.vcekCert, amdChain: o.certificateChain };
}

/**
 * DER of the first PEM block, which must be a CERTIFICATE (upstream
 * `pem_to_der`). Strict: the base64 body must decode canonically.
 */
export function certificatePemToDer(pem: string): Uint8Array {
  const m = /-----BEGIN ([A-Z0-9 ]+)-----\r?\n([\s\S]*?)-----END \1-----/.exec(pem);
  if (m === null) throw new EvidenceCollectionFailed('Failed to decode VCEK PEM: no PEM block');
  if (m[1] !== 'CERTIFICATE')
    throw new EvidenceCollectionFailed(`Expected CERTIFICATE label in PEM, got ${m[1]}`);
  const body = m[2]!.replace(/[\r\n\t ]/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(body) || body.length % 4 !== 0 || body.length === 0) {
    throw new EvidenceCollectionFailed('Failed to decode VCEK PEM: invalid base64');
  }
  return new Uint8Array(Buffer.from(body, 'base64'));
}
