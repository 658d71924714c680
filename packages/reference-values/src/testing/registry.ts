// A minimal OCI distribution server on loopback for the artifact tests: anonymous GET of manifests (by
// tag or digest) and blobs, from an in-memory map, with a request log.
import { createHash, type KeyObject } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSigstoreSignature, SIGSTORE_SIGNATURE_ANNOTATION } from '@broker/image';

export interface TestRegistry {
  readonly host: string;
  readonly requests: string[];
  /** Stores a blob; returns its descriptor. */
  blob(bytes: Buffer, mediaType: string, annotations?: Record<string, string>): Descriptor;
  /** Stores a manifest under a tag (and its digest); returns the digest. */
  manifest(repo: string, tag: string, doc: unknown, mediaType?: string): { digest: string; bytes: Buffer };
  /** A JSON artifact (one layer) under repo:tag; returns its manifest digest. */
  artifact(repo: string, tag: string, content: Buffer, layers?: number): string;
  /** Adds a cosign signature attachment for `digest`, signed by `key` for `dockerReference`. */
  sign(
    repo: string,
    digest: string,
    key: KeyObject,
    dockerReference: string,
    extra?: (payload: Uint8Array, base64Signature: string) => Record<string, string>,
    /** The digest the signed payload names, when it differs from the one the attachment is stored for. */
    payloadDigest?: string,
  ): void;
  /** Removes a stored object (manifest tag or blob digest). */
  drop(path: string): void;
  close(): Promise<void>;
}

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
}

const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const EMPTY_CONFIG = 'application/vnd.oci.empty.v1+json';

export async function startTestRegistry(): Promise<TestRegistry> {
  const objects = new Map<string, { body: Buffer; type: string }>();
  const requests: string[] = [];
  const server: Server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    const url = req.url ?? '';
    if (url === '/v2/' || url === '/v2') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      return;
    }
    const hit = objects.get(url);
    if (req.method !== 'GET' || hit === undefined) {
      const code = url.includes('/manifests/') ? 'MANIFEST_UNKNOWN' : 'BLOB_UNKNOWN';
      res
        .writeHead(404, { 'content-type': 'application/json' })
        .end(JSON.stringify({ errors: [{ code, message: 'unknown' }] }));
      return;
    }
    res.writeHead(200, { 'content-type': hit.type, 'content-length': hit.body.length }).end(hit.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  const blobs = new Map<string, Buffer>();
  const digestOf = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

  const reg: TestRegistry = {
    host,
    requests,
    blob(bytes, mediaType, annotations) {
      const digest = digestOf(bytes);
      blobs.set(digest, bytes);
      return { mediaType, digest, size: bytes.length, ...(annotations && { annotations }) };
    },
    manifest(repo, tag, doc, mediaType = OCI_MANIFEST) {
      const bytes = Buffer.from(JSON.stringify(doc));
      const digest = digestOf(bytes);
      objects.set(`/v2/${repo}/manifests/${tag}`, { body: bytes, type: mediaType });
      objects.set(`/v2/${repo}/manifests/${digest}`, { body: bytes, type: mediaType });
      for (const [d, b] of blobs)
        objects.set(`/v2/${repo}/blobs/${d}`, { body: b, type: 'application/octet-stream' });
      return { digest, bytes };
    },
    artifact(repo, tag, content, layers = 1) {
      const config = reg.blob(Buffer.from('{}'), EMPTY_CONFIG);
      const list = [
        reg.blob(content, 'application/vnd.oci.image.layer.v1.tar', {
          'org.opencontainers.image.title': 'measurements.json',
        }),
      ];
      for (let i = 1; i < layers; i++) {
        list.push(
          reg.blob(Buffer.from(`{"n":${i}}`), 'application/json', {
            'org.opencontainers.image.title': `extra-${i}.json`,
          }),
        );
      }
      return reg.manifest(repo, tag, {
        schemaVersion: 2,
        mediaType: OCI_MANIFEST,
        artifactType: 'application/vnd.broker.measurements+json',
        config,
        layers: list,
        // Distinct manifests per tag, so each tag has its own digest and signatures.
        annotations: { 'org.opencontainers.image.version': tag },
      }).digest;
    },
    sign(repo, digest, key, dockerReference, extra, payloadDigest = digest) {
      const sig = createSigstoreSignature(key, { manifestDigest: payloadDigest, dockerReference });
      const b64 = sig.annotations[SIGSTORE_SIGNATURE_ANNOTATION] as string;
      const layer = reg.blob(Buffer.from(sig.payload), sig.mimeType, {
        ...sig.annotations,
        ...extra?.(sig.payload, b64),
      });
      const config = reg.blob(Buffer.from('{}'), EMPTY_CONFIG);
      reg.manifest(repo, `${digest.replace(':', '-')}.sig`, {
        schemaVersion: 2,
        mediaType: OCI_MANIFEST,
        config,
        layers: [layer],
      });
    },
    drop(path) {
      objects.delete(path);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  return reg;
}
