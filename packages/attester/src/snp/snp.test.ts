import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigfsTsmResponder, type TsmRequest } from '@broker/mock-tee';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AttesterError, EvidenceCollectionFailed } from '../attester.js';
import { platformContext } from '../platform.js';
import { getAttester } from '../registry.js';
import { CERT_TYPE_GUIDS, MAX_CERT_TABLE_ENTRIES, parseCertTable } from './cert-table.js';
import { BROKER_SEV_GUEST_SYSFS, SEV_GUEST_SYSFS, SnpAttester, snpModule } from './index.js';
import { SNP_REPORT_SIZE, sevReportJson } from './report-json.js';

interface RawReportOptions {
  version?: number;
  family?: number;
  model?: number;
  chipId?: Buffer;
  reportData?: Uint8Array;
  hostData?: Uint8Array;
  vmpl?: number;
}

const CHIP = createHash('sha512').update('chip').digest();

/** A report laid out by the ABI; the attester never checks signatures, so none is made. */
function rawReport(o: RawReportOptions = {}): Buffer {
  const b = Buffer.alloc(SNP_REPORT_SIZE);
  const version = o.version ?? 3;
  b.writeUInt32LE(version, 0x00);
  b.writeUInt32LE(7, 0x04);
  b.writeBigUInt64LE(0x30000n, 0x08);
  b.fill(0x11, 0x10, 0x20);
  b.fill(0x22, 0x20, 0x30);
  b.writeUInt32LE(o.vmpl ?? 0, 0x30);
  b.writeUInt32LE(1, 0x34);
  Buffer.from([1, 2, 0, 0, 0, 0, 3, 4]).copy(b, 0x38);
  b.writeBigUInt64LE(3n, 0x40);
  b.writeUInt32LE(0, 0x48);
  if (o.reportData) b.set(o.reportData, 0x50);
  b.fill(0x33, 0x90, 0xc0);
  if (o.hostData) b.set(o.hostData, 0xc0);
  Buffer.from([5, 6, 0, 0, 0, 0, 7, 8]).copy(b, 0x180);
  if (version >= 3) {
    b[0x188] = o.family ?? 0x19;
    b[0x189] = o.model ?? 0x01;
    b[0x18a] = 0x02;
  }
  (o.chipId ?? CHIP).copy(b, 0x1a0);
  Buffer.from([9, 10, 0, 0, 0, 0, 11, 12]).copy(b, 0x1e0);
  Buffer.from([40, 55, 1]).copy(b, 0x1e8);
  Buffer.from([39, 55, 1]).copy(b, 0x1ec);
  Buffer.from([13, 14, 0, 0, 0, 0, 15, 16]).copy(b, 0x1f0);
  if (version >= 5) {
    b.writeBigUInt64LE(0x5n, 0x1f8);
    b.writeBigUInt64LE(0x6n, 0x200);
  }
  b.fill(0xaa, 0x2a0, 0x2a0 + 48);
  b.fill(0xbb, 0x2e8, 0x2e8 + 48);
  return b;
}

function guid(type: keyof typeof CERT_TYPE_GUIDS | string): Buffer {
  const g = Object.entries(CERT_TYPE_GUIDS).find(([, t]) => t === type)?.[0] ?? type;
  return Buffer.from(g.replaceAll('-', ''), 'hex');
}

function table(entries: { type: string; data: Buffer }[]): Buffer {
  const head = Buffer.alloc((entries.length + 1) * 24);
  let off = head.length;
  entries.forEach((e, i) => {
    guid(e.type).copy(head, i * 24);
    head.writeUInt32LE(off, i * 24 + 16);
    head.writeUInt32LE(e.data.length, i * 24 + 20);
    off += e.data.length;
  });
  return Buffer.concat([head, ...entries.map((e) => e.data)]);
}

describe('sev crate JSON of a raw report', () => {
  it('writes every field in struct order, byte arrays as numbers, Options as null', () => {
    const j = sevReportJson(rawReport({ reportData: Buffer.alloc(64, 9) }));
    expect(Object.keys(j)).toEqual([
      'version',
      'guest_svn',
      'policy',
      'family_id',
      'image_id',
      'vmpl',
      'sig_algo',
      'current_tcb',
      'plat_info',
      'key_info',
      'report_data',
      'measurement',
      'host_data',
      'id_key_digest',
      'author_key_digest',
      'report_id',
      'report_id_ma',
      'reported_tcb',
      'cpuid_fam_id',
      'cpuid_mod_id',
      'cpuid_step',
      'chip_id',
      'committed_tcb',
      'current',
      'committed',
      'launch_tcb',
      'launch_mit_vector',
      'current_mit_vector',
      'signature',
    ]);
    expect(j.version).toBe(3);
    expect(j.guest_svn).toBe(7);
    expect(j.policy).toBe(0x30000);
    expect(j.family_id).toEqual(Array(16).fill(0x11));
    expect(j.current_tcb).toEqual({ fmc: null, bootloader: 1, tee: 2, snp: 3, microcode: 4 });
    expect(j.plat_info).toBe(3);
    expect(j.report_data).toEqual(Array(64).fill(9));
    expect(j.reported_tcb).toEqual({ fmc: null, bootloader: 5, tee: 6, snp: 7, microcode: 8 });
    expect([j.cpuid_fam_id, j.cpuid_mod_id, j.cpuid_step]).toEqual([0x19, 0x01, 0x02]);
    expect(j.chip_id).toEqual([...CHIP]);
    expect(j.current).toEqual({ major: 1, minor: 55, build: 40 });
    expect(Object.keys(j.current)).toEqual(['major', 'minor', 'build']);
    expect(j.committed).toEqual({ major: 1, minor: 55, build: 39 });
    expect(j.launch_tcb).toEqual({ fmc: null, bootloader: 13, tee: 14, snp: 15, microcode: 16 });
    expect(j.launch_mit_vector).toBeNull();
    expect(j.signature.r).toEqual([...Array(48).fill(0xaa), ...Array(24).fill(0)]);
    expect(j.signature.s).toHaveLength(72);
    expect(Object.keys(j.reported_tcb)).toEqual(['fmc', 'bootloader', 'tee', 'snp', 'microcode']);
  });

  it('reads version 2 (no CPUID, Turin layout from an 8-byte chip ID) and version 5 (mitigation vectors)', () => {
    const v2 = sevReportJson(rawReport({ version: 2 }));
    expect([v2.cpuid_fam_id, v2.cpuid_mod_id, v2.cpuid_step]).toEqual([null, null, null]);
    expect(v2.reported_tcb.fmc).toBeNull();
    const turinChip = Buffer.concat([CHIP.subarray(0, 8), Buffer.alloc(56)]);
    const turinV2 = sevReportJson(rawReport({ version: 2, chipId: turinChip }));
    expect(turinV2.reported_tcb).toEqual({ fmc: 5, bootloader: 6, tee: 0, snp: 0, microcode: 8 });
    const turin = sevReportJson(rawReport({ family: 0x1a, model: 0x02 }));
    expect(turin.current_tcb.fmc).toBe(1);
    const v5 = sevReportJson(rawReport({ version: 5 }));
    expect([v5.launch_mit_vector, v5.current_mit_vector]).toEqual([5, 6]);
  });

  it('refuses what the sev crate refuses', () => {
    const bad: [Buffer, RegExp][] = [
      [rawReport().subarray(0, 1183), /1183 bytes/],
      [Buffer.concat([rawReport(), Buffer.alloc(1)]), /1185 bytes/],
      [rawReport({ version: 1 }), /version 1/],
      [rawReport({ family: 0x17, model: 0x31 }), /unknown processor/],
      [rawReport({ version: 2, chipId: Buffer.alloc(64) }), /masked chip ID/],
    ];
    for (const [raw, msg] of bad) expect(() => sevReportJson(raw)).toThrow(msg);
    const huge = rawReport();
    huge.writeBigUInt64LE(1n << 60n, 0x08);
    expect(() => sevReportJson(huge)).toThrow(EvidenceCollectionFailed);
  });
});

describe('certificate table (auxblob)', () => {
  const vcek = Buffer.from('vcek-der');
  const ask = Buffer.from('ask-der');
  const ark = Buffer.from('ark-der');

  it("reads entries and sorts them as the sev crate's CertType order does", () => {
    const other = 'fbb6ed74-e73e-44ab-8893-4252792d737a';
    const t = parseCertTable(
      table([
        { type: other, data: Buffer.from('x') },
        { type: 'ASK', data: ask },
        { type: 'VCEK', data: vcek },
        { type: 'ARK', data: ark },
      ]),
    );
    expect(t).toEqual([
      { cert_type: 'ARK', data: [...ark] },
      { cert_type: 'VCEK', data: [...vcek] },
      { cert_type: 'ASK', data: [...ask] },
      { cert_type: { OTHER: other }, data: [...Buffer.from('x')] },
    ]);
  });

  it('gives an empty chain for a table with only its terminator', () => {
    expect(parseCertTable(Buffer.alloc(24))).toEqual([]);
  });

  it('refuses truncated, out-of-bounds, endless and oversized tables', () => {
    const good = table([{ type: 'VCEK', data: vcek }]);
    expect(() => parseCertTable(good.subarray(0, 20))).toThrow(/no terminating entry/);
    const oob = Buffer.from(good);
    oob.writeUInt32LE(good.length, 20);
    expect(() => parseCertTable(oob)).toThrow(/outside/);
    const farOffset = Buffer.from(good);
    farOffset.writeUInt32LE(0xffffffff, 16);
    expect(() => parseCertTable(farOffset)).toThrow(/outside/);
    const many = table(
      Array.from({ length: MAX_CERT_TABLE_ENTRIES + 1 }, () => ({ type: 'CRL', data: vcek })),
    );
    expect(() => parseCertTable(many)).toThrow(/more than/);
    expect(() => parseCertTable(Buffer.alloc(65 * 1024))).toThrow(/more than/);
    for (const bad of [oob, many]) expect(() => parseCertTable(bad)).toThrow(EvidenceCollectionFailed);
  });

  it('survives random tables without crashing', () => {
    let x = 99;
    const byte = () => {
      x = (x * 1103515245 + 12345) & 0x7fffffff;
      return x & 0xff;
    };
    for (let i = 0; i < 500; i++) {
      const b = Buffer.alloc(1 + (i % 200));
      for (let j = 0; j < b.length; j++) b[j] = i % 3 === 0 && j % 24 >= 16 ? byte() & 0x3f : byte();
      try {
        parseCertTable(b);
      } catch (e) {
        expect(e).toBeInstanceOf(EvidenceCollectionFailed);
      }
    }
  });
});

describe('snp attester over configfs-tsm', () => {
  let root: string;
  let tsmRoot: string;
  let responder: ConfigfsTsmResponder | undefined;
  let hostData: Buffer;
  let aux: Buffer;
  let lastRequest: TsmRequest | undefined;
  const vcekDer = Buffer.from('a VCEK, as DER');

  async function serve(respond?: (req: TsmRequest) => { outblob: Uint8Array; auxblob?: Uint8Array }) {
    responder = await ConfigfsTsmResponder.start({
      root: tsmRoot,
      provider: 'sev_guest',
      respond:
        respond ??
        ((req) => {
          lastRequest = req;
          return {
            outblob: rawReport({ reportData: req.inblob, hostData, vmpl: req.privlevel ?? 0 }),
            auxblob: aux,
          };
        }),
    });
  }

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'snp-attester-'));
    tsmRoot = join(root, 'sys/kernel/config/tsm/report');
    hostData = Buffer.alloc(32);
    aux = table([{ type: 'VCEK', data: vcekDer }]);
    lastRequest = undefined;
  });
  afterEach(async () => {
    responder?.close();
    responder = undefined;
    await rm(root, { recursive: true, force: true });
  });

  it('writes 64 bytes of zero-padded report data at VMPL 0 and returns the evidence upstream sends', async () => {
    await serve();
    const attester = new SnpAttester({ env: { BROKER_TSM_REPORT_ROOT: tsmRoot } });
    expect(attester.tsmRoot).toBe(tsmRoot);
    const ev = await attester.getEvidence(Buffer.from('nonce'));
    expect(lastRequest?.inblob).toEqual(
      new Uint8Array(Buffer.concat([Buffer.from('nonce'), Buffer.alloc(59)])),
    );
    expect(lastRequest?.privlevel).toBe(0);
    expect(Object.keys(ev)).toEqual(['attestation_report', 'cert_chain']);
    expect(ev.attestation_report.report_data.slice(0, 5)).toEqual([...Buffer.from('nonce')]);
    expect(ev.cert_chain).toEqual([{ cert_type: 'VCEK', data: [...vcekDer] }]);
    expect(JSON.parse(JSON.stringify(ev))).toEqual(ev);
    // The report folder is gone afterwards.
    expect(await readdir(tsmRoot)).toEqual([]);
  });

  it('sends a null cert_chain when the host gave no certificates', async () => {
    aux = Buffer.alloc(0);
    await serve();
    const ev = await new SnpAttester({ tsmRoot }).getEvidence(Buffer.alloc(64, 1));
    expect(ev.cert_chain).toBeNull();
  });

  it('finds the report root under the platform root by default', async () => {
    await serve();
    const attester = getAttester('snp', { root, env: {} }) as SnpAttester;
    expect(attester.tsmRoot).toBe(tsmRoot);
    await expect(attester.getEvidence(Buffer.alloc(1))).resolves.toHaveProperty('attestation_report');
  });

  it('refuses report data over 64 bytes, as upstream does', async () => {
    await serve();
    await expect(new SnpAttester({ tsmRoot }).getEvidence(Buffer.alloc(65))).rejects.toThrow(
      'SNP Attester: Report data must be no more than 64 bytes',
    );
    expect(responder?.requests).toBe(0);
  });

  it('refuses a report that does not carry the requested data, or is malformed', async () => {
    await serve((req) => ({
      outblob: rawReport({ reportData: Buffer.alloc(64, 0xee) }),
      auxblob: req.inblob,
    }));
    await expect(new SnpAttester({ tsmRoot }).getEvidence(Buffer.alloc(64, 1))).rejects.toThrow(
      /does not carry the requested report data/,
    );
    responder?.close();
    await serve((req) => ({ outblob: rawReport({ reportData: req.inblob }).subarray(0, 1000) }));
    await expect(new SnpAttester({ tsmRoot }).getEvidence(Buffer.alloc(64, 1))).rejects.toThrow(/1000 bytes/);
    responder?.close();
    await serve((req) => ({ outblob: rawReport({ reportData: req.inblob }), auxblob: Buffer.alloc(10, 1) }));
    await expect(new SnpAttester({ tsmRoot }).getEvidence(Buffer.alloc(64, 1))).rejects.toThrow(
      /certificate table/,
    );
  });

  it('does not use a configfs-tsm root of another provider: the ioctl path is next', async () => {
    responder = await ConfigfsTsmResponder.start({
      root: tsmRoot,
      provider: 'tdx_guest',
      respond: () => ({ outblob: Uint8Array.of(1) }),
    });
    const attester = new SnpAttester({ tsmRoot, shimDir: join(root, 'no-shims') });
    await expect(attester.source()).resolves.toBe('ioctl');
    await expect(attester.getEvidence(Buffer.alloc(64))).rejects.toMatchObject({ failure: 'not-found' });
    expect(responder.requests).toBe(0);
  });

  it('binds initdata: HOSTDATA must be the digest padded or truncated to 32 bytes', async () => {
    const sha256 = createHash('sha256').update('initdata').digest();
    const sha384 = createHash('sha384').update('initdata').digest();
    hostData = sha256;
    await serve();
    const attester = new SnpAttester({ tsmRoot });
    await expect(attester.bindInitData(sha256)).resolves.toBeUndefined();
    expect(lastRequest?.inblob).toEqual(new Uint8Array(64));
    await expect(attester.bindInitData(sha384)).rejects.toThrow('HOSTDATA does not match.');
    hostData = sha384.subarray(0, 32);
    await expect(attester.bindInitData(sha384)).resolves.toBeUndefined();
    hostData = Buffer.concat([Buffer.from('short'), Buffer.alloc(27)]);
    await expect(attester.bindInitData(Buffer.from('short'))).resolves.toBeUndefined();
    const err = await attester.bindInitData(sha256).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AttesterError);
  });

  it('fails closed when there is no report root and no ioctl shim', async () => {
    const attester = new SnpAttester({ tsmRoot: join(root, 'missing'), shimDir: join(root, 'no-shims') });
    await expect(attester.bindInitData(Buffer.alloc(32))).rejects.toMatchObject({ failure: 'not-found' });
    await expect(attester.getEvidence(Buffer.alloc(64))).rejects.toThrow(/broker-snp-report is missing/);
  });
});

describe('snp detection', () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'snp-detect-'));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("looks for upstream's sev-guest device under the platform root", async () => {
    const ctx = () => platformContext({ root, env: {} });
    expect(await snpModule.detect(ctx())).toEqual({
      detected: false,
      reason: `${SEV_GUEST_SYSFS} does not exist`,
    });
    await mkdir(join(root, SEV_GUEST_SYSFS), { recursive: true });
    expect((await snpModule.detect(ctx())).detected).toBe(true);
  });

  it(`takes the device path from ${BROKER_SEV_GUEST_SYSFS}, used as is`, async () => {
    const node = join(root, 'mock', 'sev-guest');
    const ctx = (v: string) =>
      platformContext({ root: '/nonexistent', env: { [BROKER_SEV_GUEST_SYSFS]: v } });
    expect((await snpModule.detect(ctx(node))).detected).toBe(false);
    await mkdir(node, { recursive: true });
    expect(await snpModule.detect(ctx(node))).toEqual({
      detected: true,
      reason: `${node} exists (${BROKER_SEV_GUEST_SYSFS})`,
    });
    expect((await snpModule.detect(ctx('relative/path'))).detected).toBe(false);
  });
});
