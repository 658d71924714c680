import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  parseSnpReport,
  SNP_REPORT_SIZE,
  SnpVerifier,
  sevJsonFromReport,
  VerificationError,
} from '@broker/verifier';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MockTeeError } from '../errors.js';
import { CERT_TABLE_GUIDS, encodeCertTable } from './cert-table.js';
import {
  BARE_SNP_GUEST_POLICY,
  hostDataForInitData,
  type MockSnpDevice,
  startMockSnpDevice,
} from './index.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitForFile(path: string): Promise<Buffer> {
  for (let i = 0; i < 2000; i++) {
    try {
      return await readFile(path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      await sleep(5);
    }
  }
  throw new Error(`${path} never appeared`);
}

/** The guest's side of configfs-tsm, by hand: folder, provider, privlevel, inblob, outblob. */
async function request(
  tsmRoot: string,
  name: string,
  inblob: Uint8Array,
  privlevel?: number,
): Promise<{ provider: string; outblob: Buffer; auxblob: Buffer; generation: string }> {
  const dir = join(tsmRoot, name);
  await mkdir(dir);
  const provider = (await waitForFile(join(dir, 'provider'))).toString();
  if (privlevel !== undefined) {
    await writeFile(join(dir, 'privlevel'), `${privlevel}\n`);
    // The responder counts the privlevel write before the inblob one.
    for (let i = 0; i < 2000 && (await readFile(join(dir, 'generation'), 'utf8')) !== '1\n'; i++)
      await sleep(5);
  }
  await writeFile(join(dir, 'inblob'), inblob);
  const outblob = await waitForFile(join(dir, 'outblob'));
  return {
    provider,
    outblob,
    auxblob: await readFile(join(dir, 'auxblob')),
    generation: await readFile(join(dir, 'generation'), 'utf8'),
  };
}

/** The VCEK from a table laid out by encodeCertTable (first entry). */
function firstCert(table: Buffer): { guid: string; data: Buffer } {
  const off = table.readUInt32LE(16);
  const len = table.readUInt32LE(20);
  const h = table.subarray(0, 16).toString('hex');
  return {
    guid: `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`,
    data: table.subarray(off, off + len),
  };
}

describe('certificate table encoding', () => {
  it('lays out GUID, offset and length entries, a zero entry, then the certificates', () => {
    const t = encodeCertTable([
      { type: 'VCEK', data: Buffer.from('vcek') },
      { type: 'ASK', data: Buffer.from('ask!!') },
    ]);
    expect(t.length).toBe(3 * 24 + 4 + 5);
    expect(firstCert(t)).toEqual({ guid: CERT_TABLE_GUIDS.VCEK, data: Buffer.from('vcek') });
    expect(t.readUInt32LE(24 + 16)).toBe(3 * 24 + 4);
    expect(t.readUInt32LE(24 + 20)).toBe(5);
    expect(t.subarray(48, 72)).toEqual(Buffer.alloc(24));
    expect(encodeCertTable([])).toEqual(Buffer.alloc(0));
  });

  it('accepts other GUIDs and refuses names that are neither', () => {
    const other = 'fbb6ed74-e73e-44ab-8893-4252792d737a';
    expect(firstCert(encodeCertTable([{ type: other, data: Buffer.alloc(1) }])).guid).toBe(other);
    for (const bad of [
      'PEK',
      '00000000-0000-0000-0000-000000000000',
      'FBB6ED74-E73E-44AB-8893-4252792D737A',
    ]) {
      expect(() => encodeCertTable([{ type: bad, data: Buffer.alloc(1) }])).toThrow(MockTeeError);
    }
  });
});

describe('mock bare SNP device', () => {
  let dir: string;
  let device: MockSnpDevice;
  const errors: unknown[] = [];
  const initDataDigest = createHash('sha384').update('initdata.toml').digest();
  const verifier = new SnpVerifier();

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mock-snp-'));
    device = await startMockSnpDevice({
      stateDir: dir,
      initDataDigest,
      rootKeyBits: 2048,
      onError: (e) => errors.push(e),
    });
  });
  afterAll(async () => {
    device?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('lays out the sysfs node, the report root, the roots and the offline VCEK store', async () => {
    expect((await stat(device.sevGuestPath)).isDirectory()).toBe(true);
    expect(device.env).toEqual({
      BROKER_TSM_REPORT_ROOT: join(dir, 'sys/kernel/config/tsm/report'),
      BROKER_SEV_GUEST_SYSFS: join(dir, 'sys/devices/platform/sev-guest'),
    });
    expect(await readFile(device.rootsBundlePath, 'utf8')).toBe(device.rootsBundlePem);
    const chipDir = join(device.vcekStorePath, 'vcek', device.roots.chipId.toString('hex'));
    expect(await readFile(join(chipDir, 'vcek.der'))).toEqual(device.roots.vcekDer);
    const t = device.roots.tcb;
    const tcbName = `bl${String(t.bootloader).padStart(2, '0')}_tee${String(t.tee).padStart(2, '0')}_snp${String(t.snp).padStart(2, '0')}_ucode${String(t.microcode).padStart(2, '0')}_vcek.der`;
    expect(await readFile(join(chipDir, tcbName))).toEqual(device.roots.vcekDer);
  });

  it('answers an inblob with a signed report at the requested VMPL, HOST_DATA from initdata', async () => {
    const reportData = createHash('sha512').update('nonce').digest();
    const before = device.requests;
    const r = await request(device.tsmRoot, 'a', reportData, 0);
    expect(r.provider).toBe('sev_guest\n');
    expect(r.generation).toBe('2\n');
    expect(r.outblob).toHaveLength(SNP_REPORT_SIZE);
    expect(device.requests).toBe(before + 1);
    const report = parseSnpReport(r.outblob);
    expect(report.reportData).toEqual(reportData);
    expect(report.hostData).toEqual(initDataDigest.subarray(0, 32));
    expect(report.vmpl).toBe(0);
    expect(report.policy).toBe(BARE_SNP_GUEST_POLICY);
    expect(report.version).toBe(3);
    expect(report.chipId).toEqual(device.roots.chipId);
    expect(firstCert(r.auxblob)).toEqual({ guid: CERT_TABLE_GUIDS.VCEK, data: device.roots.vcekDer });

    const evidence = {
      attestation_report: sevJsonFromReport(report),
      cert_chain: [{ cert_type: 'VCEK', data: [...device.roots.vcekDer] }],
    };
    const [claims] = await verifier.evaluate(evidence, {
      reportData,
      initDataHash: initDataDigest,
      trustedArks: [device.rootsBundlePem],
    });
    expect(claims!.claims.init_data).toBe(hostDataForInitData(initDataDigest).toString('hex'));
    // The same report verifies with the VCEK from the device's offline store instead of the table.
    await expect(
      verifier.evaluate(
        { attestation_report: evidence.attestation_report, cert_chain: null },
        {
          reportData,
          trustedArks: [device.rootsBundlePem],
          snp: { vcekSources: [{ type: 'OfflineStore', path: device.vcekStorePath }] },
        },
      ),
    ).resolves.toHaveLength(1);
    // And nothing verifies it without the test root configured.
    await expect(verifier.evaluate(evidence, { reportData })).rejects.toMatchObject({
      code: 'CERT_CHAIN_INVALID',
    });
  });

  it('reports the VMPL asked for, which the verifier refuses unless it is 0', async () => {
    const reportData = Buffer.alloc(64, 3);
    const r = await request(device.tsmRoot, 'b', reportData, 2);
    const report = parseSnpReport(r.outblob);
    expect(report.vmpl).toBe(2);
    const err = await verifier
      .evaluate(
        {
          attestation_report: sevJsonFromReport(report),
          cert_chain: [{ cert_type: 'VCEK', data: [...device.roots.vcekDer] }],
        },
        { reportData, trustedArks: [device.rootsBundlePem] },
      )
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VerificationError);
    expect((err as VerificationError).code).toBe('VMPL_MISMATCH');
  });

  it('serves changed settings, and the whole chain or no table when configured', async () => {
    device.config.certTable = 'chain';
    device.config.hostData = Buffer.alloc(32, 0x5a);
    try {
      const r = await request(device.tsmRoot, 'c', Buffer.alloc(64, 4));
      expect(parseSnpReport(r.outblob).hostData).toEqual(Buffer.alloc(32, 0x5a));
      expect(r.auxblob.subarray(24, 40)).toEqual(
        Buffer.from(CERT_TABLE_GUIDS.ASK.replaceAll('-', ''), 'hex'),
      );
      expect(r.auxblob.subarray(48, 64)).toEqual(
        Buffer.from(CERT_TABLE_GUIDS.ARK.replaceAll('-', ''), 'hex'),
      );
      device.config.certTable = 'none';
      const none = await request(device.tsmRoot, 'd', Buffer.alloc(64, 5));
      expect(none.auxblob).toHaveLength(0);
    } finally {
      device.config.certTable = 'vcek';
      device.config.hostData = hostDataForInitData(initDataDigest);
    }
  });

  it('refuses an inblob of other than 64 bytes, as the kernel does', async () => {
    const before = device.requests;
    const errorsBefore = errors.length;
    const folder = join(device.tsmRoot, 'e');
    await mkdir(folder);
    await waitForFile(join(folder, 'provider'));
    await writeFile(join(folder, 'inblob'), Buffer.alloc(32, 1));
    for (let i = 0; i < 2000 && errors.length === errorsBefore; i++) await sleep(5);
    expect(errors.length).toBe(errorsBefore + 1);
    expect(String(errors.at(-1))).toMatch(/64 bytes/);
    expect(device.requests).toBe(before);
    await expect(stat(join(folder, 'outblob'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('keeps its roots across restarts', async () => {
    device.close();
    const again = await startMockSnpDevice({ stateDir: dir, initDataDigest });
    try {
      expect(again.roots.vcekDer).toEqual(device.roots.vcekDer);
      expect(again.rootsBundlePem).toBe(device.rootsBundlePem);
      const r = await request(again.tsmRoot, 'f', Buffer.alloc(64, 6));
      expect(parseSnpReport(r.outblob).chipId).toEqual(device.roots.chipId);
    } finally {
      again.close();
    }
  });

  it('refuses contradicting or mis-sized settings', async () => {
    await expect(
      startMockSnpDevice({ stateDir: dir, hostData: Buffer.alloc(32), initDataDigest }),
    ).rejects.toThrow(MockTeeError);
    await expect(startMockSnpDevice({ stateDir: dir, measurement: Buffer.alloc(47) })).rejects.toThrow(
      /48 bytes/,
    );
    await expect(startMockSnpDevice({ stateDir: dir, hostData: Buffer.alloc(33) })).rejects.toThrow(
      /32 bytes/,
    );
  });
});
