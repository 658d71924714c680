/**
 * `GetToken("coco_as")`: the evidence (with empty report data) is sent to a
 * CoCo attestation service's RESTful `POST {url}/attestation`, and the
 * response text is the token (upstream `token/coco_as.rs`).
 */
import type { Attester } from '@broker/attester';
import { CocoAsTokenFailed } from './errors.js';

export const COCO_AS_TIMEOUT_MS = 60_000;
/** Tokens are a few KiB; anything far larger is not one. */
export const COCO_AS_MAX_RESPONSE_BYTES = 1024 * 1024;

export interface CocoAsRequestOptions {
  readonly url: string;
  readonly attester: Attester;
  readonly timeoutMs?: number;
  readonly maxResponseBytes?: number;
}

interface Reply {
  readonly status: number;
  readonly body: Buffer;
}

async function post(url: URL, body: string, timeoutMs: number, maxBytes: number): Promise<Reply> {
  // Loaded on first use: TLS is not needed before the agent listens.
  const { request } = url.protocol === 'https:' ? await import('node:https') : await import('node:http');
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
      timeout: timeoutMs,
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > maxBytes) {
          req.destroy(new Error(`response larger than ${maxBytes} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
    });
    req.end(body);
  });
}

/** The request body upstream sends: one verification request, no policy ids. */
export function cocoAsRequestBody(tee: string, evidence: unknown): string {
  const encoded = Buffer.from(JSON.stringify(evidence), 'utf8').toString('base64url');
  return JSON.stringify({ verification_requests: [{ tee, evidence: encoded }], policy_ids: [] });
}

export async function getCocoAsToken(options: CocoAsRequestOptions): Promise<Buffer> {
  // Upstream formats `{url}/attestation` without trimming a trailing slash; neither do we.
  let endpoint: URL;
  try {
    endpoint = new URL(`${options.url}/attestation`);
  } catch (cause) {
    throw new CocoAsTokenFailed(`invalid coco_as url ${JSON.stringify(options.url.slice(0, 200))}`, {
      cause,
    });
  }
  if (endpoint.protocol !== 'http:' && endpoint.protocol !== 'https:') {
    throw new CocoAsTokenFailed(
      `coco_as url must be http or https, got ${JSON.stringify(endpoint.protocol)}`,
    );
  }
  const evidence = await options.attester.getEvidence(new Uint8Array(0));
  const body = cocoAsRequestBody(options.attester.tee, evidence);
  let reply: Reply;
  try {
    reply = await post(
      endpoint,
      body,
      options.timeoutMs ?? COCO_AS_TIMEOUT_MS,
      options.maxResponseBytes ?? COCO_AS_MAX_RESPONSE_BYTES,
    );
  } catch (cause) {
    throw new CocoAsTokenFailed(`attestation service unreachable: ${(cause as Error).message}`, { cause });
  }
  if (reply.status !== 200) {
    const text = reply.body.subarray(0, 2048).toString('utf8');
    throw new CocoAsTokenFailed(`Remote Attestation Failed, AS Response: ${JSON.stringify(text)}`);
  }
  return reply.body;
}
