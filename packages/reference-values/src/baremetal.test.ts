// Bare-metal SNP and TDX: the RVPS entries `reference-values --platform baremetal` writes, the initdata
// digest as kata binds it (kata-types' `adjust_digest`: cut or zero-padded at the end to SNP HOSTDATA
// 32 bytes, TDX MRCONFIGID 48). The SNP value is the HOSTDATA a mock SNP guest launched with that
// initdata reports, and the TDX value the MRCONFIGID of a test-hardware quote, each bound by its verifier.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SnpAttester } from '@broker/attester';
import { startMockSnpDevice } from '@broker/mock-tee';
import { SnpVerifier, TdxVerifier } from '@broker/verifier';
import {
  createTestQuotingEnclave,
  createTestSgxPki,
  issueTestPck,
  signCollateral,
  signTestQuote,
  testQeIdentity,
  testTcbInfo,
} from '@broker/verifier/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { nodeReferenceValuesIo, referenceValuesMain } from './cli.js';
import { bareMetalInitData, bareMetalReferenceValues } from './values.js';

const dir = mkdtempSync(join(tmpdir(), 'refvals-baremetal-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const doc = (alg: string) => `algorithm = "${alg}"\nversion = "0.1.0"\n\n[data]\n"aa.toml" = ""\n`;
const digestOf = (alg: string) => createHash(alg).update(doc(alg)).digest();

async function refvals(...argv: string[]) {
  let out = '';
  let err = '';
  const code = await referenceValuesMain(argv, {
    ...nodeReferenceValuesIo,
    out: (s) => {
      out += s;
    },
    err: (s) => {
      err += s;
    },
  });
  return { code, out, err };
}

describe('reference-values --platform baremetal', () => {
  it('SNP: snp_host_data, and snp_launch_measurement when given; the ConfigMap names the TEE and the digest', async () => {
    const file = join(dir, 'snp.toml');
    writeFileSync(file, doc('sha384'));
    const measurement = 'ab'.repeat(48);
    const r = await refvals(
      ...['--platform', 'baremetal', '--tee', 'snp', '--initdata', file],
      ...['--launch-measurement', measurement.toUpperCase(), '--name', 'broker', '--namespace', 'trustee'],
    );
    expect(r.code, r.err).toBe(0);
    const cm = parse(r.out);
    expect(cm.metadata.name).toBe('broker-rvps-reference-values');
    expect(cm.metadata.annotations).toMatchObject({ 'broker.confidentialcontainers.org/tee': 'snp' });
    const [message] = JSON.parse(cm.data['reference-values.json']);
    expect(JSON.parse(Buffer.from(message.payload, 'base64').toString())).toEqual({
      snp_host_data: [digestOf('sha384').subarray(0, 32).toString('hex')],
      snp_launch_measurement: [measurement],
    });
    expect(message.provenance).toEqual({
      tee: 'snp',
      initdata_digest: digestOf('sha384').toString('hex'),
      initdata_algorithm: 'sha384',
    });
  });

  it('TDX: tdx_mr_config_id (a sha256 digest zero-padded to 48 bytes) and mr_td', async () => {
    const file = join(dir, 'tdx.toml');
    writeFileSync(file, doc('sha256'));
    const r = await refvals(
      ...['--platform', 'baremetal', '--tee', 'tdx', '--initdata', file, '--format', 'rvps-message'],
      ...['--launch-measurement', 'cd'.repeat(48)],
    );
    expect(r.code, r.err).toBe(0);
    const message = JSON.parse(r.out);
    expect(message).toMatchObject({ version: '0.1.0', type: 'sample' });
    expect(JSON.parse(Buffer.from(message.payload, 'base64').toString())).toEqual({
      mr_td: ['cd'.repeat(48)],
      tdx_mr_config_id: [Buffer.concat([digestOf('sha256'), Buffer.alloc(16)]).toString('hex')],
    });
  });

  it.each([
    [['--measurements', 'm.json'], /--measurements: a bare-metal SNP guest has no vTPM PCRs/],
    [['--image-tag', 'x'], /--image-tag: a bare-metal SNP guest has no vTPM PCRs/],
    [['--truncate'], /--truncate/],
    [['--launch-measurement', 'abcd'], /--launch-measurement must be 48 bytes in hex/],
  ])('refuses %j with the reason', async (extra, message) => {
    const file = join(dir, 'r.toml');
    writeFileSync(file, doc('sha256'));
    const r = await refvals(
      '--platform',
      'baremetal',
      '--tee',
      'snp',
      '--initdata',
      file,
      '--format',
      'rvps-message',
      ...extra,
    );
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
  });

  it('the SNP value is what a guest launched with that initdata reports, and what the snp verifier binds', async () => {
    const text = doc('sha512');
    const device = await startMockSnpDevice({
      stateDir: join(dir, 'snp-device'),
      // The host side: kata's HOSTDATA from the digest (the mock cuts it as kata does).
      initDataDigest: digestOf('sha512'),
      rootKeyBits: 2048,
    });
    try {
      const values = bareMetalReferenceValues('snp', bareMetalInitData(Buffer.from(text), 'snp'));
      const reportData = createHash('sha512').update('nonce').digest();
      const evidence = await new SnpAttester({ tsmRoot: device.tsmRoot, env: {} }).getEvidence(reportData);
      const [result] = await new SnpVerifier().evaluate(evidence, {
        reportData,
        initDataHash: digestOf('sha512'),
        trustedArks: [device.rootsBundlePem],
      });
      expect(values.snp_host_data).toEqual([result?.claims.init_data]);
    } finally {
      device.close();
    }
  });

  it('the TDX value is the MRCONFIGID the tdx verifier binds a sha256 initdata to (zero-padded to 48 bytes)', async () => {
    const text = doc('sha256');
    const values = bareMetalReferenceValues('tdx', bareMetalInitData(Buffer.from(text), 'tdx'));
    const platform = {
      fmspc: Buffer.from('00906ed50000', 'hex'),
      tcbComponents: [3, 3, 2, 2, 3, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0],
      pceSvn: 13,
    };
    const teeTcbSvn = [4, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    const pki = createTestSgxPki();
    const qe = createTestQuotingEnclave(pki, issueTestPck(pki, platform));
    const reportData = createHash('sha512').update('nonce').digest();
    const quote = signTestQuote(qe, {
      teeTcbSvn: Buffer.from(teeTcbSvn),
      reportData,
      // The host side: kata's MRCONFIGID.
      mrConfigId: Buffer.from(values.tdx_mr_config_id?.[0] as string, 'hex'),
    });
    const [result] = await new TdxVerifier().evaluate(
      { cc_eventlog: null, quote: quote.toString('base64') },
      {
        reportData,
        initDataHash: digestOf('sha256'),
        tdx: {
          trustedSgxRoots: [pki.root.pem],
          collateral: {
            tcbInfos: [
              signCollateral('tcbInfo', testTcbInfo(platform, teeTcbSvn), pki.tcbSigning.privateKey),
            ],
            qeIdentity: signCollateral('enclaveIdentity', testQeIdentity(), pki.tcbSigning.privateKey),
            signingCerts: [pki.tcbSigning.pem],
          },
        },
      },
    );
    expect(values.tdx_mr_config_id).toEqual([result?.claims.init_data]);
  });
});
