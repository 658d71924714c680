import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import { VerificationError, type VerificationErrorCode } from '../errors.js';
import { getVerifier } from '../registry.js';
import type { ExpectedData } from '../verifier.js';
import { derInteger, derOctetString } from '../x509/build.js';
import { OID_HWID, OID_SNP_SPL, OID_TEE_SPL } from './certs.js';
import { SnpVerifier } from './index.js';
import {
  encodeSnpReport,
  parseSnpReport,
  SNP_REPORT_SIZE,
  SNP_SIGNED_LENGTH,
  type TcbVersion,
} from './report.js';
import { reportFieldsFromSevJson, sevJsonFromReport } from './serde.js';
import { createTestAmdRoots, issueTestVek, signSnpReport, vekExtensions } from './test-roots.js';

const REPORT = readFileSync(vector('trustee/snp/test-report.bin'));
const VCEK = readFileSync(vector('trustee/snp/test-vcek.der'));

const verifier = new SnpVerifier();
const roots = createTestAmdRoots();
const trustedArks = [roots.bundlePem];
const tcb: TcbVersion = { bootloader: 10, tee: 0, snp: 23, microcode: 25 };
const chipId = createHash('sha512').update('snp chip').digest();
const vcek = issueTestVek(roots, { tcb, hwid: chipId });
const reportData = createHash('sha384').update('runtime').digest();
const initData = createHash('sha256').update('initdata').digest();

function report(o: { version?: number; vmpl?: number; hostData?: Buffer; keyInfo?: number } = {}): Buffer {
  const b = Buffer.alloc(SNP_REPORT_SIZE);
  b.writeUInt32LE(o.version ?? 3, 0);
  b.writeBigUInt64LE(0x30000n, 0x08);
  b.writeUInt32LE(o.vmpl ?? 0, 0x30);
  b.writeUInt32LE(1, 0x34);
  b.writeBigUInt64LE(0x25n, 0x40);
  b.writeUInt32LE(o.keyInfo ?? 0, 0x48);
  reportData.copy(b, 0x50);
  (o.hostData ?? initData).copy(b, 0xc0);
  Buffer.from([tcb.bootloader, tcb.tee, 0, 0, 0, 0, tcb.snp, tcb.microcode]).copy(b, 0x180);
  b[0x188] = 0x19;
  b[0x189] = 0xa0; // Genoa
  b[0x18a] = 2;
  chipId.copy(b, 0x1a0);
  return b;
}

function evidence(signed: Buffer, chain: unknown = [{ cert_type: 'VCEK', data: [...vcek.der] }]) {
  return { attestation_report: sevJsonFromReport(parseSnpReport(signed)), cert_chain: chain };
}

async function failureCode(
  ev: unknown,
  expected: Partial<ExpectedData> = {},
): Promise<VerificationErrorCode> {
  try {
    await verifier.evaluate(ev, { reportData, trustedArks, ...expected });
  } catch (e) {
    if (e instanceof VerificationError) return e.code;
    throw e;
  }
  throw new Error('verification succeeded');
}

describe('sev crate JSON', () => {
  it("round-trips trustee's test report to the same signed bytes", () => {
    const json = JSON.parse(JSON.stringify(sevJsonFromReport(parseSnpReport(REPORT))));
    expect(json.cpuid_fam_id).toBeNull();
    expect(json.reported_tcb).toEqual({ fmc: null, bootloader: 3, tee: 0, snp: 8, microcode: 115 });
    expect(json.report_data).toHaveLength(64);
    const fields = reportFieldsFromSevJson(json);
    expect(fields.reportedTcb).toEqual({ bootloader: 3, tee: 0, snp: 8, microcode: 115 });
    expect(encodeSnpReport(fields).subarray(0, SNP_SIGNED_LENGTH + 144)).toEqual(
      REPORT.subarray(0, SNP_SIGNED_LENGTH + 144),
    );
  });

  it('treats absent Option fields like null, as serde does', () => {
    const json = JSON.parse(JSON.stringify(sevJsonFromReport(parseSnpReport(REPORT))));
    delete json.launch_mit_vector;
    delete json.current_mit_vector;
    delete json.current_tcb.fmc;
    expect(() => reportFieldsFromSevJson(json)).not.toThrow();
    delete json.chip_id;
    expect(() => reportFieldsFromSevJson(json)).toThrow(VerificationError);
  });
});

describe('snp verifier', () => {
  it('is registered', () => {
    expect(getVerifier('snp')).toBeInstanceOf(SnpVerifier);
  });

  it("verifies a report with its VCEK from the certificate table, with trustee's claims", async () => {
    const [r] = await verifier.evaluate(evidence(signSnpReport(report(), vcek.privateKey)), {
      reportData,
      initDataHash: initData,
      trustedArks,
    });
    expect(r!.class).toBe('cpu');
    expect(r!.claims).toEqual({
      policy_abi_major: 0,
      policy_abi_minor: 0,
      policy_smt_allowed: true,
      policy_migrate_ma: false,
      policy_debug_allowed: false,
      policy_single_socket: false,
      reported_tcb_bootloader: 10,
      reported_tcb_tee: 0,
      reported_tcb_snp: 23,
      reported_tcb_microcode: 25,
      platform_tsme_enabled: false,
      platform_smt_enabled: true,
      measurement: '00'.repeat(48),
      report_data: reportData.toString('hex') + '00'.repeat(16),
      init_data: initData.toString('hex'),
      chip_id: chipId.toString('hex'),
    });
  });

  it('trusts a test root only when configured', async () => {
    expect(await failureCode(evidence(signSnpReport(report(), vcek.privateKey)), { trustedArks: [] })).toBe(
      'CERT_CHAIN_INVALID',
    );
  });

  it('compares report data and HOST_DATA padded or truncated, as regularize_data does', async () => {
    const ev = evidence(signSnpReport(report(), vcek.privateKey));
    expect(await failureCode(ev, { reportData: Buffer.alloc(48) })).toBe('REPORT_DATA_MISMATCH');
    await expect(
      verifier.evaluate(ev, { reportData: Buffer.alloc(0), reportDataNotProvided: true, trustedArks }),
    ).resolves.toHaveLength(1);
    const long = Buffer.concat([reportData, Buffer.alloc(16), Buffer.from('ignored')]);
    await expect(verifier.evaluate(ev, { reportData: long, trustedArks })).resolves.toHaveLength(1);
    expect(await failureCode(ev, { initDataHash: createHash('sha256').update('other').digest() })).toBe(
      'INIT_DATA_MISMATCH',
    );
    const sha384 = createHash('sha384').update('initdata').digest();
    const ev384 = evidence(signSnpReport(report({ hostData: sha384.subarray(0, 32) }), vcek.privateKey));
    await expect(
      verifier.evaluate(ev384, { reportData, initDataHash: sha384, trustedArks }),
    ).resolves.toHaveLength(1);
  });

  it('requires VMPL 0 and report versions 3 to 5', async () => {
    expect(await failureCode(evidence(signSnpReport(report({ vmpl: 1 }), vcek.privateKey)))).toBe(
      'VMPL_MISMATCH',
    );
    // trustee refuses version 2, whose processor the report does not name.
    const v2 = {
      attestation_report: sevJsonFromReport(parseSnpReport(REPORT)),
      cert_chain: [{ cert_type: 'VCEK', data: [...VCEK] }],
    };
    expect(await failureCode(v2)).toBe('UNSUPPORTED_VERSION');
    const ev = evidence(signSnpReport(report(), vcek.privateKey));
    expect(await failureCode({ ...ev, attestation_report: { ...ev.attestation_report, version: 6 } })).toBe(
      'UNSUPPORTED_VERSION',
    );
  });

  it('fails on changed report fields', async () => {
    const ev = evidence(signSnpReport(report(), vcek.privateKey));
    const r = ev.attestation_report as Record<string, unknown>;
    const changes: Record<string, unknown> = {
      guest_svn: 1,
      policy: 0x30001,
      measurement: Array(48).fill(1),
      reported_tcb: { fmc: null, bootloader: 10, tee: 0, snp: 24, microcode: 25 },
      signature: { r: Array(72).fill(1), s: Array(72).fill(1) },
    };
    for (const [k, v] of Object.entries(changes)) {
      const c = await failureCode({ ...ev, attestation_report: { ...r, [k]: v } });
      expect(['REPORT_SIGNATURE_INVALID', 'TCB_MISMATCH']).toContain(c);
    }
  });

  it('uses an ASK from the table only if a trusted ARK signed it, and checks a table ARK', async () => {
    const signed = signSnpReport(report(), vcek.privateKey);
    const withAsk = evidence(signed, [
      { cert_type: 'ASK', data: [...roots.ask.der] },
      { cert_type: 'ARK', data: [...roots.ark.der] },
      { cert_type: 'VCEK', data: [...vcek.der] },
    ]);
    await expect(verifier.evaluate(withAsk, { reportData, trustedArks })).resolves.toHaveLength(1);
    const other = createTestAmdRoots({ product: 'Other' });
    const foreignAsk = evidence(signed, [
      { cert_type: 'ASK', data: [...other.ask.der] },
      { cert_type: 'VCEK', data: [...vcek.der] },
    ]);
    expect(await failureCode(foreignAsk)).toBe('CERT_CHAIN_INVALID');
    const foreignArk = evidence(signed, [
      { cert_type: 'ARK', data: [...other.ark.der] },
      { cert_type: 'VCEK', data: [...vcek.der] },
    ]);
    expect(await failureCode(foreignArk)).toBe('CERT_CHAIN_INVALID');
  });

  it('verifies VLEK-signed reports through the ASVK', async () => {
    const vlek = issueTestVek(roots, { kind: 'vlek', tcb });
    const ev = evidence(signSnpReport(report({ keyInfo: 1 << 2 }), vlek.privateKey), [
      { cert_type: { OTHER: '11111111-2222-3333-4444-555555555555' }, data: [1, 2, 3] },
      { cert_type: 'VLEK', data: [...vlek.der] },
    ]);
    await expect(verifier.evaluate(ev, { reportData, trustedArks })).resolves.toHaveLength(1);
  });

  it('refuses a VCEK in cert_chain with bad AMD extensions', async () => {
    const base = vekExtensions(tcb, chipId);
    const cases = [
      base.filter((e) => e.oid !== OID_SNP_SPL),
      base.map((e) => (e.oid === OID_TEE_SPL ? { ...e, value: derInteger(256) } : e)),
      base.map((e) => (e.oid === OID_HWID ? { ...e, value: derOctetString(Buffer.alloc(63, 1)) } : e)),
    ];
    for (const extensions of cases) {
      const bad = issueTestVek(roots, { tcb, extensions });
      const ev = evidence(signSnpReport(report(), bad.privateKey), [
        { cert_type: 'VCEK', data: [...bad.der] },
      ]);
      expect(await failureCode(ev)).toBe('CERT_MALFORMED');
    }
  });

  it('refuses malformed evidence', async () => {
    const ev = evidence(signSnpReport(report(), vcek.privateKey));
    const r = ev.attestation_report as Record<string, unknown>;
    const cases: [unknown, VerificationErrorCode][] = [
      [null, 'EVIDENCE_MALFORMED'],
      [{ cert_chain: [] }, 'EVIDENCE_MALFORMED'],
      // Without a table the VCEK comes from configured sources only, and none is configured here.
      [{ ...ev, cert_chain: null }, 'VCEK_UNAVAILABLE'],
      [{ attestation_report: ev.attestation_report }, 'VCEK_UNAVAILABLE'],
      [{ ...ev, cert_chain: [] }, 'EVIDENCE_MALFORMED'],
      [{ ...ev, cert_chain: [{ cert_type: 'PEK', data: [] }] }, 'EVIDENCE_MALFORMED'],
      [{ ...ev, cert_chain: [{ cert_type: 'VCEK', data: [1, 2, 3] }] }, 'CERT_MALFORMED'],
      [{ ...ev, cert_chain: [{ cert_type: 'VCEK', data: Array(20000).fill(0) }] }, 'EVIDENCE_TOO_LARGE'],
      [{ ...ev, cert_chain: Array(17).fill({ cert_type: 'CRL', data: [] }) }, 'EVIDENCE_TOO_LARGE'],
      [{ ...ev, attestation_report: { ...r, report_data: Array(63).fill(0) } }, 'EVIDENCE_MALFORMED'],
      [{ ...ev, attestation_report: { ...r, report_data: Array(64).fill(256) } }, 'EVIDENCE_MALFORMED'],
      [{ ...ev, attestation_report: { ...r, policy: -1 } }, 'EVIDENCE_MALFORMED'],
      [{ ...ev, attestation_report: { ...r, policy: 2 ** 60 } }, 'EVIDENCE_MALFORMED'],
      [{ ...ev, attestation_report: { ...r, vmpl: 1.5 } }, 'EVIDENCE_MALFORMED'],
      [{ ...ev, attestation_report: { ...r, reported_tcb: { bootloader: 1 } } }, 'EVIDENCE_MALFORMED'],
      [{ ...ev, attestation_report: { ...r, cpuid_mod_id: 0x50 } }, 'UNSUPPORTED_PROCESSOR'],
    ];
    for (const [e, c] of cases) expect(await failureCode(e), JSON.stringify(e).slice(0, 100)).toBe(c);
  });
});
