import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import { makeTestEvidence, testRoots } from './az-snp-vtpm/test-evidence.js';
import { type CliIo, main } from './cli.js';
import { kbsVerifyMain } from './index.js';
import { parseSnpReport, SNP_REPORT_SIZE } from './snp/report.js';
import { sevJsonFromReport } from './snp/serde.js';
import { createTestAmdRoots, issueTestVek, signSnpReport } from './snp/test-roots.js';

const DIR = vector('trustee/az-snp-vtpm');
const V2_REPORT_DATA =
  '982f5c6e45df0ed3f10b6f60b02f0c8390e281300f3805e2279c16168cd6ae9aa398f647caa2338748cd0fd9f5f819ef';

function io(files: Record<string, string | Buffer> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const cli: CliIo = {
    out: (s) => out.push(s),
    err: (s) => err.push(s),
    readFile: (p) => {
      const f = files[p];
      if (f !== undefined) return Buffer.from(f);
      return readFileSync(p);
    },
  };
  return { cli, out: () => out.join(''), err: () => err.join('') };
}

describe('kbs-verify', () => {
  it('is exported as kbsVerifyMain', () => {
    expect(kbsVerifyMain).toBe(main);
  });

  it('prints the claims of the v2 fixture', async () => {
    const t = io();
    const args = ['--tee', 'az-snp-vtpm', '--evidence', `${DIR}/evidence-v2.json`];
    const code = await main(
      [...args, '--report-data', V2_REPORT_DATA, '--time', '2025-06-01T00:00:00Z'],
      t.cli,
    );
    expect(t.err()).toBe('');
    expect(code).toBe(0);
    const out = JSON.parse(t.out());
    expect(out).toHaveLength(1);
    expect(out[0].class).toBe('cpu');
    expect(out[0].claims.report_data).toBe(V2_REPORT_DATA);
    expect(out[0].claims.tpm.pcr00).toBe('84275b2f4312cd4fc6cbe6b152ad3c3683e513d9f1e23c34fca160c8cca7a6a7');
  });

  it('prints the error and exits 1 when verification fails', async () => {
    const t = io();
    const base = [
      '--tee',
      'az-snp-vtpm',
      '--evidence',
      `${DIR}/evidence-v1.json`,
      '--time',
      '2025-06-01T00:00:00Z',
    ];
    expect(await main([...base, '--report-data', '00'], t.cli)).toBe(1);
    expect(t.err()).toMatch(/verification failed: REPORT_DATA_MISMATCH: /);
    expect(t.out()).toBe('');
    const t2 = io();
    expect(
      await main(
        [
          ...base,
          '--report-data',
          Buffer.from('challenge').toString('hex'),
          '--init-data-digest',
          '11'.repeat(32),
        ],
        t2.cli,
      ),
    ).toBe(1);
    expect(t2.err()).toMatch(/INIT_DATA_MISMATCH/);
    const t3 = io();
    expect(
      await main(
        [
          '--tee',
          'az-snp-vtpm',
          '--evidence',
          `${DIR}/evidence-v1.json`,
          '--report-data',
          '6368616c6c656e6765',
          '--time',
          '2033-01-01T00:00:00Z',
        ],
        t3.cli,
      ),
    ).toBe(1);
    expect(t3.err()).toMatch(/CERT_NOT_VALID_AT_TIME/);
  });

  it('without --report-data, takes the evidence nonce and says it is unchecked', async () => {
    const t = io();
    const code = await main(
      [
        '--tee',
        'az-snp-vtpm',
        '--evidence',
        `${DIR}/evidence-v1.json`,
        '--time',
        '2025-06-01T00:00:00+00:00',
      ],
      t.cli,
    );
    expect(code).toBe(0);
    expect(t.err()).toMatch(/report data NOT checked: using the evidence's own 6368616c6c656e6765/);
  });

  it('reads base64url evidence and trusts a --trusted-ark root', async () => {
    const nonce = Buffer.alloc(48, 5);
    const ev = makeTestEvidence({ nonce });
    const files = {
      'ev.b64': Buffer.from(JSON.stringify(ev.evidence)).toString('base64url'),
      'ark.pem': testRoots().bundlePem,
    };
    const args = ['--tee', 'az-snp-vtpm', '--evidence', 'ev.b64', '--report-data', nonce.toString('hex')];
    const t = io(files);
    expect(await main(args, t.cli)).toBe(1);
    expect(t.err()).toMatch(/CERT_CHAIN_INVALID/);
    const t2 = io(files);
    expect(await main([...args, '--trusted-ark', 'ark.pem'], t2.cli)).toBe(0);
  });

  it('takes the VCEK of snp evidence without cert_chain from --vcek-store', async () => {
    const roots = createTestAmdRoots();
    const tcb = { bootloader: 1, tee: 0, snp: 2, microcode: 3 };
    const chip = Buffer.alloc(64, 7);
    const vcek = issueTestVek(roots, { tcb, hwid: chip });
    const raw = Buffer.alloc(SNP_REPORT_SIZE);
    raw.writeUInt32LE(3, 0);
    raw.writeUInt32LE(1, 0x34);
    raw.fill(9, 0x50, 0x90);
    Buffer.from([1, 0, 0, 0, 0, 0, 2, 3]).copy(raw, 0x180);
    raw[0x188] = 0x19;
    chip.copy(raw, 0x1a0);
    const ev = { attestation_report: sevJsonFromReport(parseSnpReport(signSnpReport(raw, vcek.privateKey))) };
    const store = mkdtempSync(join(tmpdir(), 'kbs-verify-store-'));
    try {
      mkdirSync(join(store, 'vcek', chip.toString('hex')), { recursive: true });
      writeFileSync(join(store, 'vcek', chip.toString('hex'), 'vcek.der'), vcek.der);
      const files = { 'ev.json': JSON.stringify(ev), 'ark.pem': roots.bundlePem };
      const args = [
        '--tee',
        'snp',
        '--evidence',
        'ev.json',
        '--report-data',
        '09'.repeat(64),
        '--trusted-ark',
        'ark.pem',
      ];
      const t = io(files);
      expect(await main(args, t.cli)).toBe(1);
      expect(t.err()).toMatch(/VCEK_UNAVAILABLE/);
      const t2 = io(files);
      expect(await main([...args, '--vcek-store', join(store, 'none'), '--vcek-store', store], t2.cli)).toBe(
        0,
      );
      expect(JSON.parse(t2.out())[0].claims.chip_id).toBe(chip.toString('hex'));
    } finally {
      rmSync(store, { recursive: true, force: true });
    }
  });

  it('verifies tpm evidence up to the nonce', async () => {
    const t = io();
    const code = await main(['--tee', 'tpm', '--evidence', vector('trustee/tpm/tpm_evidence.json')], t.cli);
    // The fixture's 64-byte nonce cannot equal the 32-byte resized report data (see tpm.test.ts).
    expect(code).toBe(1);
    expect(t.err()).toMatch(/REPORT_DATA_MISMATCH/);
  });

  it('refuses bad usage with exit 2', async () => {
    const cases: string[][] = [
      [],
      ['--tee', 'az-snp-vtpm'],
      ['--evidence', 'x.json'],
      ['--tee', 'nope', '--evidence', `${DIR}/evidence-v1.json`],
      ['--tee', 'az-snp-vtpm', '--evidence', `${DIR}/evidence-v1.json`, '--report-data', 'xyz'],
      ['--tee', 'az-snp-vtpm', '--evidence', `${DIR}/evidence-v1.json`, '--time', 'yesterday'],
      ['--tee', 'az-snp-vtpm', '--evidence', `${DIR}/evidence-v1.json`, '--time', '2025-13-01T00:00:00Z'],
      ['--tee', 'az-snp-vtpm', '--evidence', `${DIR}/evidence-v1.json`, '--bogus'],
      ['--tee', 'az-snp-vtpm', '--evidence', '/nonexistent/evidence.json'],
      ['--tee', 'az-snp-vtpm', '--evidence', `${DIR}/hcl-report.bin`],
      ['--tee', 'az-tdx-vtpm', '--evidence', `${DIR}/evidence-v1.json`],
      ['--tee'],
    ];
    for (const args of cases) {
      const t = io();
      // A wrong TEE for the evidence fails verification, an unreadable file is a runtime failure: 1.
      const runtime = args[1] === 'az-tdx-vtpm' || args[3] === '/nonexistent/evidence.json';
      expect(await main(args, t.cli), args.join(' ')).toBe(runtime ? 1 : 2);
      expect(t.err()).not.toBe('');
    }
  });

  it('prints usage with --help', async () => {
    const t = io();
    expect(await main(['--help'], t.cli)).toBe(0);
    expect(t.out()).toMatch(/Usage: kbs-verify/);
    expect(t.out()).toMatch(/az-snp-vtpm/);
  });
});
