// Bounded, deterministic fuzzing of the SNP report parser and the `snp` evidence path: mutated
// reports and mutated evidence JSON must end in a VerificationError (never another exception),
// and no mutation of the signed bytes may verify.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { VerificationError } from '../errors.js';
import { SnpVerifier } from './index.js';
import {
  encodeSnpReport,
  parseSnpReport,
  SNP_REPORT_SIZE,
  SNP_SIGNED_LENGTH,
  type TcbVersion,
} from './report.js';
import { reportFieldsFromSevJson, sevJsonFromReport } from './serde.js';
import { createTestAmdRoots, issueTestVek, signSnpReport } from './test-roots.js';

/** xorshift32: the same sequence on every run. */
function prng(seed: number) {
  let x = seed >>> 0 || 1;
  const next = () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
  return { next, below: (n: number) => next() % n, byte: () => next() & 0xff };
}

const roots = createTestAmdRoots();
const tcb: TcbVersion = { bootloader: 4, tee: 0, snp: 22, microcode: 213 };
const chipId = createHash('sha512').update('fuzz chip').digest();
const vcek = issueTestVek(roots, { tcb, hwid: chipId });
const reportData = createHash('sha384').update('fuzz').digest();

function validReport(): Buffer {
  const b = Buffer.alloc(SNP_REPORT_SIZE);
  b.writeUInt32LE(5, 0);
  b.writeBigUInt64LE(0x30000n, 0x08);
  b.writeUInt32LE(1, 0x34);
  b.writeBigUInt64LE(1n, 0x40);
  reportData.copy(b, 0x50);
  Buffer.from([tcb.bootloader, tcb.tee, 0, 0, 0, 0, tcb.snp, tcb.microcode]).copy(b, 0x180);
  b[0x188] = 0x19;
  b[0x189] = 0x01;
  chipId.copy(b, 0x1a0);
  return signSnpReport(b, vcek.privateKey);
}

const VALID = validReport();
const verifier = new SnpVerifier();
const expected = { reportData, trustedArks: [roots.bundlePem] };
const chain = [{ cert_type: 'VCEK', data: [...vcek.der] }];

function expectVerificationError(e: unknown): void {
  if (!(e instanceof VerificationError)) throw e;
  expect(e.code).toMatch(/^[A-Z_]+$/);
}

describe('SNP report fuzzing (bounded, seeded)', () => {
  it('the unmutated report verifies (so failures below come from the mutations)', async () => {
    const ev = { attestation_report: sevJsonFromReport(parseSnpReport(VALID)), cert_chain: chain };
    await expect(verifier.evaluate(ev, expected)).resolves.toHaveLength(1);
  });

  it('parses mutated, truncated and extended reports without crashing', () => {
    const rnd = prng(0x5e5);
    let refused = 0;
    for (let i = 0; i < 2000; i++) {
      let b: Buffer;
      switch (i % 4) {
        case 0:
          b = VALID.subarray(0, rnd.below(SNP_REPORT_SIZE));
          break;
        case 1:
          b = Buffer.concat([VALID, Buffer.alloc(1 + rnd.below(64), rnd.byte())]);
          break;
        default: {
          b = Buffer.from(VALID);
          const flips = 1 + rnd.below(8);
          for (let f = 0; f < flips; f++) {
            const at = rnd.below(b.length);
            b[at] = b[at]! ^ (1 + rnd.below(255));
          }
          // Half of these keep a plausible version so the deeper fields get exercised.
          if (i % 8 < 4) b.writeUInt32LE(2 + rnd.below(4), 0);
        }
      }
      try {
        parseSnpReport(b);
      } catch (e) {
        expectVerificationError(e);
        refused++;
      }
    }
    // Every truncated and extended report is refused, at least.
    expect(refused).toBeGreaterThanOrEqual(1000);
  });

  it('never verifies a report whose signed bytes or signature changed', async () => {
    const rnd = prng(0xc0ffee);
    for (let i = 0; i < 150; i++) {
      const b = Buffer.from(VALID);
      const at = rnd.below(SNP_SIGNED_LENGTH + 144);
      b[at] = b[at]! ^ (1 << rnd.below(8));
      let ev: unknown;
      try {
        ev = { attestation_report: sevJsonFromReport(parseSnpReport(b)), cert_chain: chain };
      } catch (e) {
        expectVerificationError(e);
        continue;
      }
      const outcome = await verifier.evaluate(ev, expected).then(
        () => 'verified',
        (e: unknown) => {
          expectVerificationError(e);
          return 'refused';
        },
      );
      // Reserved bytes are not carried by the JSON and are rebuilt as zero: a flip there verifies
      // only if it does not reach the signed bytes the verifier rebuilds, which the signature covers.
      if (outcome === 'verified') {
        expect(encodeFromJson(ev).subarray(0, SNP_SIGNED_LENGTH)).toEqual(
          VALID.subarray(0, SNP_SIGNED_LENGTH),
        );
      }
    }
  });

  it('refuses mutated evidence JSON with a VerificationError', async () => {
    const rnd = prng(42);
    const base = sevJsonFromReport(parseSnpReport(VALID)) as Record<string, unknown>;
    const keys = Object.keys(base);
    const junk: unknown[] = [
      null,
      -1,
      1.5,
      2 ** 60,
      '',
      'x'.repeat(100),
      [],
      [256],
      {},
      true,
      Array(100000).fill(0),
    ];
    for (let i = 0; i < 300; i++) {
      const report: Record<string, unknown> = structuredClone(base);
      const key = keys[rnd.below(keys.length)]!;
      const value = report[key];
      if (Array.isArray(value) && rnd.below(2) === 0) {
        const arr = [...value];
        arr[rnd.below(arr.length)] = junk[rnd.below(junk.length)];
        report[key] = arr;
      } else if (rnd.below(5) === 0) {
        delete report[key];
      } else {
        report[key] = junk[rnd.below(junk.length)];
      }
      const evidence =
        rnd.below(10) === 0
          ? { attestation_report: report }
          : { attestation_report: report, cert_chain: chain };
      await verifier.evaluate(evidence, expected).then(() => {
        // Only a change that leaves the signed fields as they were may pass.
        expect(encodeFromJson(evidence).subarray(0, SNP_SIGNED_LENGTH)).toEqual(
          VALID.subarray(0, SNP_SIGNED_LENGTH),
        );
      }, expectVerificationError);
    }
  });
});

function encodeFromJson(ev: unknown): Buffer {
  return encodeSnpReport(
    reportFieldsFromSevJson((ev as { attestation_report: Record<string, unknown> }).attestation_report),
  );
}
