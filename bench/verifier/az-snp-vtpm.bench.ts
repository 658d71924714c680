// az-snp-vtpm verification throughput on the real Azure v2 evidence (AMD's Milan roots), against the
// cost of its signature checks alone, measured in the same run on one thread:
//  - verify: AzSnpVtpmVerifier.evaluate on the evidence JSON, as the KBS calls it per attestation
//    (parsing, HCL report, AK from JWK, quote, PCR digest, VCEK chain, report signature, TCB, claims);
//  - floor: the three signature verifications no verifier can skip: RSASSA-PKCS1-v1_5/SHA-256 of the
//    quote by the AK (2048), ECDSA P-384/SHA-384 of the SNP report by the VCEK, and RSASSA-PSS/SHA-384
//    of the VCEK by AMD's ASK (4096), with keys and certificates already parsed;
//  - full_chain_floor: the floor plus the ASK-by-ARK and ARK self-signature checks, which the verifier
//    does once at start-up rather than per request.
import { constants, createPublicKey, verify, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { vector } from '@broker/cli/testing';
import { parseHclReport } from '../../packages/verifier/src/az-snp-vtpm/hcl.js';
import { AzSnpVtpmVerifier } from '../../packages/verifier/src/az-snp-vtpm/index.js';
import { builtinAmdRoots } from '../../packages/verifier/src/snp/certs.js';
import { parseSnpReport, SNP_SIGNED_LENGTH } from '../../packages/verifier/src/snp/report.js';
import { signatureToP1363 } from '../../packages/verifier/src/snp/signature.js';

const FIXTURES = vector('');
const REPORT_DATA = Buffer.from(
  '982f5c6e45df0ed3f10b6f60b02f0c8390e281300f3805e2279c16168cd6ae9aa398f647caa2338748cd0fd9f5f819ef',
  'hex',
);
const AT = new Date('2025-06-01T00:00:00Z');
const WARMUP_MS = 500;
/** Rounds alternate between the measured operations so that load from elsewhere hits them alike. */
const ROUNDS = 15;
const ROUND_MS = 200;

type Op = () => unknown | Promise<unknown>;

/** CPU time (user + system) per operation over one round, in microseconds, and operations done. */
async function round(fn: Op, ms: number): Promise<{ cpuUs: number; wallUs: number }> {
  let n = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const end = t0 + ms;
  while (performance.now() < end) {
    for (let i = 0; i < 5; i++) await fn();
    n += 5;
  }
  const wall = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { cpuUs: (c.user + c.system) / n, wallUs: (wall * 1000) / n };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Median CPU and wall time per operation for each op, measured in interleaved rounds. */
async function measure(ops: Record<string, Op>): Promise<Record<string, { cpuUs: number; wallUs: number }>> {
  for (const fn of Object.values(ops)) await round(fn, WARMUP_MS);
  const samples: Record<string, { cpu: number[]; wall: number[] }> = {};
  for (const k of Object.keys(ops)) samples[k] = { cpu: [], wall: [] };
  for (let r = 0; r < ROUNDS; r++) {
    for (const [k, fn] of Object.entries(ops)) {
      const s = await round(fn, ROUND_MS);
      samples[k]!.cpu.push(s.cpuUs);
      samples[k]!.wall.push(s.wallUs);
    }
  }
  return Object.fromEntries(
    Object.entries(samples).map(([k, s]) => [k, { cpuUs: median(s.cpu), wallUs: median(s.wall) }]),
  );
}

export async function run(): Promise<Record<string, number>> {
  const text = readFileSync(`${FIXTURES}/trustee/az-snp-vtpm/evidence-v2.json`, 'utf8');
  const evidence = JSON.parse(text) as {
    tpm_quote: { signature: string; message: string };
    hcl_report: string;
    vcek: string;
  };
  const verifier = new AzSnpVtpmVerifier();
  // Fails loudly if the fixture stopped verifying: a benchmark of failures would mean nothing.
  await verifier.evaluate(evidence, { reportData: REPORT_DATA, now: AT });

  const message = Buffer.from(evidence.tpm_quote.message, 'hex');
  const quoteSig = Buffer.from(evidence.tpm_quote.signature, 'hex');
  const hcl = parseHclReport(Buffer.from(evidence.hcl_report, 'base64url'));
  const keys = (JSON.parse(hcl.varData.toString('utf8')) as { keys: { kid: string; n: string; e: string }[] })
    .keys;
  const akJwk = keys.find((k) => k.kid === 'HCLAkPub')!;
  const ak = createPublicKey({ key: { kty: 'RSA', n: akJwk.n, e: akJwk.e }, format: 'jwk' });
  const report = parseSnpReport(hcl.hwReport);
  const reportSig = signatureToP1363(report.signature)!;
  const signed = report.bytes.subarray(0, SNP_SIGNED_LENGTH);
  const vcek = new X509Certificate(Buffer.from(evidence.vcek, 'base64url'));
  const vcekKey = vcek.publicKey;
  const milan = builtinAmdRoots().find((r) => r.name === 'Milan')!;
  const askKey = milan.ask!.publicKey;
  const arkKey = milan.ark.publicKey;

  const floorOnce = (): void => {
    const ok =
      verify('sha256', message, { key: ak, padding: constants.RSA_PKCS1_PADDING }, quoteSig) &&
      verify('sha384', signed, { key: vcekKey, dsaEncoding: 'ieee-p1363' }, reportSig) &&
      vcek.verify(askKey);
    if (!ok) throw new Error('floor signature check failed');
  };
  const fullChainOnce = (): void => {
    floorOnce();
    if (!milan.ask!.verify(arkKey) || !milan.ark.verify(arkKey)) throw new Error('AMD chain check failed');
  };

  const m = await measure({
    verify: () => verifier.evaluate(evidence, { reportData: REPORT_DATA, now: AT }),
    // The KBS hands over evidence it parsed from the request body: with that JSON.parse too.
    verifyWithParse: () => verifier.evaluate(JSON.parse(text), { reportData: REPORT_DATA, now: AT }),
    floor: floorOnce,
    fullChain: fullChainOnce,
  });
  const verification = m.verify!;
  const floor = m.floor!;
  return {
    // Per operation on one core, from CPU time: robust against other load on the machine.
    verifications_per_core_s: 1e6 / verification.cpuUs,
    verification_cpu_us: verification.cpuUs,
    verification_with_json_parse_cpu_us: m.verifyWithParse!.cpuUs,
    signature_floor_per_core_s: 1e6 / floor.cpuUs,
    signature_floor_cpu_us: floor.cpuUs,
    full_chain_floor_cpu_us: m.fullChain!.cpuUs,
    /** Share of a verification spent in the unavoidable signature checks (1 = nothing else). */
    floor_over_verification: floor.cpuUs / verification.cpuUs,
    /** How many times the signature floor one verification costs. */
    verification_over_floor: verification.cpuUs / floor.cpuUs,
    overhead_cpu_us: verification.cpuUs - floor.cpuUs,
    // Wall clock, as observed (affected by whatever else runs).
    verifications_per_s_wall: 1e6 / verification.wallUs,
    signature_floor_per_s_wall: 1e6 / floor.wallUs,
  };
}
