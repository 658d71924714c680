// Hostile nvidia evidence JSON: every member the verifier reads is type-checked and size-limited
// before anything is decoded, and one bad device fails the whole evidence.
import { describe, expect, it } from 'vitest';
import { VerificationError } from '../errors.js';
import { MAX_NVIDIA_DEVICES, NvidiaVerifier } from './index.js';
import { createTestDevice } from './test-device.js';

const device = createTestDevice();
const NONCE = Buffer.alloc(32, 0x42);
const good = device.evidence(NONCE).device_evidence_list[0]!;
const verifier = new NvidiaVerifier();
const expected = { reportData: NONCE, nvidia: { trustedRoots: [device.rootPem] } };

async function code(evidence: unknown): Promise<string> {
  const e = await verifier.evaluate(evidence, expected).then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(VerificationError);
  return `${(e as VerificationError).code}: ${(e as Error).message}`;
}

describe('nvidia evidence JSON', () => {
  it('the simulated device verifies (the baseline the cases below break)', async () => {
    await expect(verifier.evaluate({ device_evidence_list: [good] }, expected)).resolves.toHaveLength(1);
  });

  it.each([
    ['not an object', [], /^EVIDENCE_MALFORMED/],
    ['no device list', {}, /device_evidence_list/],
    ['a device that is not an object', { device_evidence_list: ['x'] }, /^EVIDENCE_MALFORMED/],
    ['no arch', { device_evidence_list: [{ ...good, arch: undefined }] }, /"arch" is missing/],
    ['an arch of another type', { device_evidence_list: [{ ...good, arch: 5 }] }, /"arch" must be a string/],
    ['a uuid of another type', { device_evidence_list: [{ ...good, uuid: 1 }] }, /"uuid" must be a string/],
    [
      'evidence neither hex nor base64',
      { device_evidence_list: [{ ...good, evidence: 'zz*' }] },
      /neither hex nor/,
    ],
    [
      'a certificate not base64',
      { device_evidence_list: [{ ...good, certificate: '%%' }] },
      /not standard base64/,
    ],
    [
      'a certificate with no PEM block',
      { device_evidence_list: [{ ...good, certificate: Buffer.from('hello').toString('base64') }] },
      /^CERT_CHAIN_INVALID/,
    ],
    [
      'a PEM block that is not a certificate',
      {
        device_evidence_list: [
          {
            ...good,
            certificate: Buffer.from(
              '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n',
            ).toString('base64'),
          },
        ],
      },
      /^CERT_MALFORMED/,
    ],
    [
      'too many devices',
      { device_evidence_list: Array(MAX_NVIDIA_DEVICES + 1).fill(good) },
      /^EVIDENCE_TOO_LARGE/,
    ],
    [
      'a chain of more than 10 certificates',
      {
        device_evidence_list: [
          { ...good, certificate: Buffer.from(device.chainPem.repeat(4)).toString('base64') },
        ],
      },
      /^EVIDENCE_TOO_LARGE/,
    ],
    [
      'an oversized uuid',
      { device_evidence_list: [{ ...good, uuid: 'u'.repeat(200) }] },
      /^EVIDENCE_TOO_LARGE/,
    ],
  ])('refuses %s', async (_what, evidence, message) => {
    expect(await code(evidence)).toMatch(message);
  });

  it('one device bound to another nonce fails the evidence, even after a good one', async () => {
    const bad = device.evidence(Buffer.alloc(32, 1)).device_evidence_list[0]!;
    expect(await code({ device_evidence_list: [good, bad] })).toMatch(/^REPORT_DATA_MISMATCH/);
  });

  it('a report signed by another device key fails the signature, though its chain is trusted', async () => {
    const other = createTestDevice();
    const forged = { ...good, evidence: other.report(NONCE).toString('hex') };
    expect(await code({ device_evidence_list: [forged] })).toMatch(/^REPORT_SIGNATURE_INVALID/);
  });
});
