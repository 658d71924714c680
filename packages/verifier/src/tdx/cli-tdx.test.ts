// kbs-verify with the TDX collateral options.
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import { type CliIo, main } from '../cli.js';
import { PCK_PLATFORM_CA_CN } from './pck.js';
import {
  createTestQuotingEnclave,
  createTestSgxPki,
  issueTestPck,
  signCollateral,
  signTestCrl,
  signTestQuote,
  type TestPlatform,
  testQeIdentity,
  testTcbInfo,
} from './test-pki.js';

const DIR = vector('trustee/tdx');

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

describe('kbs-verify --tee tdx', () => {
  it('verifies test hardware with the collateral and test root given as files', async () => {
    const platform: TestPlatform = {
      fmspc: Buffer.from('00906ed50000', 'hex'),
      tcbComponents: Array(16).fill(1),
      pceSvn: 5,
    };
    const pki = createTestSgxPki();
    const qe = createTestQuotingEnclave(pki, issueTestPck(pki, platform));
    const reportData = Buffer.alloc(64, 0xab);
    const quote = signTestQuote(qe, { reportData, tdAttributes: Buffer.from('0000001000000000', 'hex') });
    const files = {
      'ev.json': JSON.stringify({ cc_eventlog: null, quote: quote.toString('base64') }),
      'tcb.json': signCollateral(
        'tcbInfo',
        testTcbInfo(platform, Array(16).fill(0)),
        pki.tcbSigning.privateKey,
      ),
      'qe.json': signCollateral('enclaveIdentity', testQeIdentity(), pki.tcbSigning.privateKey),
      'signer.pem': pki.tcbSigning.pem,
      'root.pem': pki.root.pem,
    };
    const t = io(files);
    const args = [
      '--tee',
      'tdx',
      '--evidence',
      'ev.json',
      '--tcb-info',
      'tcb.json',
      '--qe-identity',
      'qe.json',
    ];
    const full = [
      ...args,
      '--collateral-signer',
      'signer.pem',
      '--trusted-root',
      'root.pem',
      '--report-data',
      reportData.toString('hex'),
    ];
    expect(await main(full, t.cli)).toBe(0);
    const [result] = JSON.parse(t.out()) as { claims: Record<string, unknown> }[];
    expect(result!.claims.tcb_status).toBe('UpToDate');

    // A CRL revoking the PCK, given as PEM.
    const pckSerial = new X509Certificate(
      Buffer.from(qe.pckChainPem).toString('latin1').split('-----END CERTIFICATE-----')[0] +
        '-----END CERTIFICATE-----\n',
    ).serialNumber;
    const crl = signTestCrl(PCK_PLATFORM_CA_CN, pki.pckCa.privateKey, [pckSerial]);
    const r = io({
      ...files,
      'crl.pem': `-----BEGIN X509 CRL-----\n${crl.toString('base64')}\n-----END X509 CRL-----\n`,
    });
    expect(await main([...full, '--pck-crl', 'crl.pem'], r.cli)).toBe(1);
    expect(r.err()).toContain('CERT_REVOKED');

    const noRoot = io({
      'ev.json': JSON.stringify({ quote: quote.toString('base64') }),
      'tcb.json': 'x',
      'qe.json': 'y',
    });
    expect(
      await main(
        ['--tee', 'tdx', '--evidence', 'ev.json', '--tcb-info', 'tcb.json', '--qe-identity', 'qe.json'],
        noRoot.cli,
      ),
    ).toBe(1);
    expect(noRoot.err()).toContain('report data NOT checked');
    expect(noRoot.err()).toContain('CERT_CHAIN_INVALID');
  });

  it('explains what the fixture collateral cannot do for tdx_quote_4.dat', async () => {
    const t = io();
    const code = await main(
      [
        '--tee',
        'tdx',
        '--evidence',
        'q.json',
        '--tcb-info',
        `${DIR}/tcbInfo.json`,
        '--qe-identity',
        `${DIR}/enclaveIdentity.json`,
        '--time',
        '2025-11-01T00:00:00Z',
      ],
      {
        ...t.cli,
        readFile: (p) =>
          p === 'q.json'
            ? Buffer.from(
                JSON.stringify({ quote: readFileSync(`${DIR}/tdx_quote_4.dat`).toString('base64') }),
              )
            : readFileSync(p),
      },
    );
    expect(code).toBe(1);
    expect(t.err()).toContain('COLLATERAL_MISMATCH');
  });

  it('wants --tcb-info and --qe-identity together', async () => {
    const t = io({ 'q.json': '{}' });
    expect(
      await main(['--tee', 'tdx', '--evidence', 'q.json', '--tcb-info', `${DIR}/tcbInfo.json`], t.cli),
    ).toBe(2);
    expect(t.err()).toContain('go together');
  });

  it('reads the az-tdx-vtpm nonce when no report data is given', async () => {
    const t = io();
    const code = await main(
      [
        '--tee',
        'az-tdx-vtpm',
        '--evidence',
        vector('trustee/az-tdx-vtpm/evidence-v1.json'),
        '--time',
        '2025-11-01T00:00:00Z',
      ],
      t.cli,
    );
    expect(code).toBe(1);
    expect(t.err()).toContain('6368616c6c656e6765');
    expect(t.err()).toContain('COLLATERAL_UNAVAILABLE');
  });
});
