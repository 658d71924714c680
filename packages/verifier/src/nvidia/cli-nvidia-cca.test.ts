// kbs-verify --tee nvidia and --tee cca, offline: trustee's vectors as the KBS would verify them.
import { readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import { type CliIo, main } from '../cli.js';
import { createTestDevice } from './test-device.js';

function io(files: Record<string, string | Buffer> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const cli: CliIo = {
    out: (s) => out.push(s),
    err: (s) => err.push(s),
    readFile: (p) => {
      const f = files[p];
      return f !== undefined ? Buffer.from(f) : readFileSync(p);
    },
  };
  return { cli, out: () => out.join(''), err: () => err.join('') };
}

const NV = (name: string) => readFileSync(vector(`trustee/nvidia/${name}`), 'utf8');
const NONCE = '931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb';
const NV_EVIDENCE = JSON.stringify({
  device_evidence_list: [
    {
      arch: 'HOPPER',
      uuid: '1111-2222-33333-444444-555555',
      evidence: NV('hopperAttestationReport.txt'),
      certificate: Buffer.from(NV('hopper_cert_chain_case1.txt')).toString('base64'),
    },
  ],
});
const CCA = (name: string) => vector(`trustee/cca/${name}`);
const CCA_EVIDENCE = JSON.stringify({ token: [...readFileSync(CCA('cca-example-token.cbor'))] });

describe('kbs-verify --tee nvidia', () => {
  it("prints trustee's claims for the Hopper report with its nonce", async () => {
    const t = io({ 'gpu.json': NV_EVIDENCE });
    const code = await main(['--tee', 'nvidia', '--evidence', 'gpu.json', '--report-data', NONCE], t.cli);
    expect(t.err()).toBe('');
    expect(code).toBe(0);
    const [r] = JSON.parse(t.out());
    expect(r.class).toBe('gpu');
    expect(r.claims).toStrictEqual(JSON.parse(NV('hopperAttestationReport-claims.txt')));
  });

  it('without --report-data, takes the report nonce and says it is unchecked', async () => {
    const t = io({ 'gpu.json': NV_EVIDENCE });
    expect(await main(['--tee', 'nvidia', '--evidence', 'gpu.json'], t.cli)).toBe(0);
    expect(t.err()).toMatch(new RegExp(`report data NOT checked: using the evidence's own ${NONCE}`));
  });

  it('fails on another nonce, naming the check', async () => {
    const t = io({ 'gpu.json': NV_EVIDENCE });
    expect(
      await main(['--tee', 'nvidia', '--evidence', 'gpu.json', '--report-data', '00'.repeat(32)], t.cli),
    ).toBe(1);
    expect(t.err()).toMatch(/REPORT_DATA_MISMATCH: NVIDIA report nonce/);
  });

  it('trusts a simulated device only with its root given by --trusted-root', async () => {
    const device = createTestDevice();
    const nonce = Buffer.alloc(32, 3);
    const files = { 'sim.json': JSON.stringify(device.evidence(nonce)), 'root.pem': device.rootPem };
    const args = ['--tee', 'nvidia', '--evidence', 'sim.json', '--report-data', nonce.toString('hex')];
    const refused = io(files);
    expect(await main(args, refused.cli)).toBe(1);
    expect(refused.err()).toMatch(/CERT_CHAIN_INVALID/);
    const t = io(files);
    expect(await main([...args, '--trusted-root', 'root.pem'], t.cli)).toBe(0);
  });
});

describe('kbs-verify --tee cca', () => {
  it('verifies the example token with trustee TA and RV stores', async () => {
    const t = io({ 'cca.json': CCA_EVIDENCE });
    const args = [
      '--tee',
      'cca',
      '--evidence',
      'cca.json',
      '--ta-store',
      CCA('tastore.json'),
      '--rv-store',
      CCA('rvstore.json'),
    ];
    expect(await main(args, t.cli)).toBe(0);
    const [r] = JSON.parse(t.out());
    expect(r.class).toBe('cpu');
    expect(r.claims.platform['cca-platform-implementation-id']).toBe(
      Buffer.from('7f454c4602010100000000000000000003003e00010000005058000000000000', 'hex').toString(
        'base64',
      ),
    );
    expect(t.err()).toMatch(/report data NOT checked/);
  });

  it('fails with an RV store that does not describe the platform', async () => {
    const t = io({ 'cca.json': CCA_EVIDENCE, 'rv.json': '{"platform":[],"realm":[]}' });
    const args = [
      '--tee',
      'cca',
      '--evidence',
      'cca.json',
      '--ta-store',
      CCA('tastore.json'),
      '--rv-store',
      'rv.json',
    ];
    expect(await main(args, t.cli)).toBe(1);
    expect(t.err()).toMatch(/TCB_NOT_SUPPORTED: CCA platform implementation-id/);
  });

  it('--ta-store needs --rv-store', async () => {
    const t = io({ 'cca.json': CCA_EVIDENCE });
    expect(
      await main(['--tee', 'cca', '--evidence', 'cca.json', '--ta-store', CCA('tastore.json')], t.cli),
    ).toBe(2);
  });
});
