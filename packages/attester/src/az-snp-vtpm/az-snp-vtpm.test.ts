import { createHash, createPublicKey, type KeyObject, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import {
  attestationKeyTemplate,
  decodeCommand,
  extendPcr,
  parseAttest,
  pcrDigest,
  publicKeyFromTpmt,
  SwtpmSocketTransport,
  TPM_ALG,
  TPM_CC,
  TPM_RH,
  TPMA_NV,
  Tpm,
  verifySignature,
} from '@broker/tpm';
import { type SwtpmInstance, startSwtpm } from '@broker/tpm/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AttesterLogger } from '../attester.js';
import { EvidenceCollectionFailed } from '../attester.js';
import { platformContext } from '../platform.js';
import { explainTeeDetection, getAttester } from '../registry.js';
import { expectedUserData, HCL_VAR_DATA_OFFSET, hclUserData, readHclReport } from './hcl.js';
import { certificatePemToDer, fetchAmdCertificates } from './imds.js';
import {
  AZURE_AK_HANDLE,
  AzSnpVtpmAttester,
  type AzSnpVtpmEvidence,
  azSnpVtpmModule,
  HCL_REPORT_NV_INDEX,
  REPORT_DATA_NV_INDEX,
} from './index.js';

const FIXTURES = vector('trustee/az-snp-vtpm');
const fixtureEvidence = JSON.parse(readFileSync(join(FIXTURES, 'evidence-v2.json'), 'utf8')) as Record<
  string,
  unknown
> & { vcek: string; tpm_quote: object };
const vcekDer = new Uint8Array(Buffer.from(fixtureEvidence.vcek, 'base64url'));
const vcekPem = new X509Certificate(vcekDer).toString();
/** The SNP report inside the captured HCL report: real bytes, though its report_data won't match our claims. */
const snpReport = readFileSync(join(FIXTURES, 'hcl-report.bin')).subarray(32, 32 + 1184);

const sha256 = (b: Uint8Array | string) => new Uint8Array(createHash('sha256').update(b).digest());
const unhex = (s: string) => new Uint8Array(Buffer.from(s, 'hex'));

/**
 * An HCL report in Azure's layout wrapping `snpReport`, with runtime claims
 * holding the AK (kid HCLAkPub) and `user-data`. swtpm limits NV indices to
 * 2048 bytes, so the claims are kept short; Azure's report is 2600 bytes.
 */
function hclReport(ak: KeyObject, userData: Uint8Array, reportType = 2): Uint8Array {
  const jwk = ak.export({ format: 'jwk' });
  const claims = Buffer.from(
    JSON.stringify({
      keys: [{ kid: 'HCLAkPub', key_ops: ['sign'], kty: 'RSA', e: jwk.e, n: jwk.n }],
      'vm-configuration': { 'secure-boot': true, 'tpm-enabled': true },
      'user-data': expectedUserData(userData),
    }),
  );
  const out = Buffer.alloc(HCL_VAR_DATA_OFFSET + claims.length);
  out.write('HCLA', 0, 'latin1');
  out.writeUInt32LE(1, 4);
  out.writeUInt32LE(out.length, 8);
  out.writeUInt32LE(2, 12);
  snpReport.copy(out, 32);
  out.writeUInt32LE(20 + claims.length, 1216);
  out.writeUInt32LE(1, 1220);
  out.writeUInt32LE(reportType, 1224);
  out.writeUInt32LE(1, 1228);
  out.writeUInt32LE(claims.length, 1232);
  claims.copy(out, HCL_VAR_DATA_OFFSET);
  return new Uint8Array(out);
}

/**
 * A minimal paravisor stand-in: a TPM proxy in front of swtpm that, after a
 * successful NV_Write to the user-data index, writes a fresh HCL report for
 * that user data, as Azure's paravisor does (the mock-tee package does the
 * real emulation; this is just enough to see the attester pick it up).
 */
async function startParavisor(
  swtpm: SwtpmInstance,
  ak: KeyObject,
): Promise<{ address: string; close(): void }> {
  const server: Server = createServer((client: Socket) => {
    const upstream = new SwtpmSocketTransport({ host: swtpm.host, port: swtpm.port });
    const tpm = new Tpm(upstream);
    let pending = Buffer.alloc(0);
    let chain = Promise.resolve();
    const handle = async (cmd: Uint8Array) => {
      const response = await upstream.send(cmd);
      const d = decodeCommand(cmd);
      const rc = Buffer.from(response).readUInt32BE(6);
      if (d.code === TPM_CC.NV_Write && d.handles[1] === REPORT_DATA_NV_INDEX && rc === 0) {
        const userData = await tpm.nvReadAll(TPM_RH.OWNER, REPORT_DATA_NV_INDEX);
        await tpm.nvWriteAll(TPM_RH.OWNER, HCL_REPORT_NV_INDEX, hclReport(ak, userData));
      }
      client.write(response);
    };
    client.on('data', (chunk) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 10 && pending.length >= pending.readUInt32BE(2)) {
        const cmd = new Uint8Array(pending.subarray(0, pending.readUInt32BE(2)));
        pending = pending.subarray(cmd.length);
        chain = chain
          .then(() => handle(cmd))
          .catch(() => {
            client.destroy();
          });
      }
    });
    client.on('close', () => void chain.then(() => upstream.close()));
    client.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return { address: `swtpm:127.0.0.1:${port}`, close: () => server.close() };
}

/** IMDS stand-in: answers the THIM certification path when asked with `Metadata: true`. */
async function startImds(
  answer: (req: { url: string; metadata: string | undefined }) => { status: number; body: string },
): Promise<{ url: string; server: HttpServer }> {
  const server = createHttpServer((req, res) => {
    const a = answer({ url: req.url ?? '', metadata: req.headers.metadata as string | undefined });
    res.writeHead(a.status, { 'content-type': 'application/json' });
    res.end(a.body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server };
}

function logger(): AttesterLogger & { warnings: string[] } {
  const warnings: string[] = [];
  return { warnings, debug: () => undefined, info: () => undefined, warn: (m) => warnings.push(m) };
}

let swtpm: SwtpmInstance;
let ak: KeyObject;
let paravisor: { address: string; close(): void };
let imds: { url: string; server: HttpServer };
const imdsRequests: { url: string; metadata: string | undefined }[] = [];

beforeAll(async () => {
  swtpm = await startSwtpm();
  const tpm = Tpm.open(swtpm.address);
  try {
    // Provision what Azure's vTPM has: the AK at 0x81000003 and the HCL report index.
    const created = await tpm.createPrimary(TPM_RH.ENDORSEMENT, attestationKeyTemplate('rsa2048'));
    await tpm.evictControl(TPM_RH.OWNER, created.handle, AZURE_AK_HANDLE);
    await tpm.flushContext(created.handle);
    ak = publicKeyFromTpmt(created.public);
    const report = hclReport(ak, new Uint8Array(64));
    await tpm.nvDefineSpace(TPM_RH.OWNER, {
      nvIndex: HCL_REPORT_NV_INDEX,
      nameAlg: TPM_ALG.SHA256,
      attributes: TPMA_NV.OWNERWRITE | TPMA_NV.OWNERREAD | TPMA_NV.NO_DA,
      authPolicy: new Uint8Array(),
      dataSize: report.length,
    });
    await tpm.nvWriteAll(TPM_RH.OWNER, HCL_REPORT_NV_INDEX, report);
  } finally {
    await tpm.close();
  }
  paravisor = await startParavisor(swtpm, ak);
  imds = await startImds((req) => {
    imdsRequests.push(req);
    if (req.metadata !== 'true')
      return { status: 400, body: '{"error":"Required metadata header not specified"}' };
    if (req.url !== '/metadata/THIM/amd/certification') return { status: 404, body: '{}' };
    return {
      status: 200,
      body: JSON.stringify({ vcekCert: vcekPem, certificateChain: '-----BEGIN CERTIFICATE-----\n' }),
    };
  });
});

afterAll(async () => {
  paravisor?.close();
  imds?.server.close();
  await swtpm?.stop();
});

describe('az-snp-vtpm attester against swtpm', () => {
  const env = () => ({ BROKER_TPM: paravisor.address, BROKER_AZURE_IMDS_URL: imds.url });

  it('is detected from the HCL report index, before tpm, in upstream order', async () => {
    const d = await azSnpVtpmModule.detect(platformContext({ env: env() }));
    expect(d).toEqual({
      detected: true,
      reason: `${paravisor.address} holds an HCL report wrapping an SNP report`,
    });
    const why = await explainTeeDetection({ env: env() });
    expect(why.tee).toBe('az-snp-vtpm');
    expect(getAttester('az-snp-vtpm', { env: env() })).toBeInstanceOf(AzSnpVtpmAttester);
  });

  it('produces version-2 evidence with a fresh HCL report, a verifiable quote and the IMDS VCEK', async () => {
    imdsRequests.length = 0;
    const reportData = sha256('runtime data').slice();
    const full = new Uint8Array(48).map((_, i) => i);
    full.set(reportData.subarray(0, 16));
    const ev = (await getAttester('az-snp-vtpm', { env: env() }).getEvidence(full)) as AzSnpVtpmEvidence;

    // Shape and encodings of upstream (compare with the captured evidence).
    expect(Object.keys(ev)).toEqual(Object.keys(fixtureEvidence));
    expect(Object.keys(ev.tpm_quote)).toEqual(Object.keys(fixtureEvidence.tpm_quote));
    expect(ev.version).toBe(2);
    expect(ev.tpm_quote.signature).toMatch(/^[0-9a-f]{512}$/);
    expect(ev.tpm_quote.message).toMatch(/^[0-9a-f]+$/);
    expect(ev.tpm_quote.pcrs).toHaveLength(24);
    for (const s of [ev.hcl_report, ev.vcek]) {
      expect(s).toMatch(/^[A-Za-z0-9_-]+={0,2}$/);
      expect(s.length % 4).toBe(0);
    }
    expect(new Uint8Array(Buffer.from(ev.vcek, 'base64url'))).toEqual(vcekDer);
    expect(imdsRequests).toEqual([{ url: '/metadata/THIM/amd/certification', metadata: 'true' }]);

    // The HCL report is the one the paravisor made for this report data.
    const hcl = new Uint8Array(Buffer.from(ev.hcl_report, 'base64url'));
    expect(hclUserData(readHclReport(hcl))).toBe(expectedUserData(full));
    expect(hcl).toEqual(hclReport(ak, full));

    // The quote: the nonce is the report data as is (48 bytes), signed by the AK, PCRs as listed.
    const message = unhex(ev.tpm_quote.message);
    const attest = parseAttest(message);
    expect(attest.extraData).toEqual(full);
    const sig = { sigAlg: TPM_ALG.RSASSA, hash: TPM_ALG.SHA256, sig: unhex(ev.tpm_quote.signature) } as const;
    expect(verifySignature(ak, message, sig)).toBe(true);
    expect(pcrDigest(ev.tpm_quote.pcrs.map(unhex), attest.attested.pcrSelect, TPM_ALG.SHA256)).toEqual(
      attest.attested.pcrDigest,
    );
    // The AK in the runtime claims is the quoting key.
    const claims = JSON.parse(Buffer.from(readHclReport(hcl).varData).toString()) as {
      keys: { kid: string; n: string; e: string }[];
    };
    const jwk = claims.keys.find((k) => k.kid === 'HCLAkPub')!;
    expect(createPublicKey({ key: { kty: 'RSA', n: jwk.n, e: jwk.e }, format: 'jwk' }).equals(ak)).toBe(true);
  });

  it('redefines the user-data index when the report data changes size', async () => {
    const attester = new AzSnpVtpmAttester({ env: env() });
    for (const size of [64, 32, 32]) {
      const data = new Uint8Array(size).fill(size);
      const ev = await attester.getEvidence(data);
      expect(parseAttest(unhex(ev.tpm_quote.message)).extraData).toEqual(data);
      expect(hclUserData(readHclReport(new Uint8Array(Buffer.from(ev.hcl_report, 'base64url'))))).toBe(
        expectedUserData(data),
      );
    }
    const tpm = Tpm.open(swtpm.address);
    try {
      expect((await tpm.nvReadPublic(REPORT_DATA_NV_INDEX)).nvPublic.dataSize).toBe(32);
    } finally {
      await tpm.close();
    }
  });

  it('without a paravisor, waits the settle time and returns the stale report with a warning', async () => {
    const log = logger();
    const attester = new AzSnpVtpmAttester({
      tpm: { kind: 'swtpm', host: swtpm.host, port: swtpm.port },
      imdsUrl: imds.url,
      reportSettleMs: 0,
      logger: log,
    });
    const data = new Uint8Array(32).fill(0x5a);
    const ev = await attester.getEvidence(data);
    const hcl = readHclReport(new Uint8Array(Buffer.from(ev.hcl_report, 'base64url')));
    expect(hclUserData(hcl)).not.toBe(expectedUserData(data));
    expect(log.warnings).toHaveLength(1);
    expect(log.warnings[0]).toMatch(/still lacks the new user data after 0 ms/);
  });

  it('binds init-data into PCR8 and refuses non-SHA-256 digests', async () => {
    const attester = new AzSnpVtpmAttester({ env: env() });
    const before = await attester.getRuntimeMeasurement(8);
    const digest = sha256('initdata');
    await attester.bindInitData(digest);
    const ev = await attester.getEvidence(new Uint8Array(32));
    expect(ev.tpm_quote.pcrs[8]).toBe(Buffer.from(extendPcr(before, digest)).toString('hex'));
    await expect(attester.bindInitData(new Uint8Array(48))).rejects.toThrow(/expected sha256 digest/);
    await expect(attester.extendRuntimeMeasurement(digest, 24)).rejects.toThrow(/invalid PCR index/);
  });

  it('refuses report data longer than 64 bytes', async () => {
    const err = await new AzSnpVtpmAttester({ env: env() })
      .getEvidence(new Uint8Array(65))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EvidenceCollectionFailed);
    expect((err as Error).message).toMatch(/too large/);
  });

  it('is not detected on a TPM without the HCL report, nor on a dead address', async () => {
    const plain = await startSwtpm();
    try {
      const d = await azSnpVtpmModule.detect(platformContext({ env: { BROKER_TPM: plain.address } }));
      expect(d).toEqual({ detected: false, reason: `${plain.address} has no HCL report at NV 0x1400001` });
    } finally {
      await plain.stop();
    }
    const why = await explainTeeDetection({ env: { BROKER_TPM: 'swtpm:127.0.0.1:1' } });
    expect(why.probes.find((p) => p.tee === 'az-snp-vtpm')?.outcome).toBe('error');
    const none = await azSnpVtpmModule.detect(platformContext({ env: {}, root: '/nonexistent' }));
    expect(none).toEqual({ detected: false, reason: 'no /dev/tpmrm0 and BROKER_TPM is not set' });
  });
});

describe('IMDS client', () => {
  it('fails on HTTP errors, non-JSON, missing fields, oversize answers and unreachable hosts', async () => {
    const cases: [number, string, RegExp][] = [
      [500, '{}', /HTTP 500/],
      [200, 'not json', /not JSON/],
      [200, '{"vcekCert":1,"certificateChain":""}', /lacks vcekCert/],
      [200, 'x'.repeat(300 * 1024), /exceeds 262144/],
    ];
    for (const [status, body, msg] of cases) {
      const s = await startImds(() => ({ status, body }));
      try {
        await expect(fetchAmdCertificates(s.url)).rejects.toThrow(msg);
      } finally {
        s.server.close();
      }
    }
    await expect(fetchAmdCertificates('http://127.0.0.1:1')).rejects.toThrow(EvidenceCollectionFailed);
  });

  it('converts the first PEM certificate to DER and refuses other labels or bad base64', () => {
    expect(
      certificatePemToDer(`${vcekPem}\n-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n`),
    ).toEqual(vcekDer);
    expect(() => certificatePemToDer('-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----')).toThrow(
      /Expected CERTIFICATE label/,
    );
    expect(() => certificatePemToDer('-----BEGIN CERTIFICATE-----\nA*AA\n-----END CERTIFICATE-----')).toThrow(
      /invalid base64/,
    );
    expect(() => certificatePemToDer('nothing')).toThrow(/no PEM block/);
  });
});

describe('HCL report reader', () => {
  it('reads the captured report and refuses truncated or inconsistent ones', () => {
    const real = new Uint8Array(readFileSync(join(FIXTURES, 'hcl-report.bin')));
    const view = readHclReport(real);
    expect(view.reportType).toBe(2);
    expect(hclUserData(view)).toBe('0'.repeat(128));
    expect(() => readHclReport(real.subarray(0, 1235))).toThrow(/shorter than its 1236-byte header/);
    expect(() => readHclReport(real.subarray(0, 2000))).toThrow(/does not fit/);
    const tdx = hclReport(ak, new Uint8Array(1), 4);
    expect(readHclReport(tdx).reportType).toBe(4);
    expect(() => readHclReport(hclReport(ak, new Uint8Array(1), 3))).toThrow(/neither SNP/);
    const badJson = real.slice();
    badJson[HCL_VAR_DATA_OFFSET] = 0xff;
    expect(hclUserData(readHclReport(badJson))).toBeUndefined();
  });
});
