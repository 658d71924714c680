import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ImageTagMismatchError, InitDataInputError, MissingPcrError, UsageError } from './errors.js';
import { parseMeasurementManifest } from './manifest.js';
import { checkPlatformTee, computeReferenceValues, initDataPcr8, referenceValueName } from './values.js';

const INITDATA =
  'algorithm = "sha256"\nversion = "0.1.0"\n\n[data]\n"aa.toml" = \'\'\'\n[token_configs.kbs]\nurl = "https://kbs.example:8080"\n\'\'\'\n';
const hex = (label: string) => createHash('sha256').update(label).digest('hex');
const expectedPcr8 = (toml: string) =>
  createHash('sha256')
    .update(Buffer.alloc(32))
    .update(createHash('sha256').update(toml).digest())
    .digest('hex');

function manifest(pcrs: number[], tag = 'podvm:1.0') {
  return parseMeasurementManifest(
    JSON.stringify({ image_tag: tag, pcrs: Object.fromEntries(pcrs.map((p) => [String(p), [hex(`${p}`)]])) }),
  );
}

describe('initDataPcr8', () => {
  it('is sha256(32 zero bytes || sha256(exact file bytes))', () => {
    const r = initDataPcr8(Buffer.from(INITDATA));
    expect(r.algorithm).toBe('sha256');
    expect(r.digest).toBe(createHash('sha256').update(INITDATA).digest('hex'));
    expect(r.pcr8).toBe(expectedPcr8(INITDATA));
    // One more byte (a trailing newline) is another document.
    expect(initDataPcr8(Buffer.from(`${INITDATA}\n`)).pcr8).not.toBe(r.pcr8);
  });

  it('refuses sha384 initdata unless truncation is asked for, then uses the first 32 bytes', () => {
    const toml = INITDATA.replace('sha256', 'sha384');
    expect(() => initDataPcr8(Buffer.from(toml))).toThrow(/--truncate/);
    const r = initDataPcr8(Buffer.from(toml), { truncate: true });
    const digest = createHash('sha384').update(toml).digest();
    expect(r.digest).toBe(digest.toString('hex'));
    expect(r.pcr8).toBe(
      createHash('sha256').update(Buffer.alloc(32)).update(digest.subarray(0, 32)).digest('hex'),
    );
  });

  it('refuses documents that are not initdata', () => {
    for (const bad of [
      '',
      'version = "0.1.0"',
      'algorithm = "sha-256"\nversion = "0.1.0"\n[data]\n',
      '\xff',
    ]) {
      expect(() => initDataPcr8(Buffer.from(bad))).toThrow(InitDataInputError);
    }
    expect(() => initDataPcr8(Buffer.alloc(1024 * 1024 + 1, 0x20))).toThrow(/larger than/);
  });
});

describe('checkPlatformTee', () => {
  it('accepts the vTPM TEEs of each platform', () => {
    expect(checkPlatformTee('azure', 'az-snp-vtpm')).toBe('az-snp-vtpm');
    expect(checkPlatformTee('azure', 'az-tdx-vtpm')).toBe('az-tdx-vtpm');
    expect(checkPlatformTee('libvirt', 'tpm')).toBe('tpm');
  });

  it('takes bare-metal snp and tdx on --platform baremetal, and names that platform elsewhere', () => {
    expect(checkPlatformTee('baremetal', 'snp')).toBe('snp');
    expect(checkPlatformTee('baremetal', 'tdx')).toBe('tdx');
    expect(() => checkPlatformTee('azure', 'snp')).toThrow(
      /HOSTDATA.*--platform baremetal; on azure use az-snp-vtpm or az-tdx-vtpm/,
    );
    expect(() => checkPlatformTee('azure', 'tdx')).toThrow(/MRCONFIGID/);
    expect(() => checkPlatformTee('baremetal', 'az-snp-vtpm')).toThrow(/use snp or tdx/);
  });

  it('refuses unknown platforms and TEEs of another platform', () => {
    expect(() => checkPlatformTee('aws', 'az-snp-vtpm')).toThrow(UsageError);
    expect(() => checkPlatformTee('azure', 'tpm')).toThrow(/not a TEE of platform azure/);
    expect(() => checkPlatformTee('libvirt', 'az-snp-vtpm')).toThrow(/use tpm/);
    expect(() => checkPlatformTee('azure', '__proto__')).toThrow(UsageError);
    expect(() => checkPlatformTee('__proto__', 'tpm')).toThrow(/unknown --platform/);
  });
});

describe('computeReferenceValues', () => {
  const initData = initDataPcr8(Buffer.from(INITDATA));

  it('names every PCR for the TEE, with PCR8 from the initdata', () => {
    const values = computeReferenceValues({
      tee: 'az-snp-vtpm',
      measurements: manifest([3, 9, 11, 12, 4]),
      imageTag: '1.0',
      initData,
    });
    const m = manifest([3, 9, 11, 12, 4]);
    expect(values).toEqual({
      snp_pcr03: [m.pcrs.get(3)],
      snp_pcr04: [m.pcrs.get(4)],
      snp_pcr08: [expectedPcr8(INITDATA)],
      snp_pcr09: [m.pcrs.get(9)],
      snp_pcr11: [m.pcrs.get(11)],
      snp_pcr12: [m.pcrs.get(12)],
    });
    expect(Object.keys(values)).toEqual([
      'snp_pcr03',
      'snp_pcr04',
      'snp_pcr08',
      'snp_pcr09',
      'snp_pcr11',
      'snp_pcr12',
    ]);
  });

  it('uses the prefixes the policies query', () => {
    expect(referenceValueName('az-snp-vtpm', 11)).toBe('snp_pcr11');
    expect(referenceValueName('az-tdx-vtpm', 3)).toBe('tdx_pcr03');
    expect(referenceValueName('tpm', 8)).toBe('tpm_pcr08');
  });

  it('refuses a manifest for another tag', () => {
    expect(() =>
      computeReferenceValues({
        tee: 'tpm',
        measurements: manifest([3, 9, 11, 12]),
        imageTag: '1.1',
        initData,
      }),
    ).toThrow(ImageTagMismatchError);
  });

  it('refuses a manifest without a tag unless the source proves it', () => {
    const m = parseMeasurementManifest(
      JSON.stringify({
        measurements: { sha256: { pcr03: hex('3'), pcr09: hex('9'), pcr11: hex('11'), pcr12: hex('12') } },
      }),
    );
    expect(() => computeReferenceValues({ tee: 'tpm', measurements: m, imageTag: '1.0', initData })).toThrow(
      /names no image tag/,
    );
    expect(
      computeReferenceValues({ tee: 'tpm', measurements: m, imageTag: '1.0', initData, tagFromSource: true }),
    ).toHaveProperty('tpm_pcr11', [hex('11')]);
  });

  it('still refuses a tag mismatch when the source gives the tag', () => {
    expect(() =>
      computeReferenceValues({
        tee: 'tpm',
        measurements: manifest([3, 9, 11, 12], 'podvm:2.0'),
        imageTag: '1.0',
        initData,
        tagFromSource: true,
      }),
    ).toThrow(ImageTagMismatchError);
  });

  it('refuses a manifest missing PCR 03, 09, 11 or 12 and names them', () => {
    for (const missing of [3, 9, 11, 12]) {
      const pcrs = [3, 9, 11, 12].filter((p) => p !== missing);
      expect(() =>
        computeReferenceValues({
          tee: 'az-tdx-vtpm',
          measurements: manifest(pcrs),
          imageTag: '1.0',
          initData,
        }),
      ).toThrow(new RegExp(`no value for PCR ${String(missing).padStart(2, '0')}`));
    }
    let caught: unknown;
    try {
      computeReferenceValues({ tee: 'tpm', measurements: manifest([3]), imageTag: '1.0', initData });
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(MissingPcrError);
    expect((caught as MissingPcrError).pcrs).toEqual([9, 11, 12]);
  });
});
