import { createHash, generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import { VerificationError, type VerificationErrorCode } from '../errors.js';
import { derInteger, derOctetString } from '../x509/build.js';
import {
  builtinAmdRoots,
  OID_BL_SPL,
  OID_HWID,
  OID_SNP_SPL,
  OID_TEE_SPL,
  OID_UCODE_SPL,
  parseAmdRootBundle,
  parseVekCertificate,
} from './certs.js';
import { snpClaims } from './claims.js';
import {
  encodeSnpReport,
  parseSnpReport,
  SNP_REPORT_SIZE,
  SNP_SIGNED_LENGTH,
  type SnpReport,
  type TcbVersion,
} from './report.js';
import { createTestAmdRoots, issueTestVek, signSnpReport, vekExtensions } from './test-roots.js';
import { checkVmpl, trustedRoots, verifySnpReport } from './verify.js';

const SNP = vector('trustee/snp');
const REPORT = readFileSync(`${SNP}/test-report.bin`);
const VCEK = readFileSync(`${SNP}/test-vcek.der`);
const VCEK_INVALID_LEGACY = readFileSync(`${SNP}/test-vcek-invalid-legacy.der`);
const VCEK_INVALID_NEW = readFileSync(`${SNP}/test-vcek-invalid-new.der`);
/** test-vcek.der is valid from 2023-01-24 to 2030-01-24. */
const AT = new Date('2024-06-01T00:00:00Z');

function code(f: () => unknown): VerificationErrorCode {
  try {
    f();
  } catch (e) {
    if (e instanceof VerificationError) return e.code;
    throw e;
  }
  throw new Error('expected a VerificationError');
}

const fingerprint = (pem: { raw: Buffer }) => createHash('sha256').update(pem.raw).digest('hex');

describe('built-in AMD roots', () => {
  // SHA-256 over the DER, as published by AMD's KDS and shipped by trustee and the sev crate.
  const pinned: Record<string, [string, string, string]> = {
    Milan: [
      '69d063b45344d26a2e94e1f4210de49ef555308287d4c174445c95639a540bcd',
      '67d303bd3905fd38db8b20e0793699870e7fa612eaad5dec358293fd8c0bac1b',
      'c5e081f59b7efab1fe2f8b505e159704e72f29cab7ef7cf628a05a42439082f5',
    ],
    Genoa: [
      '4c6598d19c18719c5dfd4a7d335f674e5bfe1d8f800cea2cf270c10d103db2f1',
      '5464738c1546aed5f2cecf1dc98c5c960a92e8913238a61711bc90ec6e828521',
      '197e610743a917d6b9bb982a5a9226ccc0a15b611be0619e626aca9151457372',
    ],
    Turin: [
      '1f084161a44bb6d93778a904877d4819cafa5d05ef4193b2ded9dd9c73dd3f6a',
      '5b77ef5fe7a7a004fd9032668fba9d0fda22f88c4442069a479636a6ae3b3185',
      '104e10a8bd060a3c20a434261a57d0588fd65a88915b4f65b08bdecaf8df1a3c',
    ],
  };

  it('are the pinned ARK/ASK/ASVK of Milan, Genoa and Turin, each signed by its ARK', () => {
    const roots = builtinAmdRoots();
    expect(roots.map((r) => r.name)).toEqual(['Milan', 'Genoa', 'Turin']);
    for (const r of roots) {
      const [ark, ask, asvk] = pinned[r.name]!;
      expect(fingerprint(r.ark)).toBe(ark);
      expect(fingerprint(r.ask!)).toBe(ask);
      expect(fingerprint(r.asvk!)).toBe(asvk);
      expect(r.ark.subject).toContain(`CN=ARK-${r.name}`);
      expect(r.ask!.subject).toContain(`CN=SEV-${r.name}`);
      expect(r.asvk!.subject).toContain(`CN=SEV-VLEK-${r.name}`);
      expect(r.ark.verify(r.ark.publicKey)).toBe(true);
      expect(r.ask!.verify(r.ark.publicKey)).toBe(true);
      expect(r.asvk!.verify(r.ark.publicKey)).toBe(true);
      // RSASSA-PSS: the ASK does not verify under another generation's ARK.
      for (const other of roots) if (other !== r) expect(r.ask!.verify(other.ark.publicKey)).toBe(false);
    }
  });
});

describe('SNP report parser', () => {
  it("parses trustee's version 2 test report", () => {
    const r = parseSnpReport(REPORT);
    expect(r.version).toBe(2);
    expect(r.generation).toBeUndefined();
    expect(r.tcbLayout).toBe('legacy');
    expect(r.reportedTcb).toEqual({ bootloader: 3, tee: 0, snp: 8, microcode: 0x73 });
    expect(r.vmpl).toBe(0);
    expect(r.sigAlgo).toBe(1);
    expect(r.cpuidFamId).toBeUndefined();
    expect(r.launchMitVector).toBeUndefined();
    expect(r.chipId.toString('hex')).toBe(
      'c38427a30d4c7af9d96f7a15b97269825a64cb76a2352ffd5d18115d89ad473f8e8c0bcd9a5d9286612bad4aadfb4426205a3b9e4fea82301135a170e477524e',
    );
    expect(r.bytes.equals(REPORT)).toBe(true);
  });

  it('re-encodes the parsed fields to the same signed bytes', () => {
    const r = parseSnpReport(REPORT);
    const again = encodeSnpReport(r);
    expect(again.subarray(0, SNP_SIGNED_LENGTH).equals(REPORT.subarray(0, SNP_SIGNED_LENGTH))).toBe(true);
    expect(again.subarray(SNP_SIGNED_LENGTH, SNP_SIGNED_LENGTH + 144)).toEqual(
      REPORT.subarray(SNP_SIGNED_LENGTH, SNP_SIGNED_LENGTH + 144),
    );
  });

  it('refuses wrong sizes', () => {
    for (const n of [0, 1, SNP_REPORT_SIZE - 1, SNP_REPORT_SIZE + 1, 4096]) {
      const b = Buffer.alloc(n);
      if (n >= SNP_REPORT_SIZE) REPORT.copy(b);
      expect(code(() => parseSnpReport(b))).toBe('REPORT_MALFORMED');
    }
  });

  it('refuses versions outside 2 to 5', () => {
    for (const v of [0, 1, 6, 0xffffffff]) {
      const b = Buffer.from(REPORT);
      b.writeUInt32LE(v, 0);
      expect(code(() => parseSnpReport(b))).toBe('UNSUPPORTED_VERSION');
    }
  });

  it('reads the processor from CPUID in version 3+ and refuses unknown ones', () => {
    const b = Buffer.from(REPORT);
    b.writeUInt32LE(3, 0);
    const cases: [number, number, string | null][] = [
      [0x19, 0x01, 'Milan'],
      [0x19, 0x11, 'Genoa'],
      [0x19, 0xa0, 'Genoa'],
      [0x1a, 0x02, 'Turin'],
      [0x19, 0x30, null],
      [0x1a, 0x50, null],
      [0x17, 0x01, null],
    ];
    for (const [fam, mod, gen] of cases) {
      b[0x188] = fam;
      b[0x189] = mod;
      if (gen === null) expect(code(() => parseSnpReport(b))).toBe('UNSUPPORTED_PROCESSOR');
      else expect(parseSnpReport(b).generation).toBe(gen);
    }
  });

  it('decodes the Turin TCB layout with the FMC SVN', () => {
    const b = Buffer.from(REPORT);
    b.writeUInt32LE(3, 0);
    b[0x188] = 0x1a;
    b[0x189] = 0x02;
    Buffer.from([9, 1, 2, 3, 0, 0, 0, 4]).copy(b, 0x180);
    expect(parseSnpReport(b).reportedTcb).toEqual({ fmc: 9, bootloader: 1, tee: 2, snp: 3, microcode: 4 });
  });

  it('reads the mitigation vectors of version 5', () => {
    const b = Buffer.from(REPORT);
    b.writeUInt32LE(5, 0);
    b[0x188] = 0x19;
    b[0x189] = 0x01;
    b.writeBigUInt64LE(0x1234n, 0x1f8);
    b.writeBigUInt64LE(0xffffffffffffffffn, 0x200);
    const r = parseSnpReport(b);
    expect(r.launchMitVector).toBe(0x1234n);
    expect(r.currentMitVector).toBe(0xffffffffffffffffn);
    expect(encodeSnpReport(r).subarray(0, SNP_SIGNED_LENGTH)).toEqual(b.subarray(0, SNP_SIGNED_LENGTH));
  });

  it('refuses a version 2 report with a masked chip ID (unknown TCB layout), as the sev crate does', () => {
    const b = Buffer.from(REPORT);
    b.fill(0, 0x1a0, 0x1e0);
    expect(code(() => parseSnpReport(b))).toBe('UNSUPPORTED_PROCESSOR');
  });

  it('does not crash on random bytes', () => {
    let seed = 7;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed & 0xff;
    };
    for (let i = 0; i < 300; i++) {
      const b = Buffer.alloc(SNP_REPORT_SIZE);
      for (let j = 0; j < b.length; j++) b[j] = rnd();
      if (i % 2 === 0) b.writeUInt32LE(2 + (i % 4), 0);
      try {
        parseSnpReport(b);
      } catch (e) {
        expect(e).toBeInstanceOf(VerificationError);
      }
    }
  });

  it('gives trustee snp claims', () => {
    const c = snpClaims(parseSnpReport(REPORT));
    expect(c.policy_abi_major).toBe(0);
    expect(c.policy_abi_minor).toBe(0x1f);
    expect(c.policy_smt_allowed).toBe(true);
    expect(c.policy_debug_allowed).toBe(false);
    expect(c.reported_tcb_microcode).toBe(0x73);
    expect(c.measurement).toMatch(/^[0-9a-f]{96}$/);
    expect(c.report_data).toMatch(/^[0-9a-f]{128}$/);
    expect(c.init_data).toMatch(/^[0-9a-f]{64}$/);
    expect(c.chip_id).toMatch(/^[0-9a-f]{128}$/);
    expect(Object.keys(c)).toHaveLength(16);
  });
});

describe('SNP report verification with AMD roots', () => {
  const roots = trustedRoots({});
  const report = parseSnpReport(REPORT);

  it("verifies trustee's test report with its VCEK, chained to AMD's Milan ARK", () => {
    const chain = verifySnpReport(report, parseVekCertificate(VCEK), roots, AT);
    expect(chain.root.name).toBe('Milan');
    expect(chain.root.builtin).toBe(true);
  });

  it('refuses the invalid VCEKs (not signed by AMD)', () => {
    expect(code(() => verifySnpReport(report, parseVekCertificate(VCEK_INVALID_LEGACY), roots, AT))).toBe(
      'CERT_CHAIN_INVALID',
    );
    expect(code(() => verifySnpReport(report, parseVekCertificate(VCEK_INVALID_NEW), roots, AT))).toBe(
      'CERT_CHAIN_INVALID',
    );
  });

  it('checks certificate validity at the verification time', () => {
    const vek = parseVekCertificate(VCEK);
    expect(code(() => verifySnpReport(report, vek, roots, new Date('2023-01-01T00:00:00Z')))).toBe(
      'CERT_NOT_VALID_AT_TIME',
    );
    expect(code(() => verifySnpReport(report, vek, roots, new Date('2030-01-25T00:00:00Z')))).toBe(
      'CERT_NOT_VALID_AT_TIME',
    );
    expect(() => verifySnpReport(report, vek, roots, new Date('2030-01-24T00:00:00Z'))).not.toThrow();
  });

  it('fails on every flipped byte of the signed report and of the signature', () => {
    const vek = parseVekCertificate(VCEK);
    for (let i = 0; i < SNP_SIGNED_LENGTH + 144; i++) {
      const b = Buffer.from(REPORT);
      b[i]! ^= 0x01;
      let failed = false;
      try {
        verifySnpReport(parseSnpReport(b), vek, roots, AT);
      } catch (e) {
        expect(e).toBeInstanceOf(VerificationError);
        failed = true;
      }
      if (!failed) throw new Error(`flipping report byte 0x${i.toString(16)} went unnoticed`);
    }
  });

  it('fails on every flipped byte of the VCEK', () => {
    for (let i = 0; i < VCEK.length; i++) {
      const b = Buffer.from(VCEK);
      b[i]! ^= 0x01;
      let failed = false;
      try {
        verifySnpReport(report, parseVekCertificate(b), roots, AT);
      } catch (e) {
        expect(e).toBeInstanceOf(VerificationError);
        failed = true;
      }
      if (!failed) throw new Error(`flipping VCEK byte ${i} went unnoticed`);
    }
  });

  it('notices a changed reported TCB through the signature (trustee check_report_tcb_failure)', () => {
    // Without AMD's key the report cannot be re-signed; the TCB comparison itself is tested with a test root below.
    const b = Buffer.from(REPORT);
    b[0x180]! += 1;
    const vek = parseVekCertificate(VCEK);
    expect(code(() => verifySnpReport(parseSnpReport(b), vek, roots, AT))).toBe('REPORT_SIGNATURE_INVALID');
  });

  it('checks the VMPL', () => {
    expect(() => checkVmpl(report)).not.toThrow();
    const b = Buffer.from(REPORT);
    b.writeUInt32LE(1, 0x30);
    expect(code(() => checkVmpl(parseSnpReport(b)))).toBe('VMPL_MISMATCH');
  });
});

describe('SNP verification with a configured test root', () => {
  const test = createTestAmdRoots();
  const tcb: TcbVersion = { bootloader: 4, tee: 0, snp: 22, microcode: 213 };
  const chipId = createHash('sha512').update('chip').digest();

  function makeReport(
    over: { version?: number; fam?: number; mod?: number; tcb?: TcbVersion; keyInfo?: number } = {},
  ): Buffer {
    const b = Buffer.alloc(SNP_REPORT_SIZE);
    b.writeUInt32LE(over.version ?? 3, 0);
    b.writeBigUInt64LE(0x30000n, 0x08);
    b.writeUInt32LE(1, 0x34);
    b.writeUInt32LE(over.keyInfo ?? 0, 0x48);
    createHash('sha512').update('report data').digest().copy(b, 0x50);
    b[0x188] = over.fam ?? 0x19;
    b[0x189] = over.mod ?? 0x01;
    chipId.copy(b, 0x1a0);
    const t = over.tcb ?? tcb;
    if (b[0x188] === 0x1a)
      Buffer.from([t.fmc ?? 0, t.bootloader, t.tee, t.snp, 0, 0, 0, t.microcode]).copy(b, 0x180);
    else Buffer.from([t.bootloader, t.tee, 0, 0, 0, 0, t.snp, t.microcode]).copy(b, 0x180);
    return b;
  }

  const vcek = issueTestVek(test, { tcb, hwid: chipId });

  function verify(report: Buffer, vekDer: Buffer, trustedArks: readonly string[] = [test.bundlePem]): void {
    verifySnpReport(
      parseSnpReport(report),
      parseVekCertificate(vekDer),
      trustedRoots({ trustedArks }),
      new Date(),
    );
  }

  it('accepts a report signed by a test VCEK only when its ARK is configured', () => {
    const r = signSnpReport(makeReport(), vcek.privateKey);
    expect(() => verify(r, vcek.der)).not.toThrow();
    expect(code(() => verify(r, vcek.der, []))).toBe('CERT_CHAIN_INVALID');
    const other = createTestAmdRoots({ product: 'Other' });
    expect(code(() => verify(r, vcek.der, [other.bundlePem]))).toBe('CERT_CHAIN_INVALID');
  });

  it('parses root bundles strictly', () => {
    expect(parseAmdRootBundle(test.bundlePem).ask).toBeDefined();
    expect(parseAmdRootBundle(test.ask.pem + test.ark.pem).asvk).toBeUndefined();
    expect(code(() => parseAmdRootBundle(test.ask.pem))).toBe('CERT_CHAIN_INVALID');
    expect(code(() => parseAmdRootBundle(test.ark.pem))).toBe('CERT_CHAIN_INVALID');
    const other = createTestAmdRoots({ product: 'Other' });
    expect(code(() => parseAmdRootBundle(test.ark.pem + other.ask.pem))).toBe('CERT_CHAIN_INVALID');
    expect(code(() => parseAmdRootBundle(test.ark.pem + test.ask.pem + test.ask.pem))).toBe(
      'CERT_CHAIN_INVALID',
    );
    expect(code(() => parseAmdRootBundle(test.bundlePem + test.ask.pem))).toBe('EVIDENCE_TOO_LARGE');
  });

  it('accepts a VLEK only for a report that says VLEK, through the ASVK', () => {
    const vlek = issueTestVek(test, { kind: 'vlek', tcb });
    const r = signSnpReport(makeReport({ keyInfo: 1 << 2 }), vlek.privateKey);
    expect(() => verify(r, vlek.der)).not.toThrow();
    // The same key presented for a report that claims VCEK signing is not issued by an ASK.
    const r2 = signSnpReport(makeReport(), vlek.privateKey);
    expect(code(() => verify(r2, vlek.der))).toBe('CERT_CHAIN_INVALID');
  });

  it('refuses unsigned and reserved signing keys', () => {
    expect(
      code(() => verify(signSnpReport(makeReport({ keyInfo: 7 << 2 }), vcek.privateKey), vcek.der)),
    ).toBe('REPORT_SIGNATURE_INVALID');
    expect(
      code(() => verify(signSnpReport(makeReport({ keyInfo: 3 << 2 }), vcek.privateKey), vcek.der)),
    ).toBe('UNSUPPORTED_ALGORITHM');
  });

  it('refuses a report signed by another key than the VCEK', () => {
    const other = generateKeyPairSync('ec', { namedCurve: 'P-384' });
    expect(code(() => verify(signSnpReport(makeReport(), other.privateKey), vcek.der))).toBe(
      'REPORT_SIGNATURE_INVALID',
    );
  });

  it('refuses a signature whose r or s does not fit P-384', () => {
    const r = signSnpReport(makeReport(), vcek.privateKey);
    r[0x2a0 + 60] = 1;
    expect(code(() => verify(r, vcek.der))).toBe('REPORT_SIGNATURE_INVALID');
  });

  it('refuses another signature algorithm', () => {
    const b = makeReport();
    b.writeUInt32LE(2, 0x34);
    expect(code(() => verify(signSnpReport(b, vcek.privateKey), vcek.der))).toBe('UNSUPPORTED_ALGORITHM');
  });

  it('compares each TCB component with the VCEK extensions', () => {
    for (const k of ['bootloader', 'tee', 'snp', 'microcode'] as const) {
      const r = signSnpReport(makeReport({ tcb: { ...tcb, [k]: tcb[k] + 1 } }), vcek.privateKey);
      expect(code(() => verify(r, vcek.der))).toBe('TCB_MISMATCH');
    }
  });

  it('checks the FMC SVN on Turin', () => {
    const turinTcb = { ...tcb, fmc: 3 };
    const turin = issueTestVek(test, { tcb: turinTcb, hwid: chipId.subarray(0, 8) });
    const mk = (fmc: number) => {
      const b = makeReport({ fam: 0x1a, mod: 0x02, tcb: { ...turinTcb, fmc } });
      b.fill(0, 0x1a8, 0x1e0); // Turin's chip ID is 8 bytes
      return signSnpReport(b, turin.privateKey);
    };
    expect(() => verify(mk(3), turin.der)).not.toThrow();
    expect(code(() => verify(mk(4), turin.der))).toBe('TCB_MISMATCH');
    const noFmc = issueTestVek(test, { tcb, hwid: chipId.subarray(0, 8) });
    const b = makeReport({ fam: 0x1a, mod: 0x02, tcb: { ...turinTcb } });
    b.fill(0, 0x1a8, 0x1e0);
    expect(code(() => verify(signSnpReport(b, noFmc.privateKey), noFmc.der))).toBe('CERT_MALFORMED');
  });

  it('binds a VCEK to its chip, in both hardware-ID encodings', () => {
    const raw = issueTestVek(test, { tcb, hwid: chipId, hwidEncoding: 'raw' });
    expect(() => verify(signSnpReport(makeReport(), raw.privateKey), raw.der)).not.toThrow();
    const otherChip = issueTestVek(test, { tcb, hwid: createHash('sha512').update('other').digest() });
    expect(code(() => verify(signSnpReport(makeReport(), otherChip.privateKey), otherChip.der))).toBe(
      'CHIP_ID_MISMATCH',
    );
    const noHwid = issueTestVek(test, { tcb });
    expect(code(() => verify(signSnpReport(makeReport(), noHwid.privateKey), noHwid.der))).toBe(
      'CERT_MALFORMED',
    );
    // A masked chip ID cannot be compared.
    const masked = makeReport();
    masked.fill(0, 0x1a0, 0x1e0);
    expect(() => verify(signSnpReport(masked, noHwid.privateKey), noHwid.der)).not.toThrow();
  });

  it('refuses certificates with missing or garbled TCB extensions', () => {
    const base = vekExtensions(tcb, chipId);
    const cases = [
      base.filter((e) => e.oid !== OID_SNP_SPL),
      base.filter((e) => e.oid !== OID_UCODE_SPL),
      base.map((e) => (e.oid === OID_TEE_SPL ? { ...e, value: derInteger(256) } : e)),
      base.map((e) => (e.oid === OID_BL_SPL ? { ...e, value: derOctetString(Buffer.from([4])) } : e)),
      base.map((e) => (e.oid === OID_BL_SPL ? { ...e, value: Buffer.from([0x02, 0x01, 0xff]) } : e)),
      base.map((e) => (e.oid === OID_HWID ? { ...e, value: derOctetString(Buffer.alloc(63, 1)) } : e)),
      [...base, base[0]!],
    ];
    for (const extensions of cases) {
      const c = issueTestVek(test, { tcb, extensions });
      expect(code(() => verify(signSnpReport(makeReport(), c.privateKey), c.der))).toBe('CERT_MALFORMED');
    }
  });

  it('checks the test chain validity at the verification time', () => {
    const old = createTestAmdRoots({
      notBefore: new Date('2020-01-01T00:00:00Z'),
      notAfter: new Date('2021-01-01T00:00:00Z'),
    });
    const v = issueTestVek(old, {
      tcb,
      hwid: chipId,
      notBefore: new Date('2020-01-01T00:00:00Z'),
      notAfter: new Date('2027-01-01T00:00:00Z'),
    });
    const r = signSnpReport(makeReport(), v.privateKey);
    const run = (now: Date) =>
      verifySnpReport(
        parseSnpReport(r),
        parseVekCertificate(v.der),
        trustedRoots({ trustedArks: [old.bundlePem] }),
        now,
      );
    expect(() => run(new Date('2020-06-01T00:00:00Z'))).not.toThrow();
    expect(code(() => run(new Date('2022-06-01T00:00:00Z')))).toBe('CERT_NOT_VALID_AT_TIME');
  });

  it('keeps built-in roots of another generation out', () => {
    // trustee's Milan VCEK with a report claiming Genoa: no Genoa ASK signed it.
    const b = Buffer.from(REPORT);
    b.writeUInt32LE(3, 0);
    b[0x188] = 0x19;
    b[0x189] = 0x11;
    expect(
      code(() => verifySnpReport(parseSnpReport(b), parseVekCertificate(VCEK), trustedRoots({}), AT)),
    ).toBe('CERT_CHAIN_INVALID');
  });

  it('round-trips a signed report through its fields', () => {
    const r = signSnpReport(makeReport({ version: 5 }), vcek.privateKey);
    const parsed: SnpReport = parseSnpReport(r);
    expect(encodeSnpReport(parsed)).toEqual(r);
  });
});
