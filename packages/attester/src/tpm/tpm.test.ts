import { createHash, createPublicKey } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  attestationKeyTemplate,
  extendPcr,
  parseAttest,
  parseSignature,
  pcrDigest,
  TPM_ALG,
  TPM_RH,
  Tpm,
  verifySignature,
} from '@broker/tpm';
import { type SwtpmInstance, startSwtpm, tpm2Tool } from '@broker/tpm/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttesterError, EvidenceCollectionFailed } from '../attester.js';
import { platformContext } from '../platform.js';
import { getAttester } from '../registry.js';
import {
  AA_TPM_AK_HANDLE,
  AA_TPM_DEVICE,
  DEFAULT_TPM_AK_HANDLE,
  parseAkHandle,
  resizeReportData,
  TpmAttester,
  type TpmEvidence,
  tpmModule,
} from './index.js';

const sha256 = (b: Uint8Array | string) => new Uint8Array(createHash('sha256').update(b).digest());
const unhex = (s: string) => new Uint8Array(Buffer.from(s, 'hex'));
const ECC_HANDLE = 0x81010003;

let swtpm: SwtpmInstance;
let root: string;

beforeAll(async () => {
  swtpm = await startSwtpm();
  root = await mkdtemp(join(tmpdir(), 'tpm-attester-'));
  const tpm = Tpm.open(swtpm.address);
  try {
    // The AK a provisioning step leaves at upstream's default handle, and an ECC key upstream would refuse.
    const rsa = await tpm.createPrimary(TPM_RH.ENDORSEMENT, attestationKeyTemplate('rsa2048'));
    await tpm.evictControl(TPM_RH.OWNER, rsa.handle, DEFAULT_TPM_AK_HANDLE);
    await tpm.flushContext(rsa.handle);
    const ecc = await tpm.createPrimary(TPM_RH.ENDORSEMENT, attestationKeyTemplate('ecc-p256'));
    await tpm.evictControl(TPM_RH.OWNER, ecc.handle, ECC_HANDLE);
    await tpm.flushContext(ecc.handle);
  } finally {
    await tpm.close();
  }
});

afterAll(async () => {
  await swtpm?.stop();
  if (root) await rm(root, { recursive: true, force: true });
});

function checkEvidence(ev: TpmEvidence, nonce: Uint8Array): void {
  // Upstream's struct order and encodings.
  expect(Object.keys(ev)).toEqual(['tpm_quote', 'ak_public']);
  expect(Object.keys(ev.tpm_quote)).toEqual(['signature', 'message', 'pcrs']);
  expect(ev.tpm_quote.pcrs).toHaveLength(24);
  for (const p of ev.tpm_quote.pcrs) expect(p).toMatch(/^[0-9a-f]{64}$/);
  const b64 = /^[A-Za-z0-9+/]+={0,2}$/;
  expect(ev.tpm_quote.signature).toMatch(b64);
  expect(ev.tpm_quote.message).toMatch(b64);
  expect(ev.ak_public).toMatch(b64);

  // What trustee's tpm verifier checks: signature by ak_public, PCR digest, nonce = report data resized to 32.
  const message = new Uint8Array(Buffer.from(ev.tpm_quote.message, 'base64'));
  const signature = parseSignature(new Uint8Array(Buffer.from(ev.tpm_quote.signature, 'base64')));
  expect(signature.sigAlg).toBe(TPM_ALG.RSASSA);
  expect(signature.hash).toBe(TPM_ALG.SHA256);
  const ak = createPublicKey({ key: Buffer.from(ev.ak_public, 'base64'), format: 'der', type: 'spki' });
  expect(ak.asymmetricKeyType).toBe('rsa');
  expect(verifySignature(ak, message, signature)).toBe(true);
  const attest = parseAttest(message);
  expect(attest.extraData).toEqual(nonce);
  expect(pcrDigest(ev.tpm_quote.pcrs.map(unhex), attest.attested.pcrSelect, TPM_ALG.SHA256)).toEqual(
    attest.attested.pcrDigest,
  );
}

describe('tpm attester against swtpm', () => {
  const env = () => ({ BROKER_TPM: swtpm.address });

  it('is detected through BROKER_TPM and built by the registry', async () => {
    const d = await tpmModule.detect(platformContext({ env: env() }));
    expect(d).toEqual({
      detected: true,
      reason: `BROKER_TPM=${swtpm.address}, default AK handle 0x81010002`,
    });
    expect(getAttester('tpm', { env: env() })).toBeInstanceOf(TpmAttester);
  });

  it('quotes all SHA-256 PCRs with 48-byte report data truncated to 32 bytes', async () => {
    const reportData = new Uint8Array(48).map((_, i) => i + 1);
    const ev = await getAttester('tpm', { env: env() }).getEvidence(reportData);
    checkEvidence(ev as TpmEvidence, reportData.subarray(0, 32));
  });

  it('zero-pads short report data to 32 bytes', async () => {
    const ev = await new TpmAttester({ env: env() }).getEvidence(new Uint8Array([0xaa, 0xbb]));
    const expected = new Uint8Array(32);
    expected.set([0xaa, 0xbb]);
    checkEvidence(ev, expected);
    expect(resizeReportData(new Uint8Array(64).fill(1))).toEqual(new Uint8Array(32).fill(1));
  });

  it('binds init-data by extending PCR8, and the next quote carries it', async () => {
    const attester = new TpmAttester({ env: env() });
    const before = await attester.getRuntimeMeasurement(8);
    const digest = sha256('algorithm = "sha256"\nversion = "0.1.0"\n');
    await attester.bindInitData(digest);
    const expected = extendPcr(before, digest);
    expect(await attester.getRuntimeMeasurement(8)).toEqual(expected);
    const ev = await attester.getEvidence(sha256('nonce'));
    expect(ev.tpm_quote.pcrs[8]).toBe(Buffer.from(expected).toString('hex'));
    // tpm2-tools reads the same PCR8.
    const out = await tpm2Tool(swtpm, 'tpm2_pcrread', ['sha256:8']);
    expect(out.toLowerCase()).toContain(Buffer.from(expected).toString('hex'));
    // Once: binding the same digest again (an agent given the initdata after process-user-data bound
    // it, or restarted) leaves PCR8 as it is; another digest is a conflict, not a second extend.
    await attester.bindInitData(digest);
    expect(await attester.getRuntimeMeasurement(8)).toEqual(expected);
    await expect(attester.bindInitData(sha256('another initdata'))).rejects.toThrow(
      /PCR 8 holds [0-9a-f]{64}, not this init-data's value/,
    );
    expect(await attester.getRuntimeMeasurement(8)).toEqual(expected);
  });

  it('refuses init-data digests that are not SHA-256 sized, and bad registers', async () => {
    const attester = new TpmAttester({ env: env() });
    await expect(attester.bindInitData(new Uint8Array(48))).rejects.toThrow(/expected sha256 digest/);
    await expect(attester.extendRuntimeMeasurement(new Uint8Array(32), 24)).rejects.toThrow(
      /invalid PCR index 24/,
    );
    await expect(attester.getRuntimeMeasurement(-1)).rejects.toThrow(AttesterError);
  });

  it('extends runtime measurement registers', async () => {
    const attester = new TpmAttester({ env: env() });
    const old = await attester.getRuntimeMeasurement(23);
    const d = sha256('event');
    await attester.extendRuntimeMeasurement(d, 23);
    expect(await attester.getRuntimeMeasurement(23)).toEqual(extendPcr(old, d));
    // PCR 17 (the event log's default) is a DRTM PCR: a TPM refuses extends from locality 0.
    await expect(attester.extendRuntimeMeasurement(d, 17)).rejects.toThrow(/TPM_RC_LOCALITY/);
  });

  it('fails clearly for a non-RSA AK and for a missing AK', async () => {
    const ecc = new TpmAttester({ env: { ...env(), [AA_TPM_AK_HANDLE]: '0x81010003' } });
    const err = await ecc.getEvidence(new Uint8Array(32)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EvidenceCollectionFailed);
    expect((err as Error).message).toMatch(/AK at 0x81010003 is not an RSA key/);
    const missing = new TpmAttester({ env: env(), akHandle: 0x81010099 });
    const err2 = await missing.getEvidence(new Uint8Array(32)).catch((e: unknown) => e);
    expect(err2).toBeInstanceOf(EvidenceCollectionFailed);
    expect((err2 as Error).message).toMatch(
      /TPM quote with AK 0x81010099 on swtpm:.* failed: TPM2_ReadPublic failed/,
    );
  });

  it('fails evidence collection when no TPM can be found', async () => {
    const err = await new TpmAttester({ env: {}, root })
      .getEvidence(new Uint8Array(32))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EvidenceCollectionFailed);
    expect((err as Error).message).toMatch(/No TPM device found/);
  });
});

describe('tpm detection as upstream', () => {
  it('needs /dev/tpm0..2 or an existing AA_TPM_DEVICE, and a valid AK handle', async () => {
    const ctx = (env: Record<string, string>, r = root) => platformContext({ env, root: r });
    expect((await tpmModule.detect(ctx({}))).detected).toBe(false);
    const devRoot = join(root, 'with-tpm');
    await mkdir(join(devRoot, 'dev'), { recursive: true });
    await writeFile(join(devRoot, 'dev', 'tpm1'), '');
    expect(await tpmModule.detect(ctx({}, devRoot))).toEqual({
      detected: true,
      reason: '/dev/tpm1, default AK handle 0x81010002',
    });
    expect(await tpmModule.detect(ctx({ [AA_TPM_DEVICE]: '/dev/tpm9' }, devRoot))).toEqual({
      detected: false,
      reason: 'AA_TPM_DEVICE is set to "/dev/tpm9", but the device does not exist',
    });
    expect((await tpmModule.detect(ctx({ [AA_TPM_DEVICE]: '/dev/tpm1' }, devRoot))).detected).toBe(true);
    expect(await tpmModule.detect(ctx({ [AA_TPM_AK_HANDLE]: 'zz' }, devRoot))).toEqual({
      detected: false,
      reason: '/dev/tpm1, invalid AK handle "zz" in AA_TPM_AK_HANDLE',
    });
    await expect(tpmModule.detect(ctx({ BROKER_TPM: 'tcp:1' }))).rejects.toThrow(/BROKER_TPM/);
  });

  it('parses AA_TPM_AK_HANDLE like upstream', () => {
    expect(parseAkHandle('0x81010002')).toBe(0x81010002);
    expect(parseAkHandle('81000003')).toBe(0x81000003);
    expect(parseAkHandle('0x0x81')).toBe(0x81);
    expect(parseAkHandle('0000000081010002')).toBe(0x81010002);
    expect(parseAkHandle('0X81010002')).toBeUndefined();
    expect(parseAkHandle('')).toBeUndefined();
    expect(parseAkHandle('0x1ffffffff')).toBeUndefined();
    expect(parseAkHandle('0x8101 0002')).toBeUndefined();
  });
});
