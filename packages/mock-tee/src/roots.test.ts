import 'reflect-metadata';
import { X509Certificate as NodeX509 } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  builtinAmdRoots,
  OID_HWID,
  parseAmdRootBundle,
  parseSnpReport,
  parseVekCertificate,
  VerificationError,
  vekTcb,
  verifySnpReport,
} from '@broker/verifier';
import * as x509 from '@peculiar/x509';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createHardwareRoots,
  type HardwareRoots,
  loadHardwareRoots,
  loadOrCreateHardwareRoots,
  ROOT_FILES,
  rootBundlePem,
  saveHardwareRoots,
  VCEK_OID,
} from './roots.js';
import { buildSnpReport } from './snp-report.js';

const tcb = { bootloader: 4, tee: 0, snp: 0x18, microcode: 0xdb };
const chipId = Buffer.alloc(64, 0x5a);

describe('hardware roots in AMD shape (default sizes)', () => {
  let roots: HardwareRoots;
  beforeAll(async () => {
    roots = await createHardwareRoots({ tcb, chipId });
  }, 120_000);

  it('ARK and ASK are RSA-4096 and sign with RSASSA-PSS, SHA-384, salt 48, like AMD', () => {
    for (const pem of [roots.arkPem, roots.askPem]) {
      const c = new x509.X509Certificate(pem);
      expect(c.signatureAlgorithm).toMatchObject({
        name: 'RSA-PSS',
        hash: { name: 'SHA-384' },
        saltLength: 48,
      });
      expect(new NodeX509(pem).publicKey.asymmetricKeyDetails?.modulusLength).toBe(4096);
    }
    const vcek = new x509.X509Certificate(roots.vcekPem);
    expect(vcek.signatureAlgorithm).toMatchObject({
      name: 'RSA-PSS',
      hash: { name: 'SHA-384' },
      saltLength: 48,
    });
    expect(new NodeX509(roots.vcekPem).publicKey.asymmetricKeyDetails?.namedCurve).toBe('secp384r1');
  });

  it('chains VCEK → ASK → ARK, with CA constraints on the roots', () => {
    const ark = new NodeX509(roots.arkPem);
    const ask = new NodeX509(roots.askPem);
    const vcek = new NodeX509(roots.vcekPem);
    expect(ark.verify(ark.publicKey) && ark.ca).toBe(true);
    expect(ask.verify(ark.publicKey) && ask.checkIssued(ark) && ask.ca).toBe(true);
    expect(vcek.verify(ask.publicKey) && vcek.checkIssued(ask) && !vcek.ca).toBe(true);
    expect(ark.subject).toContain('CN=ARK-Milan');
    expect(ask.subject).toContain('CN=SEV-Milan');
    expect(vcek.subject).toContain('CN=SEV-VCEK');
  });

  it('carries the VCEK extensions the verifier reads: TCB SPLs, hwid, product name', () => {
    const vek = parseVekCertificate(roots.vcekDer);
    expect(vekTcb(vek, false)).toEqual(tcb);
    expect(Buffer.from(vek.extensions.get(OID_HWID)!).equals(chipId)).toBe(true);
    const product = new x509.X509Certificate(roots.vcekPem).getExtension(VCEK_OID.productName)!;
    expect(Buffer.from(product.value).toString('latin1')).toBe('\x16\x05Milan');
  });

  it('is accepted as a configured root, and only then', () => {
    const report = parseSnpReport(
      buildSnpReport(
        { reportData: new Uint8Array(64), measurement: new Uint8Array(48), chipId, tcb },
        roots.vcekPrivateKey,
      ),
    );
    const vek = parseVekCertificate(roots.vcekDer);
    expect(parseAmdRootBundle(rootBundlePem(roots)).builtin).toBe(false);
    verifySnpReport(report, vek, [parseAmdRootBundle(rootBundlePem(roots))], new Date());
    expect(() => verifySnpReport(report, vek, builtinAmdRoots(), new Date())).toThrow(VerificationError);
  });
});

describe('saving and loading roots', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mock-tee-roots-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('round-trips through the folder, the VCEK key kept private', async () => {
    const roots = await createHardwareRoots({ rsaBits: 2048, tcb, chipId });
    await saveHardwareRoots(join(dir, 'a'), roots);
    const loaded = await loadHardwareRoots(join(dir, 'a'));
    expect(loaded).toBeDefined();
    expect(loaded!.vcekPem).toBe(roots.vcekPem);
    expect(loaded!.arkPem).toBe(roots.arkPem);
    expect(loaded!.chipId.equals(chipId)).toBe(true);
    expect(loaded!.tcb).toEqual(tcb);
    expect(loaded!.productName).toBe('Milan');
    expect(loaded!.vcekPrivateKey.export({ format: 'jwk' })).toEqual(
      roots.vcekPrivateKey.export({ format: 'jwk' }),
    );
    expect((await stat(join(dir, 'a', ROOT_FILES.vcekKey))).mode & 0o077).toBe(0);
    expect(await readFile(join(dir, 'a', ROOT_FILES.bundle), 'utf8')).toBe(roots.arkPem + roots.askPem);
    expect(await readFile(join(dir, 'a', ROOT_FILES.certChain), 'utf8')).toBe(roots.askPem + roots.arkPem);
  });

  it('creates roots once and reuses them', async () => {
    const first = await loadOrCreateHardwareRoots(join(dir, 'b'), { rsaBits: 2048 });
    const second = await loadOrCreateHardwareRoots(join(dir, 'b'), { rsaBits: 2048 });
    expect(second.vcekPem).toBe(first.vcekPem);
    expect(await loadHardwareRoots(join(dir, 'nothing-here'))).toBeUndefined();
  });

  it('refuses a stored VCEK without AMD extensions', async () => {
    const roots = await createHardwareRoots({ rsaBits: 2048 });
    await saveHardwareRoots(join(dir, 'c'), roots);
    await writeFile(join(dir, 'c', ROOT_FILES.vcek), roots.askPem);
    await expect(loadHardwareRoots(join(dir, 'c'))).rejects.toThrow(/lacks extension/);
  });

  it('refuses bad parameters', async () => {
    await expect(createHardwareRoots({ rsaBits: 2048, chipId: new Uint8Array(8) })).rejects.toThrow(
      RangeError,
    );
    await expect(createHardwareRoots({ rsaBits: 2048, tcb: { ...tcb, snp: 256 } })).rejects.toThrow(
      RangeError,
    );
  });
});
