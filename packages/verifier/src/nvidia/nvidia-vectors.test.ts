// trustee's Hopper vectors: the report with its device chain verifies against the pinned root and
// gives trustee's claims; tampering with any of the three bindings fails with the check's code.
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import { getVerifier } from '../registry.js';
import { verificationFailure } from '../testing/failure.js';
import { parsePemChain, verifyNvidiaChain } from './chain.js';
import { NVIDIA_DEVICE_ROOT_PEM, NVIDIA_DEVICE_ROOT_SHA1 } from './device-root.js';
import { NvidiaVerifier } from './index.js';
import { parseNvidiaReport } from './spdm.js';
import { createTestDevice } from './test-device.js';

const text = (name: string) => readFileSync(vector(`trustee/nvidia/${name}`), 'utf8');
const REPORT = text('hopperAttestationReport.txt');
const CHAIN = text('hopper_cert_chain_case1.txt');
const NONCE = Buffer.from('931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb', 'hex');
const UUID = '1111-2222-33333-444444-555555';
const FWID =
  'f5c384aebb579217a2c66b17ed0f28e6a9b8d639041acd7b4721cec004f7275494ba94bb5cdfdb3055ee051762b1f75d';

function evidence(report: string, chain: string, arch = 'HOPPER') {
  return {
    device_evidence_list: [
      { arch, uuid: UUID, evidence: report, certificate: Buffer.from(chain).toString('base64') },
    ],
  };
}

const verifier = new NvidiaVerifier();

describe('trustee Hopper vectors', () => {
  it('the registry serves the nvidia verifier', () => {
    expect(getVerifier('nvidia')).toBeInstanceOf(NvidiaVerifier);
  });

  it('the pinned root is trustee nvidia_device_root.pem, fingerprint 72:BE:15:B8…', () => {
    expect(NVIDIA_DEVICE_ROOT_PEM.trim()).toBe(text('nvidia_device_root.pem').trim());
    expect(new X509Certificate(NVIDIA_DEVICE_ROOT_PEM).fingerprint).toBe(NVIDIA_DEVICE_ROOT_SHA1);
  });

  it('reproduces hopperAttestationReport-claims.txt', async () => {
    const results = await verifier.evaluate(evidence(REPORT, CHAIN), { reportData: NONCE });
    expect(results).toHaveLength(1);
    expect(results[0]!.class).toBe('gpu');
    expect(results[0]!.claims).toStrictEqual(JSON.parse(text('hopperAttestationReport-claims.txt')));
  });

  it('accepts the report base64-encoded and arch in either case trustee accepts', async () => {
    const b64 = Buffer.from(REPORT, 'hex').toString('base64');
    const [r] = await verifier.evaluate(evidence(b64, CHAIN, 'Hopper'), { reportData: NONCE });
    expect(r!.claims.arch).toBe('Hopper');
  });

  it('the report data is cut to the 32-byte SPDM nonce, as regularize_data does (48-byte SHA-384)', async () => {
    const reportData = Buffer.concat([NONCE, Buffer.alloc(16, 0xee)]);
    await expect(verifier.evaluate(evidence(REPORT, CHAIN), { reportData })).resolves.toHaveLength(1);
  });

  it('the CoCo CI report verifies with its SHA-384 report data', async () => {
    const reportData = Buffer.from(
      '87d8e24ab336adafe228d49e83d745f6dba4ae505372b6a5704820856b343fece279b616efefc2aae21da80cf5581250',
      'hex',
    );
    const [r] = await verifier.evaluate(
      evidence(text('hopper_coco_report1.txt'), text('hopper_coco_certs1.txt')),
      {
        reportData,
      },
    );
    expect(r!.claims.config).toMatchObject({
      vbios_version: expect.any(String),
      driver_version: expect.any(String),
    });
  });

  it('a flipped signed byte fails the signature check', async () => {
    const bytes = Buffer.from(REPORT, 'hex');
    // Block 1 takes 55 bytes (4 + 3 + 48): this is byte 10 of block 2's value.
    bytes[37 + 8 + 55 + 7 + 10]! ^= 0x01;
    const e = await verificationFailure(
      verifier.evaluate(evidence(bytes.toString('hex'), CHAIN), { reportData: NONCE }),
    );
    expect(e.code).toBe('REPORT_SIGNATURE_INVALID');
    expect(e.message).toMatch(/signature/);
  });

  it('a flipped signature byte fails', async () => {
    const bytes = Buffer.from(REPORT, 'hex');
    bytes[bytes.length - 1]! ^= 0x80;
    const e = await verificationFailure(
      verifier.evaluate(evidence(bytes.toString('hex'), CHAIN), { reportData: NONCE }),
    );
    expect(e.code).toBe('REPORT_SIGNATURE_INVALID');
  });

  it('a wrong nonce fails the report data check', async () => {
    const reportData = Buffer.from(NONCE);
    reportData[0]! ^= 1;
    const e = await verificationFailure(verifier.evaluate(evidence(REPORT, CHAIN), { reportData }));
    expect(e.code).toBe('REPORT_DATA_MISMATCH');
    expect(e.message).toMatch(/nonce/);
  });

  it('a chain from another root fails, even with the same leaf', async () => {
    const other = createTestDevice();
    const certs = CHAIN.split(/(?=-----BEGIN CERTIFICATE-----)/);
    const chain = `${certs.slice(0, -1).join('')}${other.chainPem.split(/(?=-----BEGIN CERTIFICATE-----)/).at(-1)}`;
    const e = await verificationFailure(verifier.evaluate(evidence(REPORT, chain), { reportData: NONCE }));
    expect(e.code).toBe('CERT_CHAIN_INVALID');
    expect(e.message).toMatch(/root/);
  });

  it('a simulated device trusted by its own root is refused without that root', async () => {
    const device = createTestDevice();
    const ev = device.evidence(NONCE);
    const e = await verificationFailure(verifier.evaluate(ev, { reportData: NONCE }));
    expect(e.code).toBe('CERT_CHAIN_INVALID');
    const [r] = await verifier.evaluate(ev, {
      reportData: NONCE,
      nvidia: { trustedRoots: [device.rootPem] },
    });
    expect(r!.claims).toMatchObject({ arch: 'Hopper', config: { fwid: device.fwid } });
  });

  it.each([
    ['case2: root only', 'hopper_cert_chain_case2.txt', 'REPORT_SIGNATURE_INVALID'],
    ['case3: missing ICA', 'hopper_cert_chain_case3.txt', 'CERT_CHAIN_INVALID'],
    ['case4: missing leaf', 'hopper_cert_chain_case4.txt', 'REPORT_SIGNATURE_INVALID'],
  ])('trustee chain %s fails', async (_name, file, code) => {
    const e = await verificationFailure(
      verifier.evaluate(evidence(REPORT, text(file)), { reportData: NONCE }),
    );
    expect(e.code).toBe(code);
  });

  it.each([
    ['case2: root only', 'hopper_cert_chain_case2.txt', /at least/],
    ['case3: missing ICA', 'hopper_cert_chain_case3.txt', /not issued and signed/],
    ['case4: missing leaf', 'hopper_cert_chain_case4.txt', /FWID/],
  ])('trustee chain %s fails the chain check alone, naming it', (_name, file, message) => {
    expect(() => verifyNvidiaChain(parsePemChain(text(file)), { now: new Date(), fwid: FWID })).toThrow(
      message,
    );
  });

  it('the certificates must be valid at the verification time', async () => {
    const e = await verificationFailure(
      verifier.evaluate(evidence(REPORT, CHAIN), {
        reportData: NONCE,
        now: new Date('2019-01-01T00:00:00Z'),
      }),
    );
    expect(e.code).toBe('CERT_NOT_VALID_AT_TIME');
  });

  it('a FWID in the report other than the leaf certificate fails', () => {
    const report = parseNvidiaReport(Buffer.from(REPORT, 'hex'));
    expect(report.response.opaque.fwid).toBe(FWID);
    expect(() =>
      verifyNvidiaChain(parsePemChain(CHAIN), { now: new Date(), fwid: `00${FWID.slice(2)}` }),
    ).toThrow(/FWID mismatch/);
  });

  it('local mode verifies Hopper only; an unknown arch is malformed', async () => {
    const e1 = await verificationFailure(
      verifier.evaluate(evidence(REPORT, CHAIN, 'BLACKWELL'), { reportData: NONCE }),
    );
    expect(e1.code).toBe('UNSUPPORTED_PROCESSOR');
    const e2 = await verificationFailure(
      verifier.evaluate(evidence(REPORT, CHAIN, 'hopper'), { reportData: NONCE }),
    );
    expect(e2.code).toBe('EVIDENCE_MALFORMED');
  });

  it('the SHA-1 fingerprint compare is against the pinned root bytes', () => {
    const root = new X509Certificate(NVIDIA_DEVICE_ROOT_PEM);
    expect(createHash('sha1').update(root.raw).digest('hex')).toBe(
      NVIDIA_DEVICE_ROOT_SHA1.replace(/:/g, '').toLowerCase(),
    );
  });
});
