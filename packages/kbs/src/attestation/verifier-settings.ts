// The verifier settings of `[attestation_service.verifier_config]`, with every file they name read
// and parsed once at startup: a missing or broken root or collateral file stops the KBS with a message
// naming the key and the file, instead of failing each attestation later.
import { X509Certificate } from 'node:crypto';
import { open } from 'node:fs/promises';
import {
  type AmdRootSet,
  DEFAULT_OFFLINE_STORE_PATH,
  type ExpectedData,
  KDS_BASE_URL,
  MAX_COLLATERAL_BYTES,
  MAX_CRL_BYTES,
  parseAmdRootBundle,
  parseCrl,
  parseQeIdentity,
  parseTdxTcbInfo,
  type TdxCollateralConfig,
} from '@broker/verifier';
import { ConfigError } from '../config-reader.js';
import type { VerifierConfig } from './config.js';

/** A root bundle or certificate file larger than this is not a certificate file. */
export const MAX_TRUST_FILE_BYTES = 256 * 1024;

/** What every `Verifier.evaluate` call gets besides the per-request data. */
export type VerifierSettings = Pick<ExpectedData, 'trustedArks' | 'snp' | 'tdx'>;

const SNP = '[attestation_service.verifier_config.snp_verifier]';
const TDX = '[attestation_service.verifier_config.tdx_verifier]';

async function readBounded(where: string, file: string, limit: number): Promise<Buffer> {
  let fh: Awaited<ReturnType<typeof open>>;
  try {
    fh = await open(file, 'r');
  } catch (e) {
    throw new ConfigError(`${where}: cannot open ${file}: ${(e as NodeJS.ErrnoException).code ?? e}`);
  }
  try {
    const info = await fh.stat();
    if (!info.isFile()) throw new ConfigError(`${where}: ${file} is not a regular file`);
    if (info.size > limit) throw new ConfigError(`${where}: ${file} is larger than ${limit} bytes`);
    const buf = Buffer.alloc(info.size);
    const { bytesRead } = await fh.read(buf, 0, info.size, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

function checked<T>(where: string, file: string, f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw new ConfigError(`${where}: ${file}: ${(e as Error).message}`, { cause: e });
  }
}

/** A PEM file of one or more certificates, each of which must parse. */
function certificatesPem(where: string, file: string, bytes: Buffer): string {
  const text = bytes.toString('utf8');
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new ConfigError(`${where}: ${file} holds no PEM certificate`);
  for (const b of blocks) checked(where, file, () => new X509Certificate(b));
  return text;
}

/** DER or PEM, as the verifier's CRL parser reads them. */
function crlInput(bytes: Buffer): string | Buffer {
  const text = bytes.toString('latin1');
  return text.includes('-----BEGIN X509 CRL-----') ? text : bytes;
}

async function tdxCollateral(cfg: NonNullable<VerifierConfig['tdxVerifier']>): Promise<TdxCollateralConfig> {
  const read = (key: string, file: string, limit = MAX_COLLATERAL_BYTES) =>
    readBounded(`${TDX} ${key}`, file, limit);
  const tcbInfos: Buffer[] = [];
  for (const file of cfg.tcbInfoPaths) {
    const bytes = await read('tcb_info_paths', file);
    checked(`${TDX} tcb_info_paths`, file, () => parseTdxTcbInfo(bytes));
    tcbInfos.push(bytes);
  }
  const qeFile = cfg.qeIdentityPath!;
  const qeIdentity = await read('qe_identity_path', qeFile);
  checked(`${TDX} qe_identity_path`, qeFile, () => parseQeIdentity(qeIdentity));
  const signingCerts: string[] = [];
  for (const file of cfg.collateralSignerPaths) {
    const where = `${TDX} collateral_signer_paths`;
    signingCerts.push(certificatesPem(where, file, await read('collateral_signer_paths', file)));
  }
  const crl = async (key: string, file: string | undefined) => {
    if (file === undefined) return undefined;
    const input = crlInput(await read(key, file, MAX_CRL_BYTES));
    checked(`${TDX} ${key}`, file, () => parseCrl(input));
    return input;
  };
  const pckCrl = await crl('pck_crl_path', cfg.pckCrlPath);
  const rootCaCrl = await crl('root_ca_crl_path', cfg.rootCaCrlPath);
  return {
    tcbInfos,
    qeIdentity,
    ...(signingCerts.length > 0 ? { signingCerts } : {}),
    ...(pckCrl !== undefined ? { pckCrl } : {}),
    ...(rootCaCrl !== undefined ? { rootCaCrl } : {}),
  };
}

/**
 * Reads the files the verifier settings name. Without `snp_verifier` nothing is fetched from AMD's
 * KDS (trustee would default to it): `snp` evidence must then carry its certificate table, and KDS
 * is used only when `vcek_sources` lists it.
 */
export async function loadVerifierSettings(cfg: VerifierConfig | undefined): Promise<VerifierSettings> {
  const out: { -readonly [K in keyof VerifierSettings]: VerifierSettings[K] } = {};
  const snp = cfg?.snpVerifier;
  if (snp !== undefined) {
    const arks: AmdRootSet[] = [];
    for (const file of snp.trustedArkPaths ?? []) {
      const where = `${SNP} trusted_ark_paths`;
      const pem = (await readBounded(where, file, MAX_TRUST_FILE_BYTES)).toString('utf8');
      arks.push(checked(where, file, () => parseAmdRootBundle(pem)));
    }
    if (arks.length > 0) out.trustedArks = arks;
    if (snp.vcekSources !== undefined && snp.vcekSources.length > 0) {
      out.snp = { vcekSources: snp.vcekSources };
    }
  }
  const tdx = cfg?.tdxVerifier;
  if (tdx !== undefined) {
    const trustedSgxRoots: string[] = [];
    for (const file of tdx.trustedSgxRootPaths) {
      const where = `${TDX} trusted_sgx_root_paths`;
      trustedSgxRoots.push(
        certificatesPem(where, file, await readBounded(where, file, MAX_TRUST_FILE_BYTES)),
      );
    }
    const collateral = tdx.qeIdentityPath !== undefined ? await tdxCollateral(tdx) : undefined;
    if (collateral !== undefined || trustedSgxRoots.length > 0) {
      out.tdx = {
        ...(collateral !== undefined ? { collateral } : {}),
        ...(trustedSgxRoots.length > 0 ? { trustedSgxRoots } : {}),
      };
    }
  }
  return out;
}

/** For the startup log: which trust material and sources the verifiers got (no file contents). */
export function describeVerifierSettings(cfg: VerifierConfig | undefined): Record<string, unknown> {
  return {
    trustedArkPaths: cfg?.snpVerifier?.trustedArkPaths ?? [],
    vcekSources: (cfg?.snpVerifier?.vcekSources ?? []).map((s) =>
      s.type === 'KDS'
        ? `KDS ${s.baseUrl ?? KDS_BASE_URL}`
        : `OfflineStore ${s.path ?? DEFAULT_OFFLINE_STORE_PATH}`,
    ),
    tdxCollateral: cfg?.tdxVerifier?.qeIdentityPath !== undefined,
    trustedSgxRootPaths: cfg?.tdxVerifier?.trustedSgxRootPaths ?? [],
  };
}
