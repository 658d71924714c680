// A local stand-in for a Veraison verification service, for tests: discovery, challenge-response
// sessions, and an ES256 EAR with CCA_REALM and CCA_SSD_PLATFORM submodules. It appraises the token
// with this package's local CCA checks against the stores it is given, as Veraison would with its own.
import { generateKeyPairSync, type KeyObject, randomUUID, sign } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ccaClaims, verifyCcaToken } from './index.js';
import type { CcaStores } from './stores.js';
import { parseCcaToken } from './token.js';

export interface MockVeraison {
  readonly address: string;
  /** Content types and nonces the sessions received. */
  readonly submissions: { contentType: string; nonce: string }[];
  tamper: { signWith?: KeyObject; eatNonce?: string; status?: string } | undefined;
  close(): Promise<void>;
}

const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

export async function startMockVeraison(stores: CcaStores): Promise<MockVeraison> {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const sessions = new Map<string, string>();
  let server: Server;
  const mock: MockVeraison = {
    address: '',
    submissions: [],
    tamper: undefined,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://mock');
      const reply = (status: number, body: unknown, headers: Record<string, string> = {}) => {
        res.writeHead(status, { 'content-type': 'application/json', ...headers });
        res.end(typeof body === 'string' ? body : JSON.stringify(body));
      };
      if (req.method === 'GET' && url.pathname === '/.well-known/veraison/verification') {
        reply(200, {
          'ear-verification-key': { ...publicKey.export({ format: 'jwk' }), alg: 'ES256' },
          'media-types': ['application/eat-collection; profile="http://arm.com/CCA-SSD/1.0.0"'],
          'api-endpoints': { newChallengeResponseSession: '/challenge-response/v1/newSession' },
        });
        return;
      }
      if (req.method === 'POST' && url.pathname === '/challenge-response/v1/newSession') {
        const id = randomUUID();
        sessions.set(id, url.searchParams.get('nonce') ?? '');
        reply(201, { status: 'waiting' }, { location: `session/${id}` });
        return;
      }
      const id = /^\/challenge-response\/v1\/session\/([\w-]+)$/.exec(url.pathname)?.[1];
      const nonce = id === undefined ? undefined : sessions.get(id);
      if (req.method !== 'POST' || nonce === undefined) {
        reply(404, { error: 'not found' });
        return;
      }
      mock.submissions.push({ contentType: req.headers['content-type'] ?? '', nonce });
      let claims: ReturnType<typeof ccaClaims>;
      try {
        const token = parseCcaToken(Buffer.concat(chunks));
        verifyCcaToken(token, stores);
        claims = ccaClaims(token);
      } catch (e) {
        reply(200, { status: 'failed', error: (e as Error).message });
        return;
      }
      const t = Math.floor(Date.now() / 1000);
      const payload = {
        eat_profile: 'tag:github.com,2023:veraison/ear',
        iat: t,
        eat_nonce: mock.tamper?.eatNonce ?? nonce,
        'ear.verifier-id': { build: 'mock', developer: 'broker tests' },
        submods: {
          CCA_REALM: { 'ear.status': 'affirming', 'ear.veraison.annotated-evidence': claims.realm },
          CCA_SSD_PLATFORM: { 'ear.status': 'affirming', 'ear.veraison.annotated-evidence': claims.platform },
        },
      };
      const head = `${b64url({ alg: 'ES256', typ: 'JWT' })}.${b64url(payload)}`;
      const sig = sign('sha256', Buffer.from(head), {
        key: mock.tamper?.signWith ?? privateKey,
        dsaEncoding: 'ieee-p1363',
      }).toString('base64url');
      reply(200, { status: mock.tamper?.status ?? 'complete', result: `${head}.${sig}` });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(mock, { address: `http://127.0.0.1:${port}` });
}
