import { createHash, createPublicKey, generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import {
  hclAkPub,
  hclUserData,
  parseAmdRootBundle,
  parseHclReport,
  parseSnpReport,
  parseVekCertificate,
  verifySnpReport,
} from '@broker/verifier';
import { beforeAll, describe, expect, it } from 'vitest';
import { MockTeeError } from './errors.js';
import {
  buildHclReport,
  createHclReport,
  HCL_REPORT_NV_SIZE,
  MAX_RUNTIME_CLAIMS_SIZE,
  reportDataForClaims,
  runtimeClaims,
  userDataHex,
  type VmConfiguration,
} from './hcl.js';
import { createHardwareRoots, type HardwareRoots, rootBundlePem } from './roots.js';

const FIXTURES = vector('trustee/az-snp-vtpm');
const fixtureReport = readFileSync(join(FIXTURES, 'hcl-report.bin'));
/** The fixed part of Azure's layout: header, SNP report, IGVM request data header. */
const VAR_DATA_OFFSET = 32 + 1184 + 20;

function fixtureParts() {
  const varSize = fixtureReport.readUInt32LE(1216 + 16);
  const varData = fixtureReport.subarray(VAR_DATA_OFFSET, VAR_DATA_OFFSET + varSize);
  const claims = JSON.parse(varData.toString('utf8')) as {
    keys: { kid: string; n: string; e: string }[];
    'vm-configuration': {
      'console-enabled': boolean;
      'secure-boot': boolean;
      'tpm-enabled': boolean;
      vmUniqueId: string;
    };
    'user-data': string;
  };
  return { snp: fixtureReport.subarray(32, 32 + 1184), varData, claims };
}

describe('HCL report layout against the Azure fixture', () => {
  it('frames the fixture SNP report and claims into the fixture bytes exactly', () => {
    const { snp, varData } = fixtureParts();
    expect(buildHclReport(snp, varData).equals(fixtureReport)).toBe(true);
  });

  it('writes runtime claims byte for byte as the paravisor does', () => {
    const { varData, claims } = fixtureParts();
    const key = (kid: string) => {
      const k = claims.keys.find((x) => x.kid === kid)!;
      return createPublicKey({ key: { kty: 'RSA', n: k.n, e: k.e }, format: 'jwk' });
    };
    const vm = claims['vm-configuration'];
    const ours = runtimeClaims({
      akPublic: key('HCLAkPub'),
      ekPublic: key('HCLEkPub'),
      userData: Buffer.from(claims['user-data'], 'hex'),
      vmConfiguration: {
        consoleEnabled: vm['console-enabled'],
        secureBoot: vm['secure-boot'],
        tpmEnabled: vm['tpm-enabled'],
        vmUniqueId: vm.vmUniqueId,
      },
    });
    expect(ours.equals(varData)).toBe(true);
    // And the fixture's SNP report binds them the same way.
    expect(
      reportDataForClaims(ours)
        .subarray(0, 32)
        .equals(fixtureReport.subarray(32 + 0x50, 32 + 0x70)),
    ).toBe(true);
  });
});

describe('createHclReport', () => {
  let roots: HardwareRoots;
  const ak = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey;
  const ek = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey;
  const vm: VmConfiguration = {
    consoleEnabled: true,
    secureBoot: true,
    tpmEnabled: true,
    vmUniqueId: '00000000-1111-2222-3333-444444444444',
  };
  const measurement = createHash('sha384').update('paravisor').digest();

  beforeAll(async () => {
    roots = await createHardwareRoots({ rsaBits: 2048 });
  });

  it('is what the verifier parses: SNP report over the claims, the AK and the user data', () => {
    const userData = Buffer.from('c0ffee'.repeat(10), 'hex');
    const { report, runtimeClaims: claims } = createHclReport({
      roots,
      akPublic: ak,
      ekPublic: ek,
      userData,
      vmConfiguration: vm,
      measurement,
    });
    expect(report.length).toBe(HCL_REPORT_NV_SIZE);
    const hcl = parseHclReport(report);
    expect(hcl.reportType).toBe('snp');
    expect(hcl.varData.equals(claims)).toBe(true);
    const snp = parseSnpReport(hcl.hwReport);
    expect(snp.reportData.subarray(0, 32).equals(createHash('sha256').update(hcl.varData).digest())).toBe(
      true,
    );
    expect(snp.reportData.subarray(32).every((b) => b === 0)).toBe(true);
    expect(snp.measurement.equals(measurement)).toBe(true);
    expect(snp.vmpl).toBe(0);
    expect(snp.chipId.equals(roots.chipId)).toBe(true);
    expect(hclAkPub(hcl.varData).export({ format: 'jwk' })).toEqual(ak.export({ format: 'jwk' }));
    const ud = hclUserData(hcl.varData);
    expect(ud.length).toBe(64);
    expect(ud.subarray(0, userData.length).equals(userData)).toBe(true);
    expect(ud.subarray(userData.length).every((b) => b === 0)).toBe(true);
    // Signed by the VCEK, which chains to the test roots.
    verifySnpReport(
      snp,
      parseVekCertificate(roots.vcekDer),
      [parseAmdRootBundle(rootBundlePem(roots))],
      new Date(),
    );
  });

  it('names the keys as Azure does, EK marked for encryption', () => {
    const claims = JSON.parse(
      runtimeClaims({
        akPublic: ak,
        ekPublic: ek,
        userData: new Uint8Array(),
        vmConfiguration: vm,
      }).toString(),
    );
    expect(claims.keys.map((k: { kid: string; key_ops: string[] }) => [k.kid, k.key_ops])).toEqual([
      ['HCLAkPub', ['sign']],
      ['HCLEkPub', ['encrypt']],
    ]);
    expect(Object.keys(claims)).toEqual(['keys', 'vm-configuration', 'user-data']);
    expect(claims['user-data']).toBe('0'.repeat(128));
  });

  it('refuses user data over 64 bytes, non-RSA keys and claims that do not fit', () => {
    expect(() => userDataHex(new Uint8Array(65))).toThrow(MockTeeError);
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey;
    expect(() =>
      runtimeClaims({ akPublic: ec, ekPublic: ek, userData: new Uint8Array(), vmConfiguration: vm }),
    ).toThrow(/RSA/);
    const snp = Buffer.alloc(1184);
    expect(() => buildHclReport(snp, Buffer.alloc(MAX_RUNTIME_CLAIMS_SIZE + 1))).toThrow(MockTeeError);
    expect(buildHclReport(snp, Buffer.alloc(MAX_RUNTIME_CLAIMS_SIZE)).length).toBe(HCL_REPORT_NV_SIZE);
    expect(() => buildHclReport(Buffer.alloc(1183), Buffer.alloc(10))).toThrow(MockTeeError);
  });
});
