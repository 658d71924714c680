/**
 * An in-process registry for tests: the OCI distribution read and write
 * paths, with no auth, Basic, or Bearer tokens from its own token endpoint,
 * optional redirects of blob downloads to a second origin ("CDN"), and knobs
 * to make it lie (wrong bytes for a digest).
 */
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export type FakeAuth =
  | { readonly kind: 'none' }
  | { readonly kind: 'basic'; readonly username: string; readonly password: string }
  | {
      readonly kind: 'bearer';
      readonly username?: string;
      readonly password?: string;
      readonly identityToken?: string;
    };

export interface FakeRegistryOptions {
  readonly auth?: FakeAuth;
  /** Answer blob GETs with a 307 to a second server. */
  readonly redirectBlobs?: boolean;
}

export interface RequestRecord {
  readonly method: string;
  readonly path: string;
  readonly authorization: string | undefined;
  readonly server: 'registry' | 'cdn' | 'token';
}

function sha256(b: Uint8Array): string {
  return `sha256:${createHash('sha256').update(b).digest('hex')}`;
}

async function body(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
  );
}

export class FakeRegistry {
  readonly blobs = new Map<string, Buffer>();
  /** repo → reference (tag or digest) → manifest. */
  readonly manifests = new Map<string, Map<string, { bytes: Buffer; mediaType: string }>>();
  readonly requests: RequestRecord[] = [];
  /** Digests whose content is served wrongly. */
  readonly corrupt = new Set<string>();
  /** Blob digests sent slowly, as over a real network: chunks of this many bytes, a few ms apart. */
  readonly trickle = new Map<string, number>();
  /** Tokens issued: token → scope. */
  readonly tokens = new Map<string, string>();
  tokenRequests = 0;
  readonly #registry: Server;
  readonly #cdn: Server;
  readonly #options: FakeRegistryOptions;
  port = 0;
  cdnPort = 0;

  private constructor(options: FakeRegistryOptions) {
    this.#options = options;
    this.#registry = createServer((req, res) => {
      this.#handle(req, res).catch((e: unknown) => {
        res.statusCode = 500;
        res.end(String(e));
      });
    });
    this.#cdn = createServer((req, res) => {
      this.requests.push({
        method: req.method ?? '',
        path: req.url ?? '',
        authorization: req.headers.authorization,
        server: 'cdn',
      });
      const digest = decodeURIComponent((req.url ?? '').split('/').pop() ?? '');
      const blob = this.blobs.get(digest);
      if (blob === undefined) {
        res.statusCode = 404;
        res.end();
        return;
      }
      res.setHeader('content-length', blob.byteLength);
      res.end(blob);
    });
  }

  static async start(options: FakeRegistryOptions = {}): Promise<FakeRegistry> {
    const r = new FakeRegistry(options);
    r.port = await listen(r.#registry);
    r.cdnPort = await listen(r.#cdn);
    return r;
  }

  get host(): string {
    return `127.0.0.1:${this.port}`;
  }

  async close(): Promise<void> {
    this.#registry.closeAllConnections();
    this.#cdn.closeAllConnections();
    await Promise.all([
      new Promise<void>((r) => this.#registry.close(() => r())),
      new Promise<void>((r) => this.#cdn.close(() => r())),
    ]);
  }

  putManifest(repo: string, reference: string, bytes: Buffer, mediaType: string): string {
    const m = this.manifests.get(repo) ?? new Map();
    this.manifests.set(repo, m);
    const digest = sha256(bytes);
    m.set(reference, { bytes, mediaType });
    m.set(digest, { bytes, mediaType });
    return digest;
  }

  #authorized(req: IncomingMessage, repo: string, push: boolean): boolean {
    const auth = this.#options.auth ?? { kind: 'none' };
    const header = req.headers.authorization;
    if (auth.kind === 'none') return true;
    if (auth.kind === 'basic') {
      return header === `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}`;
    }
    if (header === undefined || !header.startsWith('Bearer ')) return false;
    const scope = this.tokens.get(header.slice('Bearer '.length));
    return scope === `repository:${repo}:pull,push` || (!push && scope === `repository:${repo}:pull`);
  }

  #challenge(res: ServerResponse, repo: string, push: boolean): void {
    const auth = this.#options.auth ?? { kind: 'none' };
    res.statusCode = 401;
    if (auth.kind === 'basic') res.setHeader('www-authenticate', 'Basic realm="fake"');
    else {
      res.setHeader(
        'www-authenticate',
        `Bearer realm="http://127.0.0.1:${this.port}/token",service="fake-registry",scope="repository:${repo}:${push ? 'pull,push' : 'pull'}"`,
      );
    }
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ errors: [{ code: 'UNAUTHORIZED', message: 'authentication required' }] }));
  }

  async #token(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    this.tokenRequests++;
    this.requests.push({
      method: req.method ?? '',
      path: url.pathname,
      authorization: req.headers.authorization,
      server: 'token',
    });
    const auth = this.#options.auth;
    if (auth?.kind !== 'bearer') {
      res.statusCode = 404;
      res.end();
      return;
    }
    let scope = url.searchParams.get('scope') ?? '';
    if (req.method === 'POST') {
      const form = new URLSearchParams((await body(req)).toString());
      if (form.get('grant_type') !== 'refresh_token' || form.get('refresh_token') !== auth.identityToken) {
        res.statusCode = 401;
        res.end();
        return;
      }
      scope = form.get('scope') ?? '';
    } else if (auth.username !== undefined) {
      const expected = `Basic ${Buffer.from(`${auth.username}:${auth.password ?? ''}`).toString('base64')}`;
      if (req.headers.authorization !== expected) {
        res.statusCode = 401;
        res.end();
        return;
      }
    }
    const token = randomBytes(16).toString('hex');
    this.tokens.set(token, scope);
    res.setHeader('content-type', 'application/json');
    const key = req.method === 'POST' ? 'access_token' : 'token';
    res.end(JSON.stringify({ [key]: token, expires_in: 300 }));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', `http://${req.headers.host}`);
    if (url.pathname === '/token') return this.#token(req, res, url);
    this.requests.push({
      method: req.method ?? '',
      path: url.pathname,
      authorization: req.headers.authorization,
      server: 'registry',
    });
    const m = /^\/v2\/(.+)\/(manifests|blobs)\/(.+)$/.exec(url.pathname);
    const upload = /^\/v2\/(.+)\/blobs\/uploads\/(.*)$/.exec(url.pathname);
    const repo = upload?.[1] ?? m?.[1] ?? '';
    const push = req.method === 'POST' || req.method === 'PUT';
    if (!this.#authorized(req, repo, push)) return this.#challenge(res, repo, push);
    if (upload !== null) {
      if (req.method === 'POST') {
        res.statusCode = 202;
        res.setHeader('location', `/v2/${repo}/blobs/uploads/${randomBytes(8).toString('hex')}?_state=x`);
        res.end();
        return;
      }
      const data = await body(req);
      const digest = url.searchParams.get('digest') ?? '';
      if (sha256(data) !== digest) {
        res.statusCode = 400;
        res.end(JSON.stringify({ errors: [{ code: 'DIGEST_INVALID', message: 'digest mismatch' }] }));
        return;
      }
      this.blobs.set(digest, data);
      res.statusCode = 201;
      res.end();
      return;
    }
    if (m === null) {
      res.statusCode = url.pathname === '/v2/' ? 200 : 404;
      res.end('{}');
      return;
    }
    const ref = decodeURIComponent(m[3] ?? '');
    if (m[2] === 'manifests') {
      if (req.method === 'PUT') {
        this.putManifest(repo, ref, await body(req), String(req.headers['content-type'] ?? ''));
        res.statusCode = 201;
        res.end();
        return;
      }
      const found = this.manifests.get(repo)?.get(ref);
      if (found === undefined) {
        res.statusCode = 404;
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ errors: [{ code: 'MANIFEST_UNKNOWN', message: 'manifest unknown' }] }));
        return;
      }
      const bytes = this.corrupt.has(ref) ? Buffer.concat([found.bytes, Buffer.from(' ')]) : found.bytes;
      res.setHeader('content-type', found.mediaType);
      res.setHeader('docker-content-digest', sha256(found.bytes));
      res.setHeader('content-length', bytes.byteLength);
      res.end(req.method === 'HEAD' ? undefined : bytes);
      return;
    }
    const blob = this.blobs.get(ref);
    if (blob === undefined) {
      res.statusCode = 404;
      res.end(JSON.stringify({ errors: [{ code: 'BLOB_UNKNOWN', message: 'blob unknown' }] }));
      return;
    }
    if (req.method === 'GET' && this.#options.redirectBlobs === true) {
      res.statusCode = 307;
      res.setHeader('location', `http://127.0.0.1:${this.cdnPort}/cdn/${encodeURIComponent(ref)}`);
      res.end();
      return;
    }
    const served = this.corrupt.has(ref) ? Buffer.from(blob).fill(0x58, 0, 1) : blob;
    res.setHeader('content-length', served.byteLength);
    const chunk = this.trickle.get(ref);
    if (req.method === 'GET' && chunk !== undefined) {
      for (let off = 0; off < served.byteLength && !res.destroyed; off += chunk) {
        if (!res.write(served.subarray(off, off + chunk))) await once(res, 'drain');
        await sleep(5);
      }
      res.end();
      return;
    }
    res.end(req.method === 'HEAD' ? undefined : served);
  }
}
