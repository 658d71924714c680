// Bare SEV-SNP end to end against the mock SNP device (a configfs-tsm report root served by this
// process, reports signed by the device's test VCEK): the `snp` attester and verifier in process,
// then the real attestation-agent and api-server-rest executables detecting `snp` from the mock,
// and the KBS verifying their evidence with the device's test ARK.
import { createHash } from 'node:crypto';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AttesterNotSupported,
  explainTeeDetection,
  getAttester,
  parseCertTable,
  type SnpAttester,
  type SnpEvidence,
} from '@broker/attester';
import { type MockSnpDevice, startMockSnpDevice } from '@broker/mock-tee';
import type { Tee } from '@broker/protocol';
import {
  getVerifier,
  parseSnpReport,
  SnpVerifier,
  sevJsonFromReport,
  VerificationError,
  VerifierNotSupported,
} from '@broker/verifier';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binary, type Running, runToEnd, start, waitForListen } from './helpers/process.js';
import { type KbsHandle, prepareKbs, startApiServerRest } from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-snp-e2e-'));
const sha256 = (b: string | Uint8Array) => createHash('sha256').update(b).digest();
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** The initdata the guest is launched with; its digest is HOST_DATA (what kata's host sets). */
function initdataToml(aaToml: string): string {
  return `algorithm = "sha256"\nversion = "0.1.0"\n\n[data]\n"aa.toml" = '''\n${aaToml}'''\n`;
}

let device: MockSnpDevice;
const verifier = new SnpVerifier();

beforeAll(async () => {
  device = await startMockSnpDevice({
    stateDir: join(dir, 'snp-device'),
    initDataDigest: sha256(initdataToml('')),
    rootKeyBits: 2048,
  });
});

afterAll(async () => {
  device?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    if (e instanceof VerificationError) return e.code;
    throw e;
  }
  throw new Error('verification succeeded');
}

describe('snp attester → verifier, in process', () => {
  const snp = () => getAttester('snp', { env: device.env }) as SnpAttester;

  it('detects snp from the mock device, in upstream order', async () => {
    const d = await explainTeeDetection({ env: device.env });
    expect(d.tee).toBe('snp');
    expect(d.probes.at(-1)?.reason).toContain(device.sevGuestPath);
    expect((await explainTeeDetection({ env: {}, root: dir })).tee).toBe('sample');
  });

  it("sends evidence the verifier accepts with the device's test ARK, and only with it", async () => {
    const reportData = createHash('sha384').update('runtime data').digest();
    const evidence = await snp().getEvidence(reportData);
    const [result] = await verifier.evaluate(evidence, {
      reportData,
      initDataHash: sha256(initdataToml('')),
      trustedArks: [device.rootsBundlePem],
    });
    expect(result!.class).toBe('cpu');
    expect(result!.claims).toMatchObject({
      measurement: hex(device.config.measurement),
      report_data: reportData.toString('hex') + '00'.repeat(16),
      init_data: sha256(initdataToml('')).toString('hex'),
      chip_id: device.roots.chipId.toString('hex'),
      reported_tcb_snp: device.roots.tcb.snp,
      policy_debug_allowed: false,
    });
    expect(await refusal(verifier.evaluate(evidence, { reportData }))).toBe('CERT_CHAIN_INVALID');
    expect(
      await refusal(
        verifier.evaluate(evidence, { reportData: sha256('other'), trustedArks: [device.rootsBundlePem] }),
      ),
    ).toBe('REPORT_DATA_MISMATCH');
    expect(
      await refusal(
        verifier.evaluate(evidence, {
          reportData,
          initDataHash: sha256('other initdata'),
          trustedArks: [device.rootsBundlePem],
        }),
      ),
    ).toBe('INIT_DATA_MISMATCH');
  });

  it('agrees with the verifier on the JSON of the raw report and on the certificate table', async () => {
    const reportData = Buffer.alloc(64, 0x42);
    const raw = device.report(reportData);
    const evidence: SnpEvidence = await snp().getEvidence(reportData);
    const fromVerifier = sevJsonFromReport(parseSnpReport(raw));
    // Same device, same report data: only the signature (random ECDSA nonce) differs.
    expect({ ...evidence.attestation_report, signature: null }).toEqual({ ...fromVerifier, signature: null });
    expect(Object.keys(evidence.attestation_report)).toEqual(Object.keys(fromVerifier));
    expect(evidence.cert_chain).toEqual(parseCertTable(device.certTable()));
    expect(evidence.cert_chain).toEqual([{ cert_type: 'VCEK', data: [...device.roots.vcekDer] }]);
  });

  it('verifies without a certificate table through the offline VCEK store, and only with a source', async () => {
    device.config.certTable = 'none';
    try {
      const reportData = sha256('no table');
      const evidence = await snp().getEvidence(reportData);
      expect(evidence.cert_chain).toBeNull();
      await expect(
        verifier.evaluate(evidence, {
          reportData,
          trustedArks: [device.rootsBundlePem],
          snp: { vcekSources: [{ type: 'OfflineStore', path: device.vcekStorePath }] },
        }),
      ).resolves.toHaveLength(1);
      expect(
        await refusal(verifier.evaluate(evidence, { reportData, trustedArks: [device.rootsBundlePem] })),
      ).toBe('VCEK_UNAVAILABLE');
    } finally {
      device.config.certTable = 'vcek';
    }
  });

  it('binds initdata through HOSTDATA and fails closed on a mismatch', async () => {
    await expect(snp().bindInitData(sha256(initdataToml('')))).resolves.toBeUndefined();
    await expect(snp().bindInitData(sha256(initdataToml('# changed\n')))).rejects.toThrow(
      'HOSTDATA does not match.',
    );
  });

  it('refuses unknown TEE types on both sides', () => {
    expect(() => getVerifier('sev' as Tee)).toThrow(VerifierNotSupported);
    expect(() => getAttester('sev' as Tee, { env: device.env })).toThrow(AttesterNotSupported);
  });
});

interface Guest {
  aa: Running;
  rest: Running;
  restPort: number;
  get(path: string): Promise<Response>;
  stop(): Promise<void>;
}

/** attestation-agent and api-server-rest as real processes, the agent pointed at the mock device. */
async function startGuest(name: string, aaToml: string, initdata: string): Promise<Guest> {
  const gdir = join(dir, name);
  mkdirSync(gdir, { recursive: true });
  writeFileSync(join(gdir, 'aa.toml'), aaToml);
  writeFileSync(join(gdir, 'initdata.toml'), initdata);
  const aaSock = join(gdir, 'aa.sock');
  const env = { ...process.env, ...device.env, RUST_LOG: 'debug' };
  const aa = start(
    binary('attestation-agent'),
    [
      '-c',
      join(gdir, 'aa.toml'),
      '--attestation_sock',
      `unix://${aaSock}`,
      '--initdata-toml',
      join(gdir, 'initdata.toml'),
    ],
    { env },
  );
  await waitForListen({ path: aaSock }, aa);
  const { rest, restPort } = await startApiServerRest({ aaSock });
  await waitForListen({ port: restPort }, rest);
  return {
    aa,
    rest,
    restPort,
    get: (path) => fetch(`http://127.0.0.1:${restPort}${path}`, { signal: AbortSignal.timeout(60_000) }),
    async stop() {
      await Promise.all([rest.stop(), aa.stop()]);
    },
  };
}

describe('attestation-agent on the mock SNP device, as real processes', () => {
  let guest: Guest;
  beforeAll(async () => {
    guest = await startGuest('guest', '', initdataToml(''));
  });
  afterAll(async () => {
    await guest?.stop();
  });

  it('detects snp, binds initdata, and serves evidence the verifier accepts', async () => {
    const res = await guest.get('/aa/evidence?runtime_data=hello');
    expect(res.status).toBe(200);
    const evidence = JSON.parse(await res.text()) as SnpEvidence;
    expect(evidence.attestation_report.report_data.slice(0, 5)).toEqual([...Buffer.from('hello')]);
    await expect(
      verifier.evaluate(evidence, {
        reportData: Buffer.from('hello'),
        initDataHash: sha256(initdataToml('')),
        trustedArks: [device.rootsBundlePem],
      }),
    ).resolves.toHaveLength(1);
    expect(guest.aa.output()).toContain('TEE detected: snp');
    expect(guest.aa.output()).toContain('Check initdata passed.');
  });

  it('does not start when HOSTDATA does not match the initdata', async () => {
    const gdir = join(dir, 'mismatch');
    mkdirSync(gdir, { recursive: true });
    writeFileSync(join(gdir, 'initdata.toml'), initdataToml('# not what the host launched\n'));
    const r = await runToEnd(
      binary('attestation-agent'),
      [
        '--attestation_sock',
        `unix://${join(gdir, 'aa.sock')}`,
        '--initdata-toml',
        join(gdir, 'initdata.toml'),
      ],
      { env: { ...process.env, ...device.env } },
    );
    expect(r.code).not.toBe(0);
    expect(r.stdout + r.stderr).toContain('HOSTDATA does not match.');
  });
});

describe('snp through the KBS', () => {
  let kbs: KbsHandle;
  let guest: Guest | undefined;
  /** Why the KBS could not be run with the SNP verifier settings; undefined once it is. */
  let pending: string | undefined;

  beforeAll(async () => {
    mkdirSync(join(dir, 'kbs'), { recursive: true });
    kbs = await prepareKbs(join(dir, 'kbs'));
    // Test roots are trusted only because this configuration names them.
    appendFileSync(
      kbs.configPath,
      `\n[attestation_service.verifier_config.snp_verifier]\nvcek_sources = [{ type = "OfflineStore", path = "${device.vcekStorePath}" }]\ntrusted_ark_paths = ["${device.rootsBundlePath}"]\n`,
    );
    try {
      await kbs.start();
    } catch (e) {
      pending = `the KBS does not take the SNP verifier settings yet: ${(e as Error).message.split('\n').slice(0, 3).join(' ')}`;
      return;
    }
    const cert = kbs.tls.certPem.trim();
    const aaToml = `[token_configs]\n[token_configs.kbs]\nurl = "${kbs.url}"\ncert = """\n${cert}\n"""\n`;
    // HOSTDATA binds exactly this initdata, the one the guest sends to the KBS.
    device.config.hostData = sha256(initdataToml(aaToml));
    guest = await startGuest('kbs-guest', aaToml, initdataToml(aaToml));
  });

  afterAll(async () => {
    await guest?.stop();
    await kbs?.stop();
  });

  const token = async () => {
    const res = await guest!.get('/aa/token?token_type=kbs');
    return { status: res.status, body: await res.text() };
  };

  it('issues a token for snp evidence, with the VCEK from the table and from the offline store', async (ctx) => {
    if (pending !== undefined) ctx.skip(pending);
    const first = await token();
    expect(first.status, first.body).toBe(200);
    const claims = decodeJwt(JSON.parse(first.body).token) as {
      submods: {
        cpu0: { 'ear.veraison.annotated-evidence': { snp: { measurement: string }; init_data: string } };
      };
    };
    const annotated = claims.submods.cpu0['ear.veraison.annotated-evidence'];
    expect(annotated.snp.measurement).toBe(hex(device.config.measurement));
    expect(annotated.init_data).toBe(hex(device.config.hostData));
    device.config.certTable = 'none';
    try {
      const second = await token();
      expect(second.status, second.body).toBe(200);
    } finally {
      device.config.certTable = 'vcek';
    }
  });

  it('refuses evidence whose HOSTDATA does not bind the initdata the guest sent', async (ctx) => {
    if (pending !== undefined) ctx.skip(pending);
    const bound = device.config.hostData;
    device.config.hostData = sha256('another initdata');
    try {
      const res = await token();
      expect(res.status).not.toBe(200);
      expect(kbs.process.output()).toMatch(/HOST_DATA differs from the initdata digest/);
    } finally {
      device.config.hostData = bound;
    }
  });
});
