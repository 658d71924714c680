// Resource JWEs (trustee kbs/src/jwe) with the recipient's key prepared once. Checking a TEE key and
// importing it into OpenSSL costs about as much as the ECDH itself, and a guest fetches several resources
// with the same key (its token carries it), so the checked key is kept per exact key members in a
// bounded cache. The output is byte-for-byte the format of @broker/protocol's jweEncrypt (flattened JSON,
// serde-ordered protected header, A256GCM with the protected header as AAD); key/algorithm combinations
// other than the two below are handed to jweEncrypt, which refuses them with its own errors.
import {
  createCipheriv,
  createPublicKey,
  createSecretKey,
  constants as cryptoConstants,
  diffieHellman,
  generateKeyPairSync,
  type KeyObject,
  publicEncrypt,
  randomFillSync,
} from 'node:crypto';
import { BoundedCache } from '@broker/kv-storage';
import {
  concatKdf,
  decodeBase64UrlStrict,
  JWE_ALG_ECDH_ES_A256KW,
  JWE_ALG_RSA_OAEP_256,
  JWE_ENC_A256GCM,
  type Jwe,
  jweEncrypt,
  ProtocolError,
  parseTeePubKey,
  serializeProtectedHeader,
  type TeePubKey,
} from '@broker/protocol';

const CEK_BYTES = 32;
const IV_BYTES = 12;
const AES_KW_IV = Buffer.from('A6A6A6A6A6A6A6A6', 'hex');
/** Distinct TEE keys kept prepared (they come from verified tokens), by count and estimated bytes. */
export const PREPARED_KEY_CACHE_SIZE = 4096;
const PREPARED_KEY_CACHE_BYTES = 16 * 1024 * 1024;
/** A KeyObject and its wrapper, on top of the id text. */
const PREPARED_KEY_OVERHEAD = 2048;

const EC_CURVES: Readonly<Record<string, { openssl: string; size: number; p: bigint }>> = {
  'P-256': {
    openssl: 'prime256v1',
    size: 32,
    p: 0xffffffff00000001000000000000000000000000ffffffffffffffffffffffffn,
  },
  'P-521': { openssl: 'secp521r1', size: 66, p: (1n << 521n) - 1n },
};

const bigFrom = (b: Uint8Array) => BigInt(`0x${Buffer.from(b).toString('hex') || '0'}`);

/**
 * CEKs and IVs come from a block of CSPRNG output drawn 4 KiB at a time: one randomFillSync per ~90 JWEs
 * instead of two per JWE, each of which costs a round trip into OpenSSL's DRBG. A used block is never
 * refilled (a new one is allocated), so the bytes handed out are never reused or overwritten.
 */
const RANDOM_BLOCK_BYTES = 4096;
let randomBlock = Buffer.alloc(0);
let randomOffset = 0;

/** `n` fresh random bytes (n ≤ RANDOM_BLOCK_BYTES), a view into the current block. */
function randomPart(n: number): Buffer {
  if (randomOffset + n > randomBlock.length) {
    randomBlock = randomFillSync(Buffer.allocUnsafeSlow(RANDOM_BLOCK_BYTES));
    randomOffset = 0;
  }
  const out = randomBlock.subarray(randomOffset, randomOffset + n);
  randomOffset += n;
  return out;
}

type Prepared =
  | {
      readonly kind: 'ecdh';
      readonly openssl: string;
      readonly key: KeyObject;
      /** The protected header up to the ephemeral key's coordinates. */
      readonly headerStart: string;
    }
  | { readonly kind: 'rsa-oaep'; readonly key: KeyObject; readonly header: string };

/** The members that define the key, in a fixed order: equal keys give equal cache ids. */
function cacheId(k: TeePubKey): string {
  return k.kty === 'EC'
    ? JSON.stringify(['EC', k.crv, k.alg, k.x, k.y])
    : JSON.stringify(['RSA', k.alg, k.n, k.e]);
}

function finish(header: string, encryptedKey: Uint8Array, cek: Buffer, plaintext: Uint8Array): Jwe {
  const protectedB64 = Buffer.from(header, 'utf8').toString('base64url');
  const iv = randomPart(IV_BYTES);
  // A KeyObject, because node:crypto checks a Buffer key through a thrown-and-caught type test that costs
  // more than the encryption of a small secret.
  const c = createCipheriv('aes-256-gcm', createSecretKey(cek), iv, { authTagLength: 16 });
  c.setAAD(Buffer.from(protectedB64, 'ascii'));
  const ciphertext = Buffer.concat([c.update(plaintext), c.final()]);
  const tag = c.getAuthTag();
  cek.fill(0);
  return {
    protected: protectedB64,
    encrypted_key: Buffer.from(encryptedKey).toString('base64url'),
    iv: iv.toString('base64url'),
    ciphertext: ciphertext.toString('base64url'),
    tag: tag.toString('base64url'),
  };
}

export class JweEncrypter {
  private readonly prepared: BoundedCache<string, Prepared>;

  constructor(cacheSize = PREPARED_KEY_CACHE_SIZE) {
    this.prepared = new BoundedCache({ maxEntries: cacheSize, maxBytes: PREPARED_KEY_CACHE_BYTES });
  }

  /** Prepared keys currently cached. */
  get size(): number {
    return this.prepared.usage.entries;
  }

  /** The checked, imported key; undefined for combinations jweEncrypt alone decides about. */
  private prepare(recipient: TeePubKey): Prepared | undefined {
    const id = cacheId(recipient);
    const hit = this.prepared.get(id);
    if (hit !== undefined) return hit;
    let p: Prepared | undefined;
    const r = recipient;
    if (r.kty === 'EC' && r.alg === JWE_ALG_ECDH_ES_A256KW && Object.hasOwn(EC_CURVES, r.crv)) {
      // One import checks it all: OpenSSL refuses coordinates of the wrong size, outside the field or off
      // the curve (parseTeePubKey would import it a second time just to check).
      const curve = EC_CURVES[r.crv] as { openssl: string; size: number; p: bigint };
      const x = decodeBase64UrlStrict(r.x);
      const y = decodeBase64UrlStrict(r.y);
      if (x === null || y === null || x.length !== curve.size || y.length !== curve.size) {
        throw new ProtocolError(
          'tee-pubkey',
          `x and y must be ${curve.size} bytes of base64url for ${r.crv}`,
        );
      }
      if (bigFrom(x) >= curve.p || bigFrom(y) >= curve.p) {
        throw new ProtocolError('tee-pubkey', 'coordinate is not a field element');
      }
      let key: KeyObject;
      try {
        key = createPublicKey({ key: { kty: 'EC', crv: r.crv, x: r.x, y: r.y }, format: 'jwk' });
      } catch (cause) {
        throw new ProtocolError('tee-pubkey', `point is not on curve ${r.crv}`, { cause });
      }
      const headerStart = `{"alg":"${JWE_ALG_ECDH_ES_A256KW}","enc":"${JWE_ENC_A256GCM}","epk":{"crv":"${r.crv}","kty":"EC",`;
      p = { kind: 'ecdh', openssl: curve.openssl, key, headerStart };
    } else if (r.kty === 'RSA' && r.alg === JWE_ALG_RSA_OAEP_256) {
      // Modulus size and exponent rules: parseTeePubKey's checks, then the import.
      const key = parseTeePubKey(r);
      if (key.kty !== 'RSA') return undefined;
      p = {
        kind: 'rsa-oaep',
        key: createPublicKey({ key: { kty: 'RSA', n: key.n, e: key.e }, format: 'jwk' }),
        header: serializeProtectedHeader({ alg: JWE_ALG_RSA_OAEP_256, enc: JWE_ENC_A256GCM }),
      };
    }
    if (p === undefined) return undefined;
    this.prepared.set(id, p, id.length + PREPARED_KEY_OVERHEAD);
    return p;
  }

  /** Encrypts to the TEE key; throws as @broker/protocol's jweEncrypt does for keys it refuses. */
  encrypt(plaintext: Uint8Array, recipient: TeePubKey): Jwe {
    const p = this.prepare(recipient);
    if (p === undefined) return jweEncrypt(plaintext, recipient);
    const cek = randomPart(CEK_BYTES);
    if (p.kind === 'rsa-oaep') {
      const encryptedKey = publicEncrypt(
        { key: p.key, padding: cryptoConstants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
        cek,
      );
      return finish(p.header, encryptedKey, cek, plaintext);
    }
    const eph = generateKeyPairSync('ec', { namedCurve: p.openssl });
    const z = diffieHellman({ privateKey: eph.privateKey, publicKey: p.key });
    const kek = concatKdf(z, JWE_ALG_ECDH_ES_A256KW, 256);
    z.fill(0);
    const wrap = createCipheriv('id-aes256-wrap', createSecretKey(kek), AES_KW_IV);
    const encryptedKey = Buffer.concat([wrap.update(cek), wrap.final()]);
    kek.fill(0);
    const epk = eph.publicKey.export({ format: 'jwk' });
    // serializeProtectedHeader's output for this header (members sorted as serde writes them), put
    // together directly: base64url coordinates need no escaping.
    const header = `${p.headerStart}"x":"${epk.x}","y":"${epk.y}"}}`;
    return finish(header, encryptedKey, cek, plaintext);
  }
}
