import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ConfigfsTsmResponder,
  type MockCcaDevice,
  startMockCcaDevice,
  startMockSnpDevice,
} from '@broker/mock-tee';
import { CcaVerifier, VerificationError } from '@broker/verifier';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TsmReportError } from '../configfs-tsm.js';
import { platformContext } from '../platform.js';
import { explainTeeDetection, getAttester } from '../registry.js';
import { CCA_CHALLENGE_SIZE, CcaAttester, ccaModule } from './index.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-cca-attester-'));
let realm: MockCcaDevice;
const verifier = new CcaVerifier();
const sha384 = (s: string) => createHash('sha384').update(s).digest();

beforeAll(async () => {
  realm = await startMockCcaDevice({ stateDir: join(dir, 'realm') });
});
afterAll(() => {
  realm?.close();
  rmSync(dir, { recursive: true, force: true });
});

const cca = () => new CcaAttester({ env: realm.env });

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    if (e instanceof VerificationError) return e.code;
    throw e;
  }
  throw new Error('verification succeeded');
}

describe('cca attester on the simulated realm', () => {
  it('sends the token as JSON numbers, which the cca verifier accepts with the TA and RV stores', async () => {
    const reportData = sha384('{"additional-evidence":"","nonce":"n","tee-pubkey":{}}');
    const evidence = await cca().getEvidence(reportData);
    expect(Object.keys(evidence)).toEqual(['token']);
    expect(evidence.token.every((b) => Number.isInteger(b) && b >= 0 && b < 256)).toBe(true);
    // CBOR tag 399: the CCA token collection.
    expect(evidence.token.slice(0, 3)).toEqual([0xd9, 0x01, 0x8f]);
    const configPath = realm.verifierConfigPath;
    const [result] = await verifier.evaluate(evidence, { reportData, cca: { configPath } });
    const challenge = Buffer.concat([reportData, Buffer.alloc(16)]);
    expect(result).toMatchObject({
      class: 'cpu',
      claims: {
        report_data: challenge.toString('hex'),
        realm: { 'cca-realm-challenge': challenge.toString('base64') },
      },
    });
    expect(
      await refusal(verifier.evaluate(evidence, { reportData: sha384('other'), cca: { configPath } })),
    ).toBe('REPORT_DATA_MISMATCH');
    // Another platform's trust anchors do not know this CPAK.
    const other = await startMockCcaDevice({ stateDir: join(dir, 'other-realm') });
    other.close();
    expect(
      await refusal(
        verifier.evaluate(evidence, { reportData, cca: { configPath: other.verifierConfigPath } }),
      ),
    ).toBe('CERT_CHAIN_INVALID');
  });

  it('pads short report data to the 64-byte challenge and refuses longer', async () => {
    const evidence = await cca().getEvidence(Buffer.from('short'));
    await expect(
      verifier.evaluate(evidence, {
        reportData: Buffer.from('short'),
        cca: { configPath: realm.verifierConfigPath },
      }),
    ).resolves.toHaveLength(1);
    await expect(cca().getEvidence(Buffer.alloc(CCA_CHALLENGE_SIZE + 1))).rejects.toThrow(
      'CCA Attester: Challenge size must be 64 bytes or less.',
    );
  });

  it('carries the realm personalization value the host set, which binds initdata', async () => {
    const digest = createHash('sha512').update('initdata').digest();
    realm.config.personalizationValue = digest;
    try {
      const reportData = sha384('rpv');
      const evidence = await cca().getEvidence(reportData);
      const cfg = { configPath: realm.verifierConfigPath };
      const [result] = await verifier.evaluate(evidence, { reportData, initDataHash: digest, cca: cfg });
      expect((result!.claims as { init_data: string }).init_data).toBe(digest.toString('hex'));
      expect(
        await refusal(verifier.evaluate(evidence, { reportData, initDataHash: sha384('x'), cca: cfg })),
      ).toBe('INIT_DATA_MISMATCH');
    } finally {
      realm.config.personalizationValue = Buffer.alloc(64);
    }
  });

  it('keeps its keys across restarts, so the stores stay valid', async () => {
    const stateDir = join(dir, 'restart');
    const first = await startMockCcaDevice({ stateDir });
    const taStore = first.platform.taStoreJson;
    first.close();
    const second = await startMockCcaDevice({ stateDir });
    try {
      expect(second.platform.taStoreJson).toBe(taStore);
      const evidence = await new CcaAttester({ env: second.env }).getEvidence(sha384('again'));
      await expect(
        verifier.evaluate(evidence, {
          reportData: sha384('again'),
          cca: { configPath: first.verifierConfigPath },
        }),
      ).resolves.toHaveLength(1);
    } finally {
      second.close();
    }
  });
});

describe('cca attester refusals', () => {
  it('refuses an empty token rather than sending it', async () => {
    const root = join(dir, 'empty-token');
    const responder = await ConfigfsTsmResponder.start({
      root,
      provider: 'arm_cca_guest',
      respond: () => ({ outblob: new Uint8Array(0) }),
    });
    try {
      await expect(
        new CcaAttester({ env: { BROKER_TSM_REPORT_ROOT: root } }).getEvidence(sha384('x')),
      ).rejects.toThrow('CCA Attester: the CCA token is empty');
    } finally {
      responder.close();
    }
  });
});

describe('cca detection', () => {
  it('detects the arm_cca_guest provider, in upstream order, and is what the registry builds', async () => {
    const d = await explainTeeDetection({ env: realm.env });
    expect(d.tee).toBe('cca');
    expect(d.probes.at(-1)?.reason).toBe(`configfs-tsm at ${realm.tsmRoot} has the arm_cca_guest provider`);
    expect(getAttester('cca', { env: realm.env })).toBeInstanceOf(CcaAttester);
  });

  it('does not take another provider or a missing root for a realm', async () => {
    const snp = await startMockSnpDevice({ stateDir: join(dir, 'snp'), rootKeyBits: 2048 });
    try {
      const d = await ccaModule.detect(platformContext({ env: { BROKER_TSM_REPORT_ROOT: snp.tsmRoot } }));
      expect(d).toEqual({
        detected: false,
        reason: `configfs-tsm at ${snp.tsmRoot} has the sev_guest provider`,
      });
      // And a CCA attester pointed at it refuses the wrong provider rather than sending an SNP report.
      await expect(
        new CcaAttester({ env: { BROKER_TSM_REPORT_ROOT: snp.tsmRoot } }).getEvidence(sha384('x')),
      ).rejects.toThrow(TsmReportError);
    } finally {
      snp.close();
    }
    const none = join(dir, 'no-such-root');
    expect(await ccaModule.detect(platformContext({ env: { BROKER_TSM_REPORT_ROOT: none } }))).toEqual({
      detected: false,
      reason: `no configfs-tsm report root at ${none}`,
    });
  });
});
