// The EAR token signer: a configured P-256 key (and optional certificate
// chain), or an ephemeral key made at start. Signing uses node:crypto directly
// (synchronous, no WebCrypto round trip) because it runs once per attestation.
import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type JsonWebKey,
  type KeyObject,
  sign,
  X509Certificate,
} from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { ConfigError } from '@broker/cli';
import { derToP1363 } from '@broker/protocol';
import type { TokenSignerConfig } from './config.js';

/** Certificates and keys are small; a larger file is a wrong path, not a key. */
const MAX_PEM_BYTES = 1024 * 1024;
const CERT_RE = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;
const WHERE = '[attestation_service.attestation_token_broker.signer]';

export interface TokenSigner {
  /** The header jwk, members in the order trustee's jsonwebtoken writes them. */
  readonly publicJwk: JsonWebKey;
  readonly certChainPem?: string;
  /** base64url of the JWT header, fixed for the signer's lifetime. */
  readonly encodedHeader: string;
  /** `header.payload.signature` for an already-serialized payload. */
  signJwt(payloadJson: string): string;
}

async function readPem(path: string, key: string): Promise<string> {
  let buf: Buffer;
  try {
    buf = await readFile(path);
  } catch (e) {
    throw new ConfigError(`${WHERE} ${key}: cannot read ${JSON.stringify(path)}: ${(e as Error).message}`, {
      cause: e,
    });
  }
  if (buf.length > MAX_PEM_BYTES)
    throw new ConfigError(`${WHERE} ${key}: ${JSON.stringify(path)} is too large`);
  return buf.toString('utf8');
}

function headerJwk(key: KeyObject, certUrl: string | undefined, x5c: string[] | undefined): JsonWebKey {
  const pub = key.export({ format: 'jwk' });
  return {
    alg: 'ES256',
    ...(certUrl !== undefined ? { x5u: certUrl } : {}),
    ...(x5c !== undefined ? { x5c } : {}),
    kty: 'EC',
    crv: 'P-256',
    x: pub.x,
    y: pub.y,
  } as JsonWebKey;
}

export function createSigner(
  privateKey: KeyObject,
  options: { certUrl?: string; chain?: X509Certificate[]; chainPem?: string } = {},
): TokenSigner {
  if (privateKey.asymmetricKeyType !== 'ec' || privateKey.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new ConfigError(`${WHERE} key_path: only P-256 attestation token signing keys are supported`);
  }
  if (privateKey.type !== 'private') throw new ConfigError(`${WHERE} key_path: a private key is required`);
  const publicKey = createPublicKey(privateKey);
  const x5c = options.chain?.map((c) => c.raw.toString('base64'));
  const leaf = options.chain?.[0];
  if (leaf !== undefined && !leaf.publicKey.equals(publicKey)) {
    // Tokens would never verify against the chain; better to refuse to start.
    throw new ConfigError(
      `${WHERE} cert_path: the first certificate does not hold the signing key's public key`,
    );
  }
  const publicJwk = headerJwk(publicKey, options.certUrl, x5c);
  const header = Buffer.from(JSON.stringify({ typ: 'JWT', alg: 'ES256', jwk: publicJwk })).toString(
    'base64url',
  );
  return {
    publicJwk,
    ...(options.chainPem !== undefined ? { certChainPem: options.chainPem } : {}),
    encodedHeader: header,
    signJwt(payloadJson) {
      const signingInput = `${header}.${Buffer.from(payloadJson, 'utf8').toString('base64url')}`;
      // A bare KeyObject (DER signature, converted here) skips node:crypto's slow options path.
      const der = sign('sha256', Buffer.from(signingInput, 'ascii'), privateKey);
      return `${signingInput}.${derToP1363(der, 32).toString('base64url')}`;
    },
  };
}

/** A signer for the configured key, or an ephemeral P-256 key when none is configured. */
export async function loadSigner(cfg: TokenSignerConfig | undefined): Promise<TokenSigner> {
  if (cfg === undefined) {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    return createSigner(privateKey);
  }
  const keyPem = await readPem(cfg.keyPath, 'key_path');
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey({ key: keyPem, format: 'pem' });
  } catch (e) {
    throw new ConfigError(`${WHERE} key_path: ${JSON.stringify(cfg.keyPath)} is not a PEM private key`, {
      cause: e,
    });
  }
  let chain: X509Certificate[] | undefined;
  let chainPem: string | undefined;
  if (cfg.certPath !== undefined) {
    chainPem = await readPem(cfg.certPath, 'cert_path');
    const blocks = chainPem.match(CERT_RE) ?? [];
    if (blocks.length === 0) {
      throw new ConfigError(`${WHERE} cert_path: ${JSON.stringify(cfg.certPath)} holds no PEM certificate`);
    }
    try {
      chain = blocks.map((b) => new X509Certificate(b));
    } catch (e) {
      throw new ConfigError(
        `${WHERE} cert_path: ${JSON.stringify(cfg.certPath)} holds an invalid certificate`,
        {
          cause: e,
        },
      );
    }
  }
  return createSigner(privateKey, {
    ...(cfg.certUrl !== undefined ? { certUrl: cfg.certUrl } : {}),
    ...(chain !== undefined ? { chain } : {}),
    ...(chainPem !== undefined ? { chainPem } : {}),
  });
}
