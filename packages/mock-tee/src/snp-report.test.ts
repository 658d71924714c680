import { generateKeyPairSync } from 'node:crypto';
import {
  guestPolicy,
  parseAmdRootBundle,
  parseSnpReport,
  parseVekCertificate,
  SNP_SIGNED_LENGTH,
  VerificationError,
  verifySnpReport,
  verifySnpReportSignature,
} from '@broker/verifier';
import { beforeAll, describe, expect, it } from 'vitest';
import { MockTeeError } from './errors.js';
import { createHardwareRoots, type HardwareRoots, rootBundlePem } from './roots.js';
import { AZURE_GUEST_POLICY, buildSnpReport, SNP_REPORT_SIZE, tcbToU64 } from './snp-report.js';

describe('buildSnpReport', () => {
  let roots: HardwareRoots;
  const reportData = Buffer.alloc(64, 0x11);
  const measurement = Buffer.alloc(48, 0x22);
  const reportId = Buffer.alloc(32, 0x33);

  beforeAll(async () => {
    roots = await createHardwareRoots({ rsaBits: 2048 });
  });

  const build = (extra: Partial<Parameters<typeof buildSnpReport>[0]> = {}) =>
    buildSnpReport(
      { reportData, measurement, reportId, chipId: roots.chipId, tcb: roots.tcb, ...extra },
      roots.vcekPrivateKey,
    );

  it('writes the fields the verifier reads, as a Milan CVM at VMPL 0 reports them', () => {
    const bytes = build();
    expect(bytes.length).toBe(SNP_REPORT_SIZE);
    const r = parseSnpReport(bytes);
    expect(r.version).toBe(3);
    expect(r.generation).toBe('Milan');
    expect(r.vmpl).toBe(0);
    expect(r.sigAlgo).toBe(1);
    expect(r.policy).toBe(AZURE_GUEST_POLICY);
    expect(guestPolicy(r.policy)).toMatchObject({
      debugAllowed: false,
      migrateMaAllowed: false,
      smtAllowed: true,
    });
    expect(r.reportData.equals(reportData)).toBe(true);
    expect(r.measurement.equals(measurement)).toBe(true);
    expect(r.reportId.equals(reportId)).toBe(true);
    expect(r.reportIdMa.every((b) => b === 0xff)).toBe(true);
    expect(r.chipId.equals(roots.chipId)).toBe(true);
    for (const t of [r.currentTcb, r.reportedTcb, r.committedTcb, r.launchTcb]) expect(t).toEqual(roots.tcb);
    verifySnpReport(
      r,
      parseVekCertificate(roots.vcekDer),
      [parseAmdRootBundle(rootBundlePem(roots))],
      new Date(),
    );
  });

  it('can write a version 2 report', () => {
    const r = parseSnpReport(build({ version: 2 }));
    expect(r.version).toBe(2);
    expect(r.tcbLayout).toBe('legacy');
    verifySnpReportSignature(r, parseVekCertificate(roots.vcekDer).publicKey);
  });

  it('signs every byte before the signature: flipping any of a sample of them breaks it', () => {
    const bytes = build();
    const key = parseVekCertificate(roots.vcekDer).publicKey;
    for (const off of [0x00, 0x30, 0x50, 0x8f, 0x90, 0x180, 0x1a0, 0x1df, SNP_SIGNED_LENGTH - 1]) {
      const t = Buffer.from(bytes);
      t[off]! ^= 0x01;
      let parsed: ReturnType<typeof parseSnpReport>;
      try {
        parsed = parseSnpReport(t);
      } catch (e) {
        expect(e).toBeInstanceOf(VerificationError); // e.g. a version byte out of range
        continue;
      }
      expect(() => verifySnpReportSignature(parsed, key), `byte 0x${off.toString(16)}`).toThrow(
        VerificationError,
      );
    }
  });

  it('is refused by another VCEK', () => {
    const other = generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey;
    expect(() => verifySnpReportSignature(parseSnpReport(build()), other)).toThrow(VerificationError);
  });

  it('refuses fields of the wrong size', () => {
    expect(() => build({ reportData: new Uint8Array(32) })).toThrow(MockTeeError);
    expect(() => build({ measurement: new Uint8Array(32) })).toThrow(MockTeeError);
    expect(() => build({ chipId: new Uint8Array(8) })).toThrow(MockTeeError);
    expect(() => build({ hostData: new Uint8Array(31) })).toThrow(MockTeeError);
  });

  it('prints the TCB as IMDS does (tcbm)', () => {
    // Azure's IMDS example for boot loader 4, TEE 0, SNP 0x18, microcode 0xdb.
    expect(tcbToU64({ bootloader: 4, tee: 0, snp: 0x18, microcode: 0xdb }).toString(16).toUpperCase()).toBe(
      'DB18000000000004',
    );
  });
});
