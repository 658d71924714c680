import { createHash, generateKeyPairSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@broker/cli';
import type { KvStorage, Namespace, SetOptions } from '@broker/kv-storage';
import { canonicalJson } from '@broker/protocol';
import {
  INTEL_PCS_URL,
  PcsClientToolFile,
  PcsCollateralService,
  parseSnpReport,
  SNP_REPORT_SIZE,
  sevJsonFromReport,
  type TcbVersion,
  VerificationError,
} from '@broker/verifier';
import { createTestAmdRoots, issueTestVek, signSnpReport } from '@broker/verifier/testing';
import { pino } from 'pino';
import { parse } from 'smol-toml';
import { afterAll, describe, expect, it } from 'vitest';
import { parseAttestationServiceConfig } from './config.js';
import { AttestationFailed } from './errors.js';
import { createAttestationService } from './service.js';
import { loadVerifierSettings, MAX_TRUST_FILE_BYTES } from './verifier-settings.js';

class MemoryKv implements KvStorage {
  readonly data = new Map<string, Uint8Array>();
  async get(ns: Namespace, key: string) {
    return this.data.get(`${ns}/${key}`);
  }
  async set(ns: Namespace, key: string, value: Uint8Array, options?: SetOptions) {
    if (options?.overwrite === false && this.data.has(`${ns}/${key}`)) return false;
    this.data.set(`${ns}/${key}`, value);
    return true;
  }
  async delete(ns: Namespace, key: string) {
    return this.data.delete(`${ns}/${key}`);
  }
  async list(ns: Namespace) {
    return [...this.data.keys()].filter((k) => k.startsWith(`${ns}/`)).map((k) => k.slice(ns.length + 1));
  }
  async close() {}
}

const dir = mkdtempSync(join(tmpdir(), 'kbs-verifier-settings-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const DAY = 86_400_000;
const roots = createTestAmdRoots({ rsaBits: 2048 });
const other = createTestAmdRoots({ rsaBits: 2048, product: 'Other' });
const tcb: TcbVersion = { bootloader: 4, tee: 0, snp: 22, microcode: 213 };
const chipId = createHash('sha512').update('kbs test chip').digest();
const vcekNotBefore = new Date(Date.now() - DAY);
const vcek = issueTestVek(roots, {
  tcb,
  hwid: chipId,
  notBefore: vcekNotBefore,
  notAfter: new Date(vcekNotBefore.getTime() + 30 * DAY),
});

const file = (name: string, content: string | Uint8Array) => {
  const p = join(dir, name);
  writeFileSync(p, content);
  return p;
};
const arkPath = file('amd-roots.pem', roots.bundlePem);
const otherArkPath = file('other-roots.pem', other.bundlePem);
const store = join(dir, 'kds-store');
mkdirSync(join(store, 'vcek', chipId.toString('hex')), { recursive: true });
writeFileSync(join(store, 'vcek', chipId.toString('hex'), 'vcek.der'), vcek.der);

const teeKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' });
const runtimeData = { 'additional-evidence': '', nonce: 'bm9uY2U=', 'tee-pubkey': { kty: 'EC', ...teeKey } };
const reportData = createHash('sha384').update(canonicalJson(runtimeData)).digest();

/** A Milan v3 report at VMPL 0 binding the runtime data, signed by the test VCEK. */
function snpEvidence(withChain: boolean) {
  const b = Buffer.alloc(SNP_REPORT_SIZE);
  b.writeUInt32LE(3, 0);
  b.writeBigUInt64LE(0x30000n, 0x08);
  b.writeUInt32LE(1, 0x34);
  reportData.copy(b, 0x50);
  Buffer.from([tcb.bootloader, tcb.tee, 0, 0, 0, 0, tcb.snp, tcb.microcode]).copy(b, 0x180);
  b[0x188] = 0x19; // family
  b[0x189] = 0x01; // model: Milan
  b[0x18a] = 1;
  chipId.copy(b, 0x1a0);
  const signed = signSnpReport(b, vcek.privateKey);
  return {
    attestation_report: sevJsonFromReport(parseSnpReport(signed)),
    cert_chain: withChain ? [{ cert_type: 'VCEK', data: [...vcek.der] }] : null,
  };
}

const logger = pino({ level: 'silent' });

async function attest(toml: string, evidence: unknown, now?: number): Promise<unknown> {
  const table = (parse(`[attestation_service]\n${toml}`) as Record<string, unknown>).attestation_service;
  const as = await createAttestationService(parseAttestationServiceConfig(table), new MemoryKv(), logger, {
    ...(now !== undefined ? { now: () => now } : {}),
  });
  return as.verify({
    tee: 'snp',
    evidence,
    runtimeData,
    runtimeDataHashAlgorithm: 'sha384',
    initData: null,
    additional: [],
    policyIds: ['default'],
  });
}

async function attestFailure(
  toml: string,
  evidence: unknown,
  now?: number,
): Promise<VerificationError['code']> {
  try {
    await attest(toml, evidence, now);
  } catch (e) {
    expect(e).toBeInstanceOf(AttestationFailed);
    expect((e as AttestationFailed).reason).toBe('EVIDENCE');
    const cause = (e as Error).cause;
    expect(cause).toBeInstanceOf(VerificationError);
    return (cause as VerificationError).code;
  }
  throw new Error('attestation succeeded');
}

const snpSection = (lines: string) => `[attestation_service.verifier_config.snp_verifier]\n${lines}\n`;

describe('snp_verifier settings reach the verifier', () => {
  it('accepts a test-root report only when its ARK bundle is configured', async () => {
    await expect(
      attest(snpSection(`trusted_ark_paths = ["${arkPath}"]`), snpEvidence(true)),
    ).resolves.toMatch(/^ey/);
    expect(await attestFailure('', snpEvidence(true))).toBe('CERT_CHAIN_INVALID');
    expect(
      await attestFailure(snpSection(`trusted_ark_paths = ["${otherArkPath}"]`), snpEvidence(true)),
    ).toBe('CERT_CHAIN_INVALID');
  });

  it('finds the VCEK in a configured offline store, and nowhere with vcek_sources = []', async () => {
    const ark = `trusted_ark_paths = ["${arkPath}"]`;
    await expect(
      attest(
        snpSection(`${ark}\nvcek_sources = [{ type = "OfflineStore", path = "${store}" }]`),
        snpEvidence(false),
      ),
    ).resolves.toMatch(/^ey/);
    expect(await attestFailure(snpSection(`${ark}\nvcek_sources = []`), snpEvidence(false))).toBe(
      'VCEK_UNAVAILABLE',
    );
  });

  it("checks certificate validity at the service's clock", async () => {
    const toml = snpSection(`trusted_ark_paths = ["${arkPath}"]`);
    await expect(attest(toml, snpEvidence(true), Date.now())).resolves.toMatch(/^ey/);
    expect(await attestFailure(toml, snpEvidence(true), Date.now() + 60 * DAY)).toBe(
      'CERT_NOT_VALID_AT_TIME',
    );
  });
});

describe('loadVerifierSettings', () => {
  const load = async (toml: string) => {
    const table = (parse(`[attestation_service]\n${toml}`) as Record<string, unknown>).attestation_service;
    return loadVerifierSettings(parseAttestationServiceConfig(table).verifierConfig);
  };
  const refusal = async (toml: string): Promise<string> => {
    try {
      await load(toml);
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      return (e as Error).message;
    }
    throw new Error('loaded');
  };

  it("gives trustee's defaults without verifier settings (KDS, Intel's PCS), and parsed roots with them", async () => {
    const defaults = await load('');
    expect(defaults.snp).toEqual({ vcekSources: [{ type: 'KDS' }] });
    expect(defaults.trustedArks).toBeUndefined();
    expect(defaults.tdx?.collateralService).toBeInstanceOf(PcsCollateralService);
    expect(defaults.tdx?.collateralService?.description).toBe(INTEL_PCS_URL);
    expect((defaults.tdx!.collateralService as PcsCollateralService).tcbUpdateType).toBe('early');
    const s = await load(
      snpSection(
        `trusted_ark_paths = ["${arkPath}", "${otherArkPath}"]\nvcek_sources = [{ type = "KDS", base_url = "https://kds.mirror" }]`,
      ),
    );
    expect(s.trustedArks).toHaveLength(2);
    expect(s.snp).toEqual({ vcekSources: [{ type: 'KDS', baseUrl: 'https://kds.mirror' }] });
    expect((await load(snpSection('vcek_sources = []'))).snp).toBeUndefined();
  });

  it('takes dcap_verifier collateral_service and tcb_update_type; offline collateral wins', async () => {
    const dcap = '[attestation_service.verifier_config.dcap_verifier]\n';
    const pccs = await load(
      `${dcap}collateral_service = "https://pccs.example:8081/sgx/certification/v4/"\ntcb_update_type = "standard"`,
    );
    const service = pccs.tdx!.collateralService as PcsCollateralService;
    expect(service.origin).toBe('https://pccs.example:8081');
    expect(service.isIntelPcs).toBe(false);
    expect(service.tcbUpdateType).toBe('standard');
    const file = await load(`${dcap}collateral_service = "file:///var/cache/pcs/collateral.json"`);
    expect(file.tdx?.collateralService).toBeInstanceOf(PcsClientToolFile);
    expect(await refusal(`${dcap}collateral_service = "ftp://x"`)).toContain('collateral_service');
  });

  it.each([
    ['a missing file', () => join(dir, 'absent.pem'), 'cannot open'],
    ['a directory', () => dir, 'not a regular file'],
    ['garbage', () => file('garbage.pem', 'not a certificate'), 'garbage.pem'],
    ['a lone VCEK', () => file('vcek.pem', vcek.pem), 'vcek.pem'],
    ['an oversize file', () => file('huge.pem', 'A'.repeat(MAX_TRUST_FILE_BYTES + 1)), 'larger than'],
  ])('refuses %s as a trusted ARK bundle, naming the key and file', async (_n, path, text) => {
    const p = path();
    const msg = await refusal(snpSection(`trusted_ark_paths = ["${p}"]`));
    expect(msg).toContain('trusted_ark_paths');
    expect(msg).toContain(text);
  });

  it('refuses relative paths and half-configured TDX collateral', async () => {
    expect(await refusal(snpSection('trusted_ark_paths = ["roots.pem"]'))).toContain('not an absolute path');
    const tdx = '[attestation_service.verifier_config.tdx_verifier]\n';
    expect(await refusal(`${tdx}tcb_info_paths = ["/x.json"]`)).toContain('go together');
    expect(await refusal(`${tdx}qe_identity_path = "/x.json"`)).toContain('go together');
    expect(await refusal(`${tdx}pck_crl_path = "/x.der"`)).toContain('needs tcb_info_paths');
    expect(await refusal(`${tdx}unknown = 1`)).toContain('unknown');
  });

  it('reads TDX collateral and test SGX roots once, refusing broken files', async () => {
    const tdx = '[attestation_service.verifier_config.tdx_verifier]\n';
    const sgxRoot = file('sgx-root.pem', roots.ark.pem);
    const s = await load(`${tdx}trusted_sgx_root_paths = ["${sgxRoot}"]`);
    expect(s.tdx?.trustedSgxRoots).toEqual([roots.ark.pem]);
    expect(s.tdx?.collateral).toBeUndefined();
    const bad = file('tcb-info.json', '{"tcbInfo": 1}');
    const qe = file('qe.json', '{}');
    expect(await refusal(`${tdx}tcb_info_paths = ["${bad}"]\nqe_identity_path = "${qe}"`)).toContain(
      'tcb_info_paths',
    );
    expect(await refusal(`${tdx}trusted_sgx_root_paths = ["${file('none.pem', 'x')}"]`)).toContain(
      'holds no PEM certificate',
    );
  });
});
