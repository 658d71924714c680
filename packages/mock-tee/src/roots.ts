// The mock's hardware root: a test ARK and ASK in AMD's shape (RSA-4096, RSASSA-PSS with SHA-384,
// MGF1-SHA-384, salt 48) and a P-384 VCEK carrying AMD's VCEK extensions (TCB SPLs, hardware ID,
// product name). Real VCEKs chain to AMD's ARK; these chain to a root the mock made, which a
// verifier trusts only when it is configured with it.
import { makeDirectory } from '@broker/cli';
import 'reflect-metadata';
import { createPrivateKey, KeyObject, randomBytes, webcrypto } from 'node:crypto';
import { chmod, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TcbVersion } from '@broker/verifier';
import * as x509 from '@peculiar/x509';
import { MockTeeError } from './errors.js';

export type { TcbVersion };

// Node's WebCrypto is the provider; @peculiar/x509 types it with the DOM's Crypto.
x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

/** AMD's VCEK certificate extensions (VCEK specification, "VCEK Certificate Extensions"). */
export const VCEK_OID = Object.freeze({
  structVersion: '1.3.6.1.4.1.3704.1.1',
  productName: '1.3.6.1.4.1.3704.1.2',
  bootloader: '1.3.6.1.4.1.3704.1.3.1',
  tee: '1.3.6.1.4.1.3704.1.3.2',
  snp: '1.3.6.1.4.1.3704.1.3.3',
  spl4: '1.3.6.1.4.1.3704.1.3.4',
  spl5: '1.3.6.1.4.1.3704.1.3.5',
  spl6: '1.3.6.1.4.1.3704.1.3.6',
  spl7: '1.3.6.1.4.1.3704.1.3.7',
  microcode: '1.3.6.1.4.1.3704.1.3.8',
  hwid: '1.3.6.1.4.1.3704.1.4',
} as const);

/** The TCB of the Azure Milan host in trustee's az-snp-vtpm fixture. */
export const DEFAULT_TCB: TcbVersion = Object.freeze({ bootloader: 3, tee: 0, snp: 8, microcode: 115 });
export const PRODUCT_NAME = 'Milan';
export const CHIP_ID_SIZE = 64;

export interface HardwareRoots {
  readonly arkPem: string;
  readonly askPem: string;
  readonly vcekPem: string;
  readonly vcekDer: Buffer;
  /** Signs the SNP reports; never leaves the device's state folder. */
  readonly vcekPrivateKey: KeyObject;
  /** The ARK's key, only for roots created in this process (never stored): signs a mock KDS's CRL. */
  readonly arkPrivateKey?: KeyObject;
  /** The chip's ID as the VCEK's hwid extension and every report's CHIP_ID carry it. */
  readonly chipId: Buffer;
  /** The TCB the VCEK was issued for; reports claim exactly this. */
  readonly tcb: TcbVersion;
  readonly productName: string;
}

export interface CreateRootsOptions {
  readonly tcb?: TcbVersion;
  /** 64 bytes; random by default. */
  readonly chipId?: Uint8Array;
  /** RSA modulus size of the ARK and ASK: AMD's 4096 by default (smaller only to speed up tests). */
  readonly rsaBits?: number;
  /** Start of every certificate's validity; one day ago by default. */
  readonly notBefore?: Date;
}

const DAY = 86_400_000;
const RSA_PSS = { name: 'RSA-PSS', hash: 'SHA-384', publicExponent: new Uint8Array([1, 0, 1]) } as const;
const PSS_SIGNING = { name: 'RSA-PSS', saltLength: 48 } as const;

function amdName(cn: string): string {
  // AMD's subject layout; the OU marks these as the mock's, so logs never confuse them with AMD's.
  return `OU=Mock TEE test root, C=US, L=Santa Clara, ST=CA, O=Advanced Micro Devices, CN=${cn}`;
}

/** DER INTEGER for a small non-negative number (the SPL extensions hold these). */
function derSmallInteger(n: number): Uint8Array {
  if (!Number.isInteger(n) || n < 0 || n > 255) throw new RangeError(`SPL ${n} is not an integer 0-255`);
  return n >= 0x80 ? Uint8Array.of(0x02, 0x02, 0x00, n) : Uint8Array.of(0x02, 0x01, n);
}

function derIa5String(s: string): Uint8Array {
  const body = Buffer.from(s, 'ascii');
  if (body.length > 127) throw new RangeError('IA5String too long');
  return Uint8Array.of(0x16, body.length, ...body);
}

function checkTcb(tcb: TcbVersion): void {
  for (const [k, v] of Object.entries(tcb)) {
    if (!Number.isInteger(v) || v < 0 || v > 255)
      throw new RangeError(`TCB ${k} ${v} is not an integer 0-255`);
  }
}

function vcekExtensions(tcb: TcbVersion, chipId: Uint8Array, productName: string): x509.Extension[] {
  const ext = (oid: string, value: Uint8Array) => new x509.Extension(oid, false, value);
  return [
    ext(VCEK_OID.structVersion, derSmallInteger(0)),
    ext(VCEK_OID.productName, derIa5String(productName)),
    ext(VCEK_OID.bootloader, derSmallInteger(tcb.bootloader)),
    ext(VCEK_OID.tee, derSmallInteger(tcb.tee)),
    ext(VCEK_OID.spl4, derSmallInteger(0)),
    ext(VCEK_OID.spl5, derSmallInteger(0)),
    ext(VCEK_OID.spl6, derSmallInteger(0)),
    ext(VCEK_OID.spl7, derSmallInteger(0)),
    ext(VCEK_OID.snp, derSmallInteger(tcb.snp)),
    ext(VCEK_OID.microcode, derSmallInteger(tcb.microcode)),
    // The raw 64 bytes, as the Milan VCEKs Azure serves hold it (newer ones wrap it in an OCTET STRING).
    ext(VCEK_OID.hwid, chipId),
  ];
}

/** Generates a fresh ARK, an ASK it signed, and a VCEK the ASK signed. */
export async function createHardwareRoots(options: CreateRootsOptions = {}): Promise<HardwareRoots> {
  const tcb = options.tcb ?? DEFAULT_TCB;
  checkTcb(tcb);
  const chipId = Buffer.from(options.chipId ?? randomBytes(CHIP_ID_SIZE));
  if (chipId.length !== CHIP_ID_SIZE) throw new RangeError(`chip ID must be ${CHIP_ID_SIZE} bytes`);
  const rsaBits = options.rsaBits ?? 4096;
  const notBefore = options.notBefore ?? new Date(Date.now() - DAY);
  const longLived = new Date(notBefore.getTime() + 25 * 365 * DAY);
  const subtle = webcrypto.subtle;
  const rsaKeys = () =>
    subtle.generateKey({ ...RSA_PSS, modulusLength: rsaBits }, true, [
      'sign',
      'verify',
    ]) as Promise<webcrypto.CryptoKeyPair>;
  const [arkKeys, askKeys] = await Promise.all([rsaKeys(), rsaKeys()]);
  const vcekKeys = (await subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-384' }, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;

  const arkName = amdName(`ARK-${PRODUCT_NAME}`);
  const askName = amdName(`SEV-${PRODUCT_NAME}`);
  const ark = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '010000',
    name: arkName,
    notBefore,
    notAfter: longLived,
    keys: arkKeys,
    signingAlgorithm: PSS_SIGNING,
    extensions: [
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(arkKeys.publicKey),
      new x509.BasicConstraintsExtension(true, undefined, true),
    ],
  });
  const ask = await x509.X509CertificateGenerator.create({
    serialNumber: '010001',
    subject: askName,
    issuer: arkName,
    notBefore,
    notAfter: longLived,
    publicKey: askKeys.publicKey,
    signingKey: arkKeys.privateKey,
    signingAlgorithm: PSS_SIGNING,
    extensions: [
      await x509.SubjectKeyIdentifierExtension.create(askKeys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(arkKeys.publicKey),
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true),
    ],
  });
  const vcek = await x509.X509CertificateGenerator.create({
    serialNumber: '00',
    subject: amdName('SEV-VCEK'),
    issuer: askName,
    notBefore,
    notAfter: new Date(notBefore.getTime() + 7 * 365 * DAY),
    publicKey: vcekKeys.publicKey,
    signingKey: askKeys.privateKey,
    signingAlgorithm: PSS_SIGNING,
    extensions: vcekExtensions(tcb, chipId, PRODUCT_NAME),
  });
  const pkcs8 = Buffer.from(await subtle.exportKey('pkcs8', vcekKeys.privateKey));
  return {
    arkPem: `${ark.toString('pem')}\n`,
    askPem: `${ask.toString('pem')}\n`,
    vcekPem: `${vcek.toString('pem')}\n`,
    vcekDer: Buffer.from(vcek.rawData),
    vcekPrivateKey: createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' }),
    arkPrivateKey: KeyObject.from(arkKeys.privateKey),
    chipId,
    tcb,
    productName: PRODUCT_NAME,
  };
}

/** File names under the roots folder. */
export const ROOT_FILES = Object.freeze({
  ark: 'ark.pem',
  ask: 'ask.pem',
  vcek: 'vcek.pem',
  vcekKey: 'vcek-key.pem',
  /** ARK then ASK: the bundle a verifier is configured to trust. */
  bundle: 'amd-roots.pem',
  /** ASK then ARK, as Azure's IMDS `certificateChain` lists them. */
  certChain: 'cert-chain.pem',
} as const);

/** The PEM bundle (ARK, ASK) that the KBS verifier is configured with to accept the mock. */
export function rootBundlePem(roots: Pick<HardwareRoots, 'arkPem' | 'askPem'>): string {
  return roots.arkPem + roots.askPem;
}

async function writeAtomic(path: string, text: string, mode: number): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}`;
  await writeFile(tmp, text, { mode });
  await chmod(tmp, mode);
  await rename(tmp, path);
}

export async function saveHardwareRoots(dir: string, roots: HardwareRoots): Promise<void> {
  await makeDirectory(dir, 0o700);
  const keyPem = roots.vcekPrivateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
  // The key first and the VCEK last: a folder holding vcek.pem is complete.
  await writeAtomic(join(dir, ROOT_FILES.vcekKey), keyPem, 0o600);
  await writeAtomic(join(dir, ROOT_FILES.ark), roots.arkPem, 0o644);
  await writeAtomic(join(dir, ROOT_FILES.ask), roots.askPem, 0o644);
  await writeAtomic(join(dir, ROOT_FILES.bundle), rootBundlePem(roots), 0o644);
  await writeAtomic(join(dir, ROOT_FILES.certChain), roots.askPem + roots.arkPem, 0o644);
  await writeAtomic(join(dir, ROOT_FILES.vcek), roots.vcekPem, 0o644);
}

function extensionValue(cert: x509.X509Certificate, oid: string): Uint8Array {
  const ext = cert.getExtension(oid);
  if (ext === null) throw new MockTeeError('STATE_INVALID', `the stored VCEK lacks extension ${oid}`);
  return new Uint8Array(ext.value);
}

function splOf(cert: x509.X509Certificate, oid: string): number {
  const v = extensionValue(cert, oid);
  // INTEGER 0..255: 02 01 nn, or 02 02 00 nn.
  if (v.length === 3 && v[0] === 0x02 && v[1] === 0x01 && v[2]! < 0x80) return v[2]!;
  if (v.length === 4 && v[0] === 0x02 && v[1] === 0x02 && v[2] === 0x00 && v[3]! >= 0x80) return v[3]!;
  throw new MockTeeError('STATE_INVALID', `the stored VCEK's extension ${oid} is not a small INTEGER`);
}

/** Reads roots saved by saveHardwareRoots; undefined when the folder holds none. */
export async function loadHardwareRoots(dir: string): Promise<HardwareRoots | undefined> {
  let vcekPem: string;
  try {
    vcekPem = await readFile(join(dir, ROOT_FILES.vcek), 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  const [arkPem, askPem, keyPem] = await Promise.all([
    readFile(join(dir, ROOT_FILES.ark), 'utf8'),
    readFile(join(dir, ROOT_FILES.ask), 'utf8'),
    readFile(join(dir, ROOT_FILES.vcekKey), 'utf8'),
  ]);
  const vcek = new x509.X509Certificate(vcekPem);
  const chipId = Buffer.from(extensionValue(vcek, VCEK_OID.hwid));
  if (chipId.length !== CHIP_ID_SIZE)
    throw new MockTeeError('STATE_INVALID', 'the stored VCEK hwid is not 64 bytes');
  const product = extensionValue(vcek, VCEK_OID.productName);
  return {
    arkPem,
    askPem,
    vcekPem,
    vcekDer: Buffer.from(vcek.rawData),
    vcekPrivateKey: createPrivateKey(keyPem),
    chipId,
    tcb: {
      bootloader: splOf(vcek, VCEK_OID.bootloader),
      tee: splOf(vcek, VCEK_OID.tee),
      snp: splOf(vcek, VCEK_OID.snp),
      microcode: splOf(vcek, VCEK_OID.microcode),
    },
    productName: Buffer.from(product.subarray(2)).toString('ascii'),
  };
}

/** The roots stored in `dir`, or new ones (then saved there). */
export async function loadOrCreateHardwareRoots(
  dir: string,
  options: CreateRootsOptions = {},
): Promise<HardwareRoots> {
  const existing = await loadHardwareRoots(dir);
  if (existing !== undefined) return existing;
  const roots = await createHardwareRoots(options);
  await saveHardwareRoots(dir, roots);
  return roots;
}
