// Azure's TD quote service at the instance metadata address, as the az-tdx-vtpm crate calls it:
// `POST /acc/tdquote` with `{"report": base64url-unpadded(TDREPORT)}` answers
// `{"quote": base64url}`.
import { EvidenceCollectionFailed } from '../attester.js';

export const TD_QUOTE_PATH = '/acc/tdquote';
export const TD_REPORT_SIZE = 1024;
/** A quote with its PCK chain is about 5 KB; its JSON answer far below this. */
export const MAX_TD_QUOTE_RESPONSE_SIZE = 256 * 1024;
export const DEFAULT_TD_QUOTE_TIMEOUT_MS = 30_000;

async function readLimited(response: Response, limit: number): Promise<Buffer> {
  const declared = Number(response.headers.get('content-length') ?? Number.NaN);
  if (declared > limit)
    throw new EvidenceCollectionFailed(`TD quote service answer of ${declared} bytes exceeds ${limit}`);
  const reader = response.body?.getReader();
  if (reader === undefined) return Buffer.alloc(0);
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > limit) {
      await reader.cancel();
      throw new EvidenceCollectionFailed(`TD quote service answer exceeds ${limit} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, total);
}

/** Asks the quote service at `baseUrl` for a quote of `tdReport`. */
export async function fetchTdQuote(
  baseUrl: string,
  tdReport: Uint8Array,
  options: { readonly timeoutMs?: number } = {},
): Promise<Uint8Array> {
  if (tdReport.length !== TD_REPORT_SIZE) {
    throw new EvidenceCollectionFailed(`TD report is ${tdReport.length} bytes, not ${TD_REPORT_SIZE}`);
  }
  const url = `${baseUrl.replace(/\/+$/, '')}${TD_QUOTE_PATH}`;
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ report: Buffer.from(tdReport).toString('base64url') }),
      signal: AbortSignal.timeout(options.timeoutMs ?? DEFAULT_TD_QUOTE_TIMEOUT_MS),
      redirect: 'error',
    });
  } catch (err) {
    throw new EvidenceCollectionFailed(`TD quote request to ${url} failed: ${(err as Error).message}`, {
      cause: err,
    });
  }
  const body = await readLimited(response, MAX_TD_QUOTE_RESPONSE_SIZE);
  if (!response.ok)
    throw new EvidenceCollectionFailed(`TD quote service answered ${url} with HTTP ${response.status}`);
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
  } catch (err) {
    throw new EvidenceCollectionFailed(`TD quote service answer from ${url} is not JSON`, { cause: err });
  }
  const quote = (json as Record<string, unknown> | null)?.quote;
  if (typeof quote !== 'string' || !/^[A-Za-z0-9_-]+={0,2}$/.test(quote)) {
    throw new EvidenceCollectionFailed(`TD quote service answer from ${url} has no base64url "quote"`);
  }
  return new Uint8Array(Buffer.from(quote, 'base64url'));
}
