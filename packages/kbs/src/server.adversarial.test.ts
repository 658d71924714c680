// A string reply goes out with its head in one write: its content-length must count UTF-8 bytes (not
// UTF-16 units) whatever the text, lone surrogates included, or a kept connection's next response is
// read from the middle of this one's body. Raw pipelined requests on one socket show the framing
// byte for byte, with a HEAD (head only, the length of the GET's body) between two GETs.
import { createServer, type Server } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { Api } from './api.js';
import { KbsMetrics } from './metrics.js';
import { createRequestHandler } from './server.js';

// Two-, three- and four-byte UTF-8, and a lone surrogate (written as U+FFFD, three bytes).
const TEXT = 'é€𝄞 \ud800 end';
const TEXT_BYTES = Buffer.from(TEXT, 'utf8');

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** Writes `raw` on one connection and returns every byte until the server closes it. */
async function exchange(raw: string): Promise<Buffer> {
  server = createServer(
    createRequestHandler({
      api: {} as Api, // not reached: only /console is asked for
      metrics: new KbsMetrics(),
      logger: pino({ level: 'silent' }),
      bodyLimit: 1024,
      consolePage: () => ({
        status: 200,
        headers: { 'content-type': 'text/plain; charset=utf-8' },
        body: TEXT,
      }),
    }),
  );
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const socket = connect(port, '127.0.0.1');
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.write(raw);
  await new Promise<void>((resolve, reject) => {
    socket.on('end', resolve);
    socket.on('error', reject);
  });
  return Buffer.concat(chunks);
}

/** Splits pipelined responses by their content-length; a HEAD response has no body. */
function responses(bytes: Buffer, heads: readonly boolean[]) {
  const out: { status: string; length: number; body: Buffer }[] = [];
  let at = 0;
  for (const head of heads) {
    const end = bytes.indexOf('\r\n\r\n', at);
    expect(end).toBeGreaterThan(at);
    const headText = bytes.subarray(at, end).toString('latin1');
    const length = Number(/\r\ncontent-length: (\d+)/i.exec(headText)?.[1]);
    const bodyLength = head ? 0 : length;
    out.push({
      status: headText.split('\r\n')[0] ?? '',
      length,
      body: bytes.subarray(end + 4, end + 4 + bodyLength),
    });
    at = end + 4 + bodyLength;
  }
  expect(at).toBe(bytes.length); // nothing left over: every body was exactly as long as declared
  return out;
}

describe('a string reply in one write', () => {
  it('declares its UTF-8 byte length, keeps pipelined responses framed, and sends HEAD no body', async () => {
    const request = (method: string, last = false) =>
      `${method} /console/x HTTP/1.1\r\nhost: kbs\r\n${last ? 'connection: close\r\n' : ''}\r\n`;
    const bytes = await exchange(request('GET') + request('HEAD') + request('GET', true));
    const [first, head, last] = responses(bytes, [false, true, false]);
    for (const r of [first, head, last]) {
      expect(r?.status).toBe('HTTP/1.1 200 OK');
      expect(r?.length).toBe(TEXT_BYTES.length);
    }
    expect(TEXT_BYTES.length).not.toBe(TEXT.length);
    expect(first?.body.equals(TEXT_BYTES)).toBe(true);
    expect(last?.body.equals(TEXT_BYTES)).toBe(true);
  });
});
