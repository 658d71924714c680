// A local stand-in for NVIDIA's NRAS, for tests: `POST <base>/gpu` parses the device report and
// answers NRAS's shape, `[["JWT", overall], {"GPU-0": device}]`, ES384 tokens signed by a key its
// `/.well-known/jwks.json` serves. Whether the report carried the request's nonce is the device
// token's `x-nvidia-gpu-attestation-report-nonce-match`, as NRAS reports it.
import { generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseNvidiaReport } from './spdm.js';

export interface MockNras {
  /** The attest base URL (trustee's `verifier_url`). */
  readonly url: string;
  readonly jwksUrl: string;
  /** Request bodies received on the attest endpoints, parsed. */
  readonly requests: Record<string, unknown>[];
  /** Replaces the next answers' device token payload fields, or the whole answer text. */
  tamper:
    | { payload?: Record<string, unknown>; answer?: string; signWith?: KeyObject; kid?: string }
    | undefined;
  close(): Promise<void>;
}

const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

export function signEs384Jwt(payload: Record<string, unknown>, key: KeyObject, kid: string): string {
  const head = `${b64url({ alg: 'ES384', typ: 'JWT', kid })}.${b64url(payload)}`;
  return `${head}.${sign('sha384', Buffer.from(head), { key, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`;
}

export async function startMockNras(): Promise<MockNras> {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-384' });
  const kid = 'mock-nras-1';
  let server: Server;
  const mock: MockNras = {
    url: '',
    jwksUrl: '',
    requests: [],
    tamper: undefined,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'GET' && req.url === '/.well-known/jwks.json') {
        res.setHeader('content-type', 'application/json');
        res.end(
          JSON.stringify({
            keys: [{ ...publicKey.export({ format: 'jwk' }), kid, alg: 'ES384', use: 'sig' }],
          }),
        );
        return;
      }
      const endpoint = /^\/v4\/attest\/(gpu|switch)$/.exec(req.url ?? '')?.[1];
      if (req.method !== 'POST' || endpoint === undefined) {
        res.statusCode = 404;
        res.end('not found');
        return;
      }
      let body: { nonce: string; evidence_list: { evidence: string }[] };
      let nonceMatch: boolean;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        mock.requests.push(body as unknown as Record<string, unknown>);
        const report = parseNvidiaReport(Buffer.from(body.evidence_list[0]!.evidence, 'base64'));
        nonceMatch = report.request.nonce.toString('hex') === body.nonce;
      } catch (e) {
        res.statusCode = 400;
        res.end(`bad request: ${(e as Error).message}`);
        return;
      }
      const t = Math.floor(Date.now() / 1000);
      const times = { iat: t, nbf: t, exp: t + 3600, iss: 'https://nras.mock' };
      const key = mock.tamper?.signWith ?? privateKey;
      const useKid = mock.tamper?.kid ?? kid;
      const overall = signEs384Jwt({ ...times, 'x-nvidia-overall-att-result': nonceMatch }, key, useKid);
      const device = signEs384Jwt(
        {
          ...times,
          'x-nvidia-device-type': endpoint,
          [`x-nvidia-${endpoint}-attestation-report-nonce-match`]: nonceMatch,
          'x-nvidia-gpu-attestation-report-signature-verified': true,
          ...mock.tamper?.payload,
        },
        key,
        useKid,
      );
      res.setHeader('content-type', 'application/json');
      res.end(mock.tamper?.answer ?? JSON.stringify([['JWT', overall], { 'GPU-0': device }]));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(mock, {
    url: `http://127.0.0.1:${port}/v4/attest`,
    jwksUrl: `http://127.0.0.1:${port}/.well-known/jwks.json`,
  });
}
