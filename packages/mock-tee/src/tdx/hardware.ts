// The mock TDX platform's hardware root, in Intel's DCAP shape: a test SGX root CA, a PCK Platform
// CA, a PCK certificate for the platform (FMSPC, SGX TCB components, PCESVN), a TCB signing
// certificate, and the quoting enclave's attestation key, which the PCK vouches for. Everything is
// generated once and kept in a folder; the collateral (TCB info, QE identity) is signed afresh at
// each start so that its validity window holds the current time.
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { chmod, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { makeDirectory } from '@broker/cli';
import {
  createTestQuotingEnclave,
  createTestSgxPki,
  issueTestPck,
  signCollateral,
  signTestCrl,
  TEST_QE,
  type TestPlatform,
  type TestQuotingEnclave,
  type TestSgxPki,
  testQeIdentity,
  testTcbInfo,
} from '@broker/verifier/testing';
import { MockTeeError } from '../errors.js';

/** The platform the mock's PCK certifies: an FMSPC of its own and a plausible TCB. */
export const MOCK_TDX_PLATFORM: TestPlatform = Object.freeze({
  fmspc: Buffer.from('00a06f000000', 'hex'),
  tcbComponents: Object.freeze([5, 5, 13, 2, 3, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0]),
  pceSvn: 13,
});
/** TEE_TCB_SVN of the mock's TDX module: SVN 4, major version 1, late microcode 2. */
export const MOCK_TEE_TCB_SVN: readonly number[] = Object.freeze([
  4, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
]);

export const TDX_HARDWARE_FILES = Object.freeze({
  rootCert: 'sgx-root.pem',
  rootKey: 'sgx-root.key',
  pckCaCert: 'pck-ca.pem',
  pckCaKey: 'pck-ca.key',
  pckCert: 'pck.pem',
  pckKey: 'pck.key',
  tcbSigningCert: 'tcb-signing.pem',
  tcbSigningKey: 'tcb-signing.key',
  attestationKey: 'attestation-key.pem',
} as const);

export interface TdxCollateralFiles {
  /** `{"tcbInfo":…,"signature":…}` for the mock's FMSPC. */
  readonly tcbInfo: string;
  /** `{"enclaveIdentity":…,"signature":…}` for the mock's QE. */
  readonly qeIdentity: string;
  /** The PCK CA's CRL (DER), revoking nothing. */
  readonly pckCrl: Buffer;
  /** The root CA's CRL (DER), revoking nothing. */
  readonly rootCaCrl: Buffer;
}

export interface TdxHardware {
  readonly pki: TestSgxPki;
  readonly qe: TestQuotingEnclave;
  /** The test root: what a verifier must be configured to trust (`trustedSgxRoots`). */
  readonly rootPem: string;
  /** The collateral signer (`signingCerts`). */
  readonly tcbSigningPem: string;
}

const keyPem = (k: KeyObject) => k.export({ type: 'pkcs8', format: 'pem' }) as string;

async function writeAtomic(path: string, data: string, mode: number): Promise<void> {
  const tmp = `${path}.tmp`;
  await writeFile(tmp, data, { mode });
  await chmod(tmp, mode);
  await rename(tmp, path);
}

function fromFiles(files: Record<keyof typeof TDX_HARDWARE_FILES, string>): TdxHardware {
  const cert = (pem: string, key: string) => ({
    pem,
    der: Buffer.from(pem.replace(/-----[A-Z ]+-----|\s+/g, ''), 'base64'),
    privateKey: createPrivateKey(key),
  });
  const pki: TestSgxPki = {
    root: cert(files.rootCert, files.rootKey),
    pckCa: cert(files.pckCaCert, files.pckCaKey),
    tcbSigning: cert(files.tcbSigningCert, files.tcbSigningKey),
  };
  const pck = cert(files.pckCert, files.pckKey);
  const qe = createTestQuotingEnclave(pki, pck, TEST_QE, {
    attestationKey: createPrivateKey(files.attestationKey),
  });
  return { pki, qe, rootPem: pki.root.pem, tcbSigningPem: pki.tcbSigning.pem };
}

/** Makes a new hardware root and stores it under `dir`. */
export async function createTdxHardware(dir: string): Promise<TdxHardware> {
  const pki = createTestSgxPki();
  const pck = issueTestPck(pki, MOCK_TDX_PLATFORM);
  const qe = createTestQuotingEnclave(pki, pck);
  const files: Record<keyof typeof TDX_HARDWARE_FILES, string> = {
    rootCert: pki.root.pem,
    rootKey: keyPem(pki.root.privateKey),
    pckCaCert: pki.pckCa.pem,
    pckCaKey: keyPem(pki.pckCa.privateKey),
    pckCert: pck.pem,
    pckKey: keyPem(pck.privateKey),
    tcbSigningCert: pki.tcbSigning.pem,
    tcbSigningKey: keyPem(pki.tcbSigning.privateKey),
    attestationKey: keyPem(qe.attestationKey),
  };
  await makeDirectory(dir, 0o700);
  for (const [k, name] of Object.entries(TDX_HARDWARE_FILES)) {
    const secret = name.endsWith('.key') || k === 'attestationKey';
    await writeAtomic(join(dir, name), files[k as keyof typeof TDX_HARDWARE_FILES], secret ? 0o600 : 0o644);
  }
  return fromFiles(files);
}

/** Loads the hardware root under `dir`, or makes one when the folder has none. */
export async function loadOrCreateTdxHardware(dir: string): Promise<TdxHardware> {
  const files = {} as Record<keyof typeof TDX_HARDWARE_FILES, string>;
  try {
    for (const [k, name] of Object.entries(TDX_HARDWARE_FILES)) {
      files[k as keyof typeof TDX_HARDWARE_FILES] = await readFile(join(dir, name), 'utf8');
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return createTdxHardware(dir);
    throw err;
  }
  try {
    return fromFiles(files);
  } catch (err) {
    throw new MockTeeError(
      'STATE_INVALID',
      `TDX hardware root in ${dir} is unreadable: ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  }
}

/** Subject CNs of the test PKI's CAs (createTestSgxPki). */
const PCK_CA_CN = 'Intel SGX PCK Platform CA';
const ROOT_CN = 'Broker Test SGX Root CA';

/** TCB info and QE identity rating the mock platform UpToDate, and empty CRLs; valid from a day ago for 30 days. */
export function signMockCollateral(hw: TdxHardware, now = new Date()): TdxCollateralFiles {
  const issueDate = new Date(now.getTime() - 86_400_000);
  const key = hw.pki.tcbSigning.privateKey;
  return {
    tcbInfo: signCollateral('tcbInfo', testTcbInfo(MOCK_TDX_PLATFORM, MOCK_TEE_TCB_SVN, { issueDate }), key),
    qeIdentity: signCollateral('enclaveIdentity', testQeIdentity(TEST_QE, { issueDate }), key),
    pckCrl: signTestCrl(PCK_CA_CN, hw.pki.pckCa.privateKey, [], { thisUpdate: issueDate }),
    rootCaCrl: signTestCrl(ROOT_CN, hw.pki.root.privateKey, [], { thisUpdate: issueDate }),
  };
}
