// Test-only: az-snp-vtpm evidence (v2 shape) made end to end with a test AMD root, the way the
// mock TEE's paravisor makes it, so that every check can be driven to pass or fail on purpose.
import { createHash, generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { marshalAttest, pcrDigest, pcrSelection, TPM_ALG, TPM_GENERATED_VALUE, TPM_ST } from '@broker/tpm';
import { SNP_REPORT_SIZE, type TcbVersion } from '../snp/report.js';
import { createTestAmdRoots, issueTestVek, signSnpReport, type TestAmdRoots } from '../snp/test-roots.js';
import { HCL_REQUEST_DATA_OFFSET, HCL_VAR_DATA_OFFSET } from './hcl.js';

export const TEST_TCB: TcbVersion = { bootloader: 4, tee: 0, snp: 24, microcode: 219 };
export const TEST_CHIP_ID = createHash('sha512').update('test chip').digest();

let roots: TestAmdRoots | undefined;
/** One test root per run: RSA key generation is the slow part. */
export function testRoots(): TestAmdRoots {
  roots ??= createTestAmdRoots();
  return roots;
}

export interface TestEvidenceOptions {
  readonly nonce: Uint8Array;
  /** What the HCL writes as user-data; the nonce zero-padded to 64 bytes by default. */
  readonly userData?: Uint8Array;
  /** PCR index → value (SHA-256 bank); all 24 PCRs zero by default. */
  readonly pcrs?: ReadonlyMap<number, Uint8Array>;
  readonly vmpl?: number;
  /** Overrides report_data[0..32] (normally SHA-256 of the runtime claims). */
  readonly snpReportData?: Uint8Array;
  readonly version?: 1 | 2;
  /** Signs the quote with this key instead of the HCLAkPub one. */
  readonly quoteKey?: KeyObject;
}

export interface TestEvidence {
  readonly evidence: Record<string, unknown>;
  readonly hclReport: Buffer;
  readonly vcekDer: Buffer;
  readonly quote: { readonly message: Buffer; readonly signature: Buffer; readonly pcrs: Buffer[] };
}

const vcekCache = new Map<string, { der: Buffer; privateKey: KeyObject }>();

export function makeTestEvidence(o: TestEvidenceOptions): TestEvidence {
  const r = testRoots();
  let vcek = vcekCache.get('default');
  if (vcek === undefined) {
    vcek = issueTestVek(r, { tcb: TEST_TCB, hwid: TEST_CHIP_ID });
    vcekCache.set('default', vcek);
  }
  const ak = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = ak.publicKey.export({ format: 'jwk' });
  const userData = Buffer.alloc(64);
  userData.set(o.userData ?? o.nonce.subarray(0, 64));
  const varData = Buffer.from(
    JSON.stringify({
      keys: [{ kid: 'HCLAkPub', key_ops: ['sign'], kty: 'RSA', e: jwk.e, n: jwk.n }],
      'vm-configuration': { 'console-enabled': true, 'secure-boot': true, 'tpm-enabled': true },
      'user-data': userData.toString('hex').toUpperCase(),
    }),
  );

  const snp = Buffer.alloc(SNP_REPORT_SIZE);
  snp.writeUInt32LE(3, 0x00); // version
  snp.writeBigUInt64LE(0x3001fn, 0x08); // policy: ABI 0.31, SMT allowed
  snp.writeUInt32LE(o.vmpl ?? 0, 0x30);
  snp.writeUInt32LE(1, 0x34); // ECDSA P-384 SHA-384
  Buffer.from(o.snpReportData ?? createHash('sha256').update(varData).digest()).copy(snp, 0x50);
  Buffer.from([TEST_TCB.bootloader, TEST_TCB.tee, 0, 0, 0, 0, TEST_TCB.snp, TEST_TCB.microcode]).copy(
    snp,
    0x180,
  );
  snp[0x188] = 0x19; // Milan
  snp[0x189] = 0x01;
  TEST_CHIP_ID.copy(snp, 0x1a0);
  const signedSnp = signSnpReport(snp, vcek.privateKey);

  const hcl = Buffer.alloc(2600);
  hcl.writeUInt32LE(0x414c4348, 0); // "HCLA"
  hcl.writeUInt32LE(1, 4);
  hcl.writeUInt32LE(HCL_VAR_DATA_OFFSET + varData.length, 8);
  hcl.writeUInt32LE(2, 12);
  signedSnp.copy(hcl, 32);
  hcl.writeUInt32LE(20 + varData.length, HCL_REQUEST_DATA_OFFSET);
  hcl.writeUInt32LE(1, HCL_REQUEST_DATA_OFFSET + 4);
  hcl.writeUInt32LE(2, HCL_REQUEST_DATA_OFFSET + 8); // SNP
  hcl.writeUInt32LE(1, HCL_REQUEST_DATA_OFFSET + 12); // SHA-256
  hcl.writeUInt32LE(varData.length, HCL_REQUEST_DATA_OFFSET + 16);
  varData.copy(hcl, HCL_VAR_DATA_OFFSET);

  const { message, signature, pcrMap, indices } = signTestTpmQuote(o.nonce, ak.privateKey, o);
  const pcrs = indices.map((i) => Buffer.from(pcrMap.get(i)!));
  return {
    evidence: {
      version: o.version ?? 2,
      tpm_quote: {
        signature: signature.toString('hex'),
        message: message.toString('hex'),
        pcrs: pcrs.map((p) => p.toString('hex')),
      },
      hcl_report: hcl.toString('base64url'),
      vcek: vcek.der.toString('base64url'),
    },
    hclReport: hcl,
    vcekDer: vcek.der,
    quote: { message, signature, pcrs },
  };
}

/** A TPM quote over the given PCRs (all 24 zero by default), signed the way a vTPM's AK signs. */
export function signTestTpmQuote(
  nonce: Uint8Array,
  akPrivateKey: KeyObject,
  o: { pcrs?: ReadonlyMap<number, Uint8Array> | undefined; quoteKey?: KeyObject | undefined },
): { message: Buffer; signature: Buffer; pcrMap: ReadonlyMap<number, Uint8Array>; indices: number[] } {
  const pcrMap = o.pcrs ?? new Map(Array.from({ length: 24 }, (_, i) => [i, Buffer.alloc(32)] as const));
  const indices = [...pcrMap.keys()].sort((a, b) => a - b);
  const values: Uint8Array[] = [];
  for (const i of indices) values[i] = pcrMap.get(i)!;
  const selection = [pcrSelection(TPM_ALG.SHA256, indices)];
  const message = Buffer.from(
    marshalAttest({
      magic: TPM_GENERATED_VALUE,
      type: TPM_ST.ATTEST_QUOTE,
      qualifiedSigner: Buffer.concat([Buffer.from([0, 0x0b]), Buffer.alloc(32, 7)]),
      extraData: nonce,
      clockInfo: { clock: 1234n, resetCount: 2, restartCount: 0, safe: true },
      firmwareVersion: 0x2020031200120003n,
      attested: { pcrSelect: selection, pcrDigest: pcrDigest(values, selection, TPM_ALG.SHA256) },
    }),
  );
  return { message, signature: sign('sha256', message, o.quoteKey ?? akPrivateKey), pcrMap, indices };
}
