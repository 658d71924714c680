/**
 * ocicrypt's `pkcs7` key protocol: the wrapped key is a CMS (PKCS#7)
 * `EnvelopedData` in DER whose content is the layer's private options,
 * with one key-transport recipient (RSA, PKCS#1 v1.5) per certificate.
 *
 * - Reading: what Go's ocicrypt writes through Mozilla's pkcs7
 *   (AES-128-GCM content, its GCM parameters wrapped in an extra
 *   universal-16 tag and the ciphertext in a constructed `[0]`), and what
 *   `openssl cms -encrypt` writes (AES-128/192/256-CBC, primitive `[0]`).
 *   Recipients are not matched by certificate: each RSA key is tried on
 *   each key-transport recipient, and a content key is accepted only when
 *   it has the algorithm's length and the content decrypts (GCM tag, CBC
 *   padding) to a JSON object.
 * - Writing: AES-256-CBC content, RSA PKCS#1 v1.5 key transport by issuer
 *   and serial number, which both Mozilla's pkcs7 (skopeo) and OpenSSL read.
 */

import {
  constants,
  createCipheriv,
  createDecipheriv,
  type KeyObject,
  privateDecrypt,
  publicEncrypt,
  randomBytes,
  X509Certificate,
} from 'node:crypto';
import { ImageError } from '../errors.js';
import {
  childrenOf,
  contents,
  DER,
  DerError,
  derItem,
  derOid,
  derSmallInteger,
  expectTag,
  oidString,
  readTlv,
  readWhole,
  type Tlv,
} from './der.js';
import type { KeyWrapper } from './encrypt.js';
import type { KeyUnwrapper } from './unwrap.js';

export const PKCS7_PROTOCOL = 'pkcs7';

const OID_ENVELOPED_DATA = '1.2.840.113549.1.7.3';
const OID_DATA = '1.2.840.113549.1.7.1';
const OID_RSA_ENCRYPTION = '1.2.840.113549.1.1.1';

interface ContentCipher {
  readonly name: 'aes-128-cbc' | 'aes-192-cbc' | 'aes-256-cbc' | 'aes-128-gcm' | 'aes-256-gcm';
  readonly keyBytes: number;
}
const CONTENT_CIPHERS: Readonly<Record<string, ContentCipher>> = {
  '2.16.840.1.101.3.4.1.2': { name: 'aes-128-cbc', keyBytes: 16 },
  '2.16.840.1.101.3.4.1.22': { name: 'aes-192-cbc', keyBytes: 24 },
  '2.16.840.1.101.3.4.1.42': { name: 'aes-256-cbc', keyBytes: 32 },
  '2.16.840.1.101.3.4.1.6': { name: 'aes-128-gcm', keyBytes: 16 },
  '2.16.840.1.101.3.4.1.46': { name: 'aes-256-gcm', keyBytes: 32 },
};
const OID_AES_256_CBC = '2.16.840.1.101.3.4.1.42';

interface EnvelopedData {
  /** The encrypted content keys of the RSA key-transport recipients. */
  readonly encryptedKeys: readonly Uint8Array[];
  readonly cipher: ContentCipher;
  /** CBC: the IV; GCM: the nonce. */
  readonly iv: Uint8Array;
  /** GCM: the tag length (the tag ends the ciphertext). */
  readonly tagBytes: number;
  readonly ciphertext: Uint8Array;
}

/** Parses a ContentInfo holding an EnvelopedData. Throws `DerError` with what is wrong. */
export function parseEnvelopedData(bytes: Uint8Array): EnvelopedData {
  const info = expectTag(readWhole(bytes, 'ContentInfo'), DER.SEQUENCE, 'ContentInfo');
  const [type, explicit] = childrenOf(bytes, info, 'ContentInfo');
  const contentType = oidString(bytes, expectTag(type, DER.OID, 'ContentInfo type'), 'ContentInfo type');
  if (contentType !== OID_ENVELOPED_DATA)
    throw new DerError(`ContentInfo: ${contentType} is not envelopedData`);
  const wrapper = childrenOf(bytes, expectTag(explicit, 0xa0, 'ContentInfo content'), 'ContentInfo content');
  if (wrapper.length !== 1) throw new DerError('ContentInfo content: expected one EnvelopedData');
  const fields = childrenOf(bytes, expectTag(wrapper[0], DER.SEQUENCE, 'EnvelopedData'), 'EnvelopedData');
  let i = 1; // after the version
  expectTag(fields[0], DER.INTEGER, 'EnvelopedData version');
  if (fields[i]?.tag === 0xa0) i++; // originatorInfo
  const recipients = childrenOf(bytes, expectTag(fields[i], DER.SET, 'recipientInfos'), 'recipientInfos');
  if (recipients.length > 64) throw new DerError('recipientInfos: more than 64 recipients');
  const encryptedKeys: Uint8Array[] = [];
  for (const r of recipients) {
    // Only KeyTransRecipientInfo is a SEQUENCE; the other kinds are context-tagged and skipped.
    if (r.tag !== DER.SEQUENCE) continue;
    const [, , algorithm, encryptedKey] = childrenOf(bytes, r, 'KeyTransRecipientInfo');
    const algorithmFields = childrenOf(
      bytes,
      expectTag(algorithm, DER.SEQUENCE, 'keyEncryptionAlgorithm'),
      'keyEncryptionAlgorithm',
    );
    const oid = oidString(bytes, algorithmFields[0] as Tlv, 'keyEncryptionAlgorithm');
    if (oid !== OID_RSA_ENCRYPTION) continue;
    encryptedKeys.push(contents(bytes, expectTag(encryptedKey, DER.OCTET_STRING, 'encryptedKey')));
  }
  const eci = childrenOf(
    bytes,
    expectTag(fields[i + 1], DER.SEQUENCE, 'encryptedContentInfo'),
    'encryptedContentInfo',
  );
  const algorithm = childrenOf(
    bytes,
    expectTag(eci[1], DER.SEQUENCE, 'contentEncryptionAlgorithm'),
    'contentEncryptionAlgorithm',
  );
  const cipherOid = oidString(bytes, algorithm[0] as Tlv, 'contentEncryptionAlgorithm');
  const cipher = CONTENT_CIPHERS[cipherOid];
  if (cipher === undefined) throw new DerError(`unsupported content encryption algorithm ${cipherOid}`);
  let iv: Uint8Array;
  let tagBytes = 0;
  if (cipher.name.endsWith('cbc')) {
    iv = contents(bytes, expectTag(algorithm[1], DER.OCTET_STRING, 'CBC IV'));
    if (iv.byteLength !== 16) throw new DerError(`CBC IV has ${iv.byteLength} bytes, expected 16`);
  } else {
    // GCMParameters ::= SEQUENCE { aes-nonce OCTET STRING, aes-ICVlen INTEGER DEFAULT 12 }. Mozilla's
    // pkcs7 puts that SEQUENCE inside a primitive universal-16 item and tags the nonce [4].
    let params = algorithm[1];
    const mozilla = params?.tag === 0x10;
    if (params !== undefined && mozilla) params = readTlv(bytes, params.start, params.end, 'GCM parameters');
    const [nonce, icvLength] = childrenOf(bytes, expectTag(params, DER.SEQUENCE, 'GCM parameters'), 'GCM');
    iv = contents(
      bytes,
      expectTag(nonce, mozilla && nonce?.tag === 0x84 ? 0x84 : DER.OCTET_STRING, 'GCM nonce'),
    );
    if (iv.byteLength < 12 || iv.byteLength > 16) throw new DerError(`GCM nonce has ${iv.byteLength} bytes`);
    tagBytes =
      icvLength === undefined
        ? 12
        : (contents(bytes, expectTag(icvLength, DER.INTEGER, 'GCM ICV length'))[0] ?? 0);
    if (tagBytes < 12 || tagBytes > 16) throw new DerError(`GCM ICV length ${tagBytes} is out of range`);
  }
  const encrypted = eci[2];
  let ciphertext: Uint8Array;
  if (encrypted?.tag === 0x80) ciphertext = contents(bytes, encrypted);
  else if (encrypted?.tag === 0xa0) {
    ciphertext = Buffer.concat(
      childrenOf(bytes, encrypted, 'encryptedContent').map((part) =>
        contents(bytes, expectTag(part, DER.OCTET_STRING, 'encryptedContent part')),
      ),
    );
  } else throw new DerError('encryptedContentInfo: no encryptedContent');
  if (ciphertext.byteLength <= tagBytes) throw new DerError('encryptedContent is too short');
  return { encryptedKeys, cipher, iv, tagBytes, ciphertext };
}

function decryptContent(data: EnvelopedData, key: Buffer): Buffer | undefined {
  if (key.byteLength !== data.cipher.keyBytes) return undefined;
  try {
    if (data.tagBytes > 0) {
      const body = data.ciphertext.subarray(0, data.ciphertext.byteLength - data.tagBytes);
      const d = createDecipheriv(data.cipher.name as 'aes-128-gcm', key, data.iv, {
        authTagLength: data.tagBytes,
      });
      d.setAuthTag(data.ciphertext.subarray(body.byteLength));
      return Buffer.concat([d.update(body), d.final()]);
    }
    const d = createDecipheriv(data.cipher.name, key, data.iv);
    return Buffer.concat([d.update(data.ciphertext), d.final()]);
  } catch {
    return undefined;
  }
}

function isJsonObject(bytes: Buffer): boolean {
  try {
    const v: unknown = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
    return typeof v === 'object' && v !== null && !Array.isArray(v);
  } catch {
    return false;
  }
}

/** Unwraps `pkcs7` keys with any of the RSA private `keys`. */
export function pkcs7Unwrapper(keys: readonly KeyObject[]): KeyUnwrapper {
  return {
    protocol: PKCS7_PROTOCOL,
    async unwrap(blob) {
      let data: EnvelopedData;
      try {
        data = parseEnvelopedData(blob);
      } catch (e) {
        throw new ImageError(`the pkcs7 packet is not an EnvelopedData: ${(e as Error).message}`, {
          code: 'KEY_PACKET_INVALID',
        });
      }
      if (data.encryptedKeys.length === 0)
        return { failed: 'no RSA key-transport recipient in the EnvelopedData' };
      let refused: string | undefined;
      for (const key of keys) {
        if (key.asymmetricKeyType !== 'rsa') continue;
        for (const encryptedKey of data.encryptedKeys) {
          let contentKey: Buffer;
          try {
            // OpenSSL 3.2+'s implicit rejection: a wrong key gives a random content key, not an error.
            // A Node whose OpenSSL lacks it refuses PKCS#1 v1.5 decryption outright (CVE-2023-46809).
            contentKey = privateDecrypt({ key, padding: constants.RSA_PKCS1_PADDING }, encryptedKey);
          } catch (e) {
            // A ciphertext above the modulus is only another key's: the normal "not this key", which
            // random keys give about half the time. Any other refusal is worth naming.
            const message = (e as Error).message;
            if (!/too large for modulus|greater than mod len/i.test(message)) refused = message;
            continue;
          }
          const plain = decryptContent(data, contentKey);
          if (plain !== undefined && isJsonObject(plain)) return plain;
        }
      }
      return {
        failed: `none of the RSA private keys opens the EnvelopedData${refused !== undefined ? ` (${refused})` : ''}`,
      };
    },
  };
}

/** Reads a PEM or DER X.509 certificate with an RSA key (ocicrypt's `pkcs7:CERT`). */
export function parsePkcs7Certificate(bytes: Uint8Array, name = 'certificate'): X509Certificate {
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(bytes);
  } catch (e) {
    throw new ImageError(`${name}: not an X.509 certificate: ${(e as Error).message}`, {
      code: 'KEY_UNUSABLE',
    });
  }
  if (cert.publicKey.asymmetricKeyType !== 'rsa')
    throw new ImageError(
      `${name}: a ${cert.publicKey.asymmetricKeyType} key cannot receive a pkcs7 key (RSA only)`,
      { code: 'KEY_UNUSABLE' },
    );
  return cert;
}

/** IssuerAndSerialNumber, copied from the certificate's own DER. */
function issuerAndSerial(cert: X509Certificate): Buffer {
  const der = cert.raw;
  const certificate = readWhole(der, 'certificate');
  const tbs = childrenOf(
    der,
    expectTag(childrenOf(der, certificate, 'certificate')[0], DER.SEQUENCE, 'tbs'),
    'tbs',
  );
  const offset = tbs[0]?.tag === 0xa0 ? 1 : 0; // [0] version
  const serial = expectTag(tbs[offset], DER.INTEGER, 'serialNumber');
  const issuer = expectTag(tbs[offset + 2], DER.SEQUENCE, 'issuer');
  return derItem(
    DER.SEQUENCE,
    der.subarray(issuer.headerStart, issuer.end),
    der.subarray(serial.headerStart, serial.end),
  );
}

/** Wraps the private options in one EnvelopedData for every certificate's RSA key. */
export function pkcs7Wrapper(certs: readonly X509Certificate[]): KeyWrapper {
  return {
    protocol: PKCS7_PROTOCOL,
    async wrap(privateOptions) {
      const contentKey = randomBytes(32);
      const iv = randomBytes(16);
      const c = createCipheriv('aes-256-cbc', contentKey, iv);
      const ciphertext = Buffer.concat([c.update(privateOptions), c.final()]);
      const recipients = certs.map((cert) =>
        derItem(
          DER.SEQUENCE,
          derSmallInteger(0),
          issuerAndSerial(cert),
          derItem(DER.SEQUENCE, derOid(OID_RSA_ENCRYPTION), derItem(DER.NULL)),
          derItem(
            DER.OCTET_STRING,
            publicEncrypt({ key: cert.publicKey, padding: constants.RSA_PKCS1_PADDING }, contentKey),
          ),
        ),
      );
      const enveloped = derItem(
        DER.SEQUENCE,
        derSmallInteger(0),
        derItem(DER.SET, ...recipients),
        derItem(
          DER.SEQUENCE,
          derOid(OID_DATA),
          derItem(DER.SEQUENCE, derOid(OID_AES_256_CBC), derItem(DER.OCTET_STRING, iv)),
          derItem(0x80, ciphertext),
        ),
      );
      return derItem(DER.SEQUENCE, derOid(OID_ENVELOPED_DATA), derItem(0xa0, enveloped));
    },
  };
}
