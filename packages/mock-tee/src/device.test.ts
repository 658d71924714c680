import { execFile } from 'node:child_process';
import { createHash, createHmac, X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  marshalCommand,
  parseResponse,
  parseTpmAddress,
  publicKeyFromTpmt,
  TPM_ALG,
  TPM_CC,
  TPM_RC,
  TPM_RH,
  TPMA_NV,
  TPMA_OBJECT,
  Tpm,
  TpmError,
  TpmReader,
  TpmWriter,
} from '@broker/tpm';
import { requirePrograms, type SwtpmInstance, startSwtpm } from '@broker/tpm/testing';
import {
  builtinAmdRoots,
  hclAkPub,
  hclUserData,
  parseAmdRootBundle,
  parseHclReport,
  parseSnpReport,
  parseVekCertificate,
  VerificationError,
  verifySnpReport,
} from '@broker/verifier';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type MockTee, STATE_FILES, startMockTee } from './device.js';
import {
  AK_PERSISTENT_HANDLE,
  HCL_REPORT_NV_INDEX,
  HCL_REPORT_NV_SIZE,
  HCL_USER_DATA_NV_INDEX,
} from './hcl.js';
import { IMDS_CERTIFICATION_PATH } from './imds.js';
import { DEFAULT_SNP_MEASUREMENT, expectedPcrValues, parseMeasurementManifest } from './manifest.js';
import { sampleManifest } from './sample-manifest.js';

const run = promisify(execFile);
const sha256hex = (s: string) => createHash('sha256').update(s).digest('hex');

async function tool(
  device: MockTee,
  program: string,
  args: string[],
): Promise<{ stdout: string; stderr: string }> {
  return run(program, args, {
    env: { ...process.env, TPM2TOOLS_TCTI: device.tcti },
    encoding: 'buffer',
    maxBuffer: 1 << 20,
  }).then(
    ({ stdout, stderr }) => ({ stdout: stdout.toString('latin1'), stderr: stderr.toString() }),
    (err: { stderr?: Buffer; message: string }) => {
      throw new Error(`${program} failed: ${err.stderr?.toString() ?? err.message}`);
    },
  );
}

/** Verifies a report read from the device against its test roots; returns the parsed parts. */
function verifyReport(device: MockTee, report: Uint8Array) {
  const hcl = parseHclReport(report);
  const snp = parseSnpReport(hcl.hwReport);
  expect(snp.reportData.subarray(0, 32).equals(createHash('sha256').update(hcl.varData).digest())).toBe(true);
  const vcek = parseVekCertificate(new X509Certificate(device.vcekPem).raw);
  verifySnpReport(snp, vcek, [parseAmdRootBundle(device.rootsBundlePem)], new Date());
  return { hcl, snp, vcek };
}

describe('mock TEE device over swtpm', () => {
  let swtpm: SwtpmInstance;
  let stateDir: string;
  let device: MockTee;
  let tpm: Tpm;

  beforeAll(async () => {
    await requirePrograms('swtpm', 'tpm2_pcrread', 'tpm2_nvread', 'tpm2_nvwrite');
    swtpm = await startSwtpm();
    stateDir = await mkdtemp(join(tmpdir(), 'mock-tee-device-'));
    // AMD-sized (RSA-4096) roots, as the device makes them by default.
    device = await startMockTee({ stateDir, swtpm });
    tpm = Tpm.open(device.tpm);
  }, 120_000);

  afterAll(async () => {
    await tpm?.close();
    await device?.close();
    await swtpm?.stop();
    if (stateDir) await rm(stateDir, { recursive: true, force: true });
  });

  it('provisions Azure handles: the AK at 0x81000003 and the two NV indices', async () => {
    const ak = await tpm.readPublic(AK_PERSISTENT_HANDLE);
    const p = ak.public;
    expect(p.type).toBe(TPM_ALG.RSA);
    if (p.type !== TPM_ALG.RSA) return;
    expect(p.parameters.keyBits).toBe(2048);
    expect(p.parameters.scheme).toEqual({ scheme: TPM_ALG.RSASSA, hashAlg: TPM_ALG.SHA256 });
    const want = TPMA_OBJECT.restricted | TPMA_OBJECT.sign | TPMA_OBJECT.fixedTPM | TPMA_OBJECT.noDA;
    expect(p.objectAttributes & want).toBe(want);
    expect(p.objectAttributes & TPMA_OBJECT.decrypt).toBe(0);
    expect(publicKeyFromTpmt(p).export({ format: 'jwk' })).toEqual(device.akPublic.export({ format: 'jwk' }));

    const report = await tpm.nvReadPublic(HCL_REPORT_NV_INDEX);
    expect(report.nvPublic.dataSize).toBe(HCL_REPORT_NV_SIZE);
    expect(report.nvPublic.attributes & TPMA_NV.OWNERREAD).toBeTruthy();
    expect(report.nvPublic.attributes & (TPMA_NV.OWNERWRITE | TPMA_NV.AUTHWRITE)).toBe(0);
    const user = await tpm.nvReadPublic(HCL_USER_DATA_NV_INDEX);
    expect(user.nvPublic.dataSize).toBe(64);
    expect(user.nvPublic.attributes & TPMA_NV.OWNERWRITE).toBeTruthy();
  });

  it('boots from the manifest: PCRs 3, 9, 11, 12 hold its replayed values (tpm2_pcrread agrees)', async () => {
    const expected = expectedPcrValues(sampleManifest());
    expect(device.expectedPcrs).toEqual(expected);
    const ours = await tpm.readPcrs(TPM_ALG.SHA256, [3, 9, 11, 12, 8]);
    expect(ours.slice(0, 4).map((d) => Buffer.from(d).toString('hex'))).toEqual(
      [3, 9, 11, 12].map((i) => expected.get(i)),
    );
    expect(Buffer.from(ours[4]!).every((b) => b === 0)).toBe(true);
    const { stdout } = await tool(device, 'tpm2_pcrread', ['sha256:3,9,11,12']);
    for (const i of [3, 9, 11, 12]) {
      expect(stdout).toMatch(new RegExp(`\\b${i}\\s*:\\s*0x${expected.get(i)!.toUpperCase()}`));
    }
  });

  it('serves an initial report over zero user data, signed by the test VCEK', async () => {
    const report = await tpm.nvReadAll(TPM_RH.OWNER, HCL_REPORT_NV_INDEX);
    expect(report.length).toBe(HCL_REPORT_NV_SIZE);
    const { hcl, snp } = verifyReport(device, report);
    expect(hclUserData(hcl.varData).every((b) => b === 0)).toBe(true);
    expect(hclAkPub(hcl.varData).export({ format: 'jwk' })).toEqual(
      device.akPublic.export({ format: 'jwk' }),
    );
    expect(snp.measurement.equals(DEFAULT_SNP_MEASUREMENT)).toBe(true);
    expect(snp.vmpl).toBe(0);
    expect(snp.chipId.equals(device.chipId)).toBe(true);
  });

  it('issues a fresh report when the guest writes user data, before answering the write', async () => {
    const userData = createHash('sha512').update('nonce-1').digest();
    await tpm.nvWrite(TPM_RH.OWNER, HCL_USER_DATA_NV_INDEX, userData);
    const report = await tpm.nvReadAll(TPM_RH.OWNER, HCL_REPORT_NV_INDEX);
    const { hcl } = verifyReport(device, report);
    expect(hclUserData(hcl.varData).equals(userData)).toBe(true);
    expect(Buffer.from(report).equals(device.hclReport())).toBe(true);
    // The state folder keeps a copy of the last report.
    await expect
      .poll(async () => (await readFile(join(stateDir, STATE_FILES.hclReport))).equals(report))
      .toBe(true);
    // Readable with the index's own authorization too.
    const viaIndex = await tpm.nvRead(HCL_REPORT_NV_INDEX, HCL_REPORT_NV_INDEX, 16, 0);
    expect(Buffer.from(viaIndex).equals(report.subarray(0, 16))).toBe(true);
  });

  it('takes partial and short user-data writes: the report holds the index contents, zero-padded', async () => {
    await tpm.nvWrite(TPM_RH.OWNER, HCL_USER_DATA_NV_INDEX, Buffer.alloc(64, 0x11));
    await tpm.nvWrite(TPM_RH.OWNER, HCL_USER_DATA_NV_INDEX, Buffer.alloc(8, 0x22), 56);
    let { hcl } = verifyReport(device, await tpm.nvReadAll(TPM_RH.OWNER, HCL_REPORT_NV_INDEX));
    expect(
      hclUserData(hcl.varData).equals(Buffer.concat([Buffer.alloc(56, 0x11), Buffer.alloc(8, 0x22)])),
    ).toBe(true);
    // A guest redefining the index at 32 bytes, as az-snp-vtpm does for 32-byte report data.
    await tpm.nvUndefineSpace(TPM_RH.OWNER, HCL_USER_DATA_NV_INDEX);
    await tpm.nvDefineSpace(TPM_RH.OWNER, {
      nvIndex: HCL_USER_DATA_NV_INDEX,
      nameAlg: TPM_ALG.SHA256,
      attributes: TPMA_NV.OWNERWRITE | TPMA_NV.OWNERREAD,
      authPolicy: new Uint8Array(),
      dataSize: 32,
    });
    await tpm.nvWrite(TPM_RH.OWNER, HCL_USER_DATA_NV_INDEX, Buffer.alloc(32, 0x33));
    ({ hcl } = verifyReport(device, await tpm.nvReadAll(TPM_RH.OWNER, HCL_REPORT_NV_INDEX)));
    expect(hclUserData(hcl.varData).equals(Buffer.concat([Buffer.alloc(32, 0x33), Buffer.alloc(32)]))).toBe(
      true,
    );
  });

  it('works for tpm2-tools too: nvwrite of user data, nvread of the report', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mock-tee-tools-'));
    try {
      const input = join(dir, 'user-data.bin');
      const output = join(dir, 'report.bin');
      const userData = Buffer.alloc(32, 0x5c);
      await import('node:fs/promises').then((fs) => fs.writeFile(input, userData));
      await tool(device, 'tpm2_nvwrite', [
        '-C',
        'o',
        '-i',
        input,
        `0x${HCL_USER_DATA_NV_INDEX.toString(16)}`,
      ]);
      await tool(device, 'tpm2_nvread', ['-C', 'o', '-o', output, `0x${HCL_REPORT_NV_INDEX.toString(16)}`]);
      const report = await readFile(output);
      expect(report.length).toBe(HCL_REPORT_NV_SIZE);
      const { hcl } = verifyReport(device, report);
      expect(hclUserData(hcl.varData).subarray(0, 32).equals(userData)).toBe(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('checks HMAC sessions on the report index: a wrong HMAC is refused, swtpm stays in step', async () => {
    // StartAuthSession(tpmKey NULL, bind NULL, nonceCaller, no salt, HMAC, no symmetric, SHA-256).
    const start = new TpmWriter()
      .tpm2b(Buffer.alloc(32, 1), 64, 'nonceCaller')
      .tpm2b(new Uint8Array(), 64, 'salt')
      .u8(0)
      .u16(TPM_ALG.NULL)
      .u16(TPM_ALG.SHA256)
      .finish();
    const started = await tpm.transport.send(
      marshalCommand({ code: 0x176, handles: [TPM_RH.NULL, TPM_RH.NULL], parameters: start }),
    );
    const { handles, parameters } = parseResponse(started, 0x176, { responseHandles: 1 });
    const session = handles[0]!;
    const nonceTpm = new TpmReader(parameters, 'nonce').tpm2b('nonceTPM', 64);
    const read = (hmac: Uint8Array) =>
      tpm.transport.send(
        marshalCommand({
          code: TPM_CC.NV_Read,
          handles: [TPM_RH.OWNER, HCL_REPORT_NV_INDEX],
          sessions: [{ handle: session, nonce: Buffer.alloc(32, 2), attributes: 1, hmac }],
          parameters: new TpmWriter().u16(16).u16(0).finish(),
        }),
      );
    expect(Buffer.from(await read(Buffer.alloc(32, 0xee))).readUInt32BE(6)).toBe(0x98e);
    // The right HMAC (empty key: unbound, unsalted, empty owner auth) over the index as guests see it.
    const { name } = await tpm.nvReadPublic(HCL_REPORT_NV_INDEX);
    const cp = createHash('sha256')
      .update(Buffer.from('0000014e', 'hex'))
      .update(Buffer.from('40000001', 'hex'))
      .update(name)
      .update(Buffer.from('00100000', 'hex'))
      .digest();
    const hmac = createHmac('sha256', Buffer.alloc(0))
      .update(cp)
      .update(Buffer.alloc(32, 2))
      .update(nonceTpm)
      .update(Uint8Array.of(1))
      .digest();
    const answer = await read(hmac);
    const ok = parseResponse(answer, TPM_CC.NV_Read, { sessionCount: 1 });
    expect(Buffer.from(ok.parameters.subarray(2)).equals(device.hclReport().subarray(0, 16))).toBe(true);
    // swtpm's nonce came back, so the session still works against swtpm itself: flush it there.
    await tpm.flushContext(session);
  });

  it('is not trusted without the configured test root', async () => {
    const report = await tpm.nvReadAll(TPM_RH.OWNER, HCL_REPORT_NV_INDEX);
    const hcl = parseHclReport(report);
    const vcek = parseVekCertificate(new X509Certificate(device.vcekPem).raw);
    expect(() => verifySnpReport(parseSnpReport(hcl.hwReport), vcek, builtinAmdRoots(), new Date())).toThrow(
      VerificationError,
    );
  });

  it('refuses guest commands that name the platform hierarchy', async () => {
    const undefine = tpm.nvUndefineSpace(TPM_RH.PLATFORM, HCL_REPORT_NV_INDEX);
    await expect(undefine).rejects.toBeInstanceOf(TpmError);
    await expect(undefine).rejects.toMatchObject({ rc: 0x185 });
    await expect(tpm.nvWrite(TPM_RH.PLATFORM, HCL_REPORT_NV_INDEX, Buffer.alloc(1))).rejects.toMatchObject({
      rc: 0x185,
    });
    // Owner authorization cannot write the report index either (swtpm's verdict on the stand-in).
    await expect(tpm.nvWrite(TPM_RH.OWNER, HCL_REPORT_NV_INDEX, Buffer.alloc(1))).rejects.toBeInstanceOf(
      TpmError,
    );
    // And the report index is still there, unchanged.
    expect((await tpm.nvReadPublic(HCL_REPORT_NV_INDEX)).nvPublic.dataSize).toBe(HCL_REPORT_NV_SIZE);
  });

  it('answers out-of-range reads of the report index as a TPM does', async () => {
    await expect(
      tpm.nvRead(TPM_RH.OWNER, HCL_REPORT_NV_INDEX, 2, HCL_REPORT_NV_SIZE - 1),
    ).rejects.toMatchObject({
      code: TPM_RC.NV_RANGE,
    });
    await expect(tpm.nvRead(TPM_RH.OWNER, HCL_REPORT_NV_INDEX, 1025, 0)).rejects.toMatchObject({
      code: TPM_RC.VALUE,
    });
    const tail = await tpm.nvRead(TPM_RH.OWNER, HCL_REPORT_NV_INDEX, 1, HCL_REPORT_NV_SIZE - 1);
    expect(tail.length).toBe(1);
  });

  it('survives hostile input on the TPM port and keeps serving', async () => {
    const { host, port } = parseTpmAddress(device.tpm) as { host: string; port: number };
    /** Sends bytes; with `answer`, waits for a response header, else half-closes and waits for the close. */
    const send = (bytes: Buffer, answer: boolean) =>
      new Promise<Buffer>((resolve) => {
        const s = new Socket();
        let got = Buffer.alloc(0);
        s.on('data', (c) => {
          got = Buffer.concat([got, c]);
          if (answer && got.length >= 10) s.destroy();
        });
        s.on('error', () => undefined);
        s.on('close', () => resolve(got));
        s.connect(port, host, () => {
          s.write(bytes);
          if (!answer) s.end();
        });
      });
    const header = (size: number, code: number) => {
      const b = Buffer.alloc(10);
      b.writeUInt16BE(0x8001, 0);
      b.writeUInt32BE(size, 2);
      b.writeUInt32BE(code, 6);
      return b;
    };
    // Truncated (says 200 bytes, sends 20), oversize, undersize, unknown command, garbage.
    expect((await send(Buffer.concat([header(200, 0x17e), Buffer.alloc(10)]), false)).length).toBe(0);
    expect((await send(header(0x7fffffff, 0x17e), true)).readUInt32BE(6)).toBe(0x142);
    expect((await send(header(4, 0x17e), true)).readUInt32BE(6)).toBe(0x142);
    expect((await send(header(10, 0x12345), true)).readUInt32BE(6)).toBe(0x143);
    // Read as a TPM header, HTTP declares 0x54202f20 bytes: refused as oversize.
    expect((await send(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'), true)).readUInt32BE(6)).toBe(0x142);
    // A malformed NV_Read of the report index (no authorization area): swtpm judges it.
    const nvRead = Buffer.concat([header(22, 0x14e), Buffer.alloc(12)]);
    nvRead.writeUInt32BE(TPM_RH.OWNER, 10);
    nvRead.writeUInt32BE(HCL_REPORT_NV_INDEX, 14);
    expect((await send(nvRead, true)).readUInt32BE(6)).not.toBe(0);
    // Truncated handle area naming the platform: still refused or rejected, never executed.
    expect((await send(Buffer.concat([header(12, 0x122), Buffer.alloc(2)]), true)).readUInt32BE(6)).not.toBe(
      0,
    );
    // NV_ReadPublic of the report index with an (audit) session, or with trailing bytes.
    const readPublic = Buffer.concat([header(14, 0x169), Buffer.alloc(4)]);
    readPublic.writeUInt32BE(HCL_REPORT_NV_INDEX, 10);
    const withSession = Buffer.from(readPublic);
    withSession.writeUInt16BE(0x8002, 0);
    expect((await send(withSession, true)).readUInt32BE(6)).toBe(0x145);
    const trailing = Buffer.concat([readPublic, Buffer.alloc(2)]);
    trailing.writeUInt32BE(16, 2);
    expect((await send(trailing, true)).readUInt32BE(6)).not.toBe(0);
    expect((await send(readPublic, true)).readUInt32BE(6)).toBe(0);
    // Still a working vTPM.
    const pcrs = await tpm.readPcrs(TPM_ALG.SHA256, [11]);
    expect(Buffer.from(pcrs[0]!).toString('hex')).toBe(device.expectedPcrs.get(11));
  });

  it('serves the VCEK chain as Azure IMDS does, only with the Metadata header', async () => {
    const url = `${device.imdsUrl}${IMDS_CERTIFICATION_PATH}`;
    const ok = await fetch(url, { headers: { Metadata: 'true' } });
    expect(ok.status).toBe(200);
    const body = (await ok.json()) as Record<string, string>;
    expect(Object.keys(body)).toEqual(['vcekCert', 'tcbm', 'certificateChain', 'cacheControl']);
    expect(body.vcekCert).toBe(device.vcekPem);
    expect(body.certificateChain).toBe(device.askPem + device.arkPem);
    expect(body.tcbm).toBe('7308000000000003');
    expect((await fetch(url)).status).toBe(400);
    expect((await fetch(url, { method: 'POST', headers: { Metadata: 'true' } })).status).toBe(405);
    expect(
      (await fetch(`${device.imdsUrl}/metadata/instance`, { headers: { Metadata: 'true' } })).status,
    ).toBe(404);
  });

  it('reboots into another image: PCRs reset and replayed from the new manifest', async () => {
    const other = parseMeasurementManifest({
      image_tag: 'mock-podvm:0.2.0',
      pcrs: { '3': [sha256hex('separator')], '11': [sha256hex('uki 0.2.0')] },
      snp_measurement: 'cd'.repeat(48),
    });
    await tpm.pcrExtend(8, [{ hashAlg: TPM_ALG.SHA256, digest: createHash('sha256').update('x').digest() }]);
    await device.reboot({ manifest: other });
    expect(device.manifest.imageTag).toBe('mock-podvm:0.2.0');
    const [p3, p8, p9, p11] = await tpm.readPcrs(TPM_ALG.SHA256, [3, 8, 9, 11]);
    expect(Buffer.from(p3!).toString('hex')).toBe(expectedPcrValues(other).get(3));
    expect(Buffer.from(p11!).toString('hex')).toBe(expectedPcrValues(other).get(11));
    expect(Buffer.from(p8!).every((b) => b === 0)).toBe(true);
    expect(Buffer.from(p9!).every((b) => b === 0)).toBe(true);
    const { snp } = verifyReport(device, await tpm.nvReadAll(TPM_RH.OWNER, HCL_REPORT_NV_INDEX));
    expect(snp.measurement.toString('hex')).toBe('cd'.repeat(48));
    await device.reboot({ manifest: sampleManifest() });
  });

  it('restarts on the same state with the same roots, AK and VM identity, PCRs booted once', async () => {
    const before = {
      vcek: device.vcekPem,
      ak: device.akPublic.export({ format: 'jwk' }),
      vm: device.vmConfiguration,
    };
    await tpm.close();
    await device.close();
    device = await startMockTee({ stateDir, swtpm });
    tpm = Tpm.open(device.tpm);
    expect(device.vcekPem).toBe(before.vcek);
    expect(device.akPublic.export({ format: 'jwk' })).toEqual(before.ak);
    expect(device.vmConfiguration).toEqual(before.vm);
    const [p11] = await tpm.readPcrs(TPM_ALG.SHA256, [11]);
    expect(Buffer.from(p11!).toString('hex')).toBe(device.expectedPcrs.get(11));
  });

  it('leaves swtpm itself with the booted PCRs (tpm2_pcrread on swtpm once the device lets go)', async () => {
    // swtpm serves one connection at a time and the device holds it while running.
    await tpm.close();
    await device.close();
    const { stdout } = await run('tpm2_pcrread', ['sha256:3,9,11,12'], {
      env: { ...process.env, TPM2TOOLS_TCTI: swtpm.tcti },
    });
    for (const [i, value] of expectedPcrValues(sampleManifest())) {
      expect(stdout).toMatch(new RegExp(`\\b${i}\\s*:\\s*0x${value.toUpperCase()}`));
    }
  });
});
