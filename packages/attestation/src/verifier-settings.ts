// The verifier settings of `[attestation_service.verifier_config]`, with every file they name read
// and parsed once at startup: a missing or broken root or collateral file stops the KBS with a message
// naming the key and the file, instead of failing each attestation later.
import { X509Certificate } from 'node:crypto';
import { open } from 'node:fs/promises';
import { ConfigError } from '@broker/cli';
import {
  type AmdRootSet,
  DEFAULT_OFFLINE_STORE_PATH,
  DEFAULT_TCB_UPDATE_TYPE,
  type ExpectedData,
  type HttpGet,
  INTEL_PCS_URL,
  type IntelCollateralSource,
  intelCollateralSource,
  KDS_BASE_URL,
  MAX_COLLATERAL_BYTES,
  MAX_CRL_BYTES,
  parseAmdRootBundle,
  parseCrl,
  parseQeIdentity,
  parseTdxTcbInfo,
  type TdxCollateralConfig,
  TRUSTEE_DEFAULT_VCEK_SOURCES,
} from '@broker/verifier';
import type { VerifierConfig } from './config.js';

/** A root bundle or certificate file larger than this is not a certificate file. */
export const MAX_TRUST_FILE_BYTES = 256 * 1024;

/** What every `Verifier.evaluate` call gets besides the per-request data. */
export type VerifierSettings = Pick<ExpectedData, 'trustedArks' | 'snp' | 'tdx' | 'nvidia'>;

const SNP = '[attestation_service.verifier_config.snp_verifier]';
const TDX = '[attestation_service.verifier_config.tdx_verifier]';
const DCAP = '[attestation_service.verifier_config.dcap_verifier]';
const NVIDIA = '[attestation_service.verifier_config.nvidia_verifier]';

/** What a caller (not the configuration file) may add: the HTTP client, a log of background failures. */
export interface VerifierSettingsOptions {
  /** HTTP client of the collateral services (PCS/PCCS, KDS); Node's by default. Tests pass one for a mock. */
  readonly httpGet?: HttpGet;
  /** A background refresh of cached collateral failed (the cached collateral stays in use). */
  readonly onRefreshError?: (key: string, error: unknown) => void;
}

/**
 * trustee's `dcap_verifier`: `collateral_service` (default Intel's PCS when the table is absent) and
 * `tcb_update_type`. One source per KBS, so its cache is shared by every attestation.
 */
function collateralService(
  cfg: VerifierConfig | undefined,
  options: VerifierSettingsOptions,
): IntelCollateralSource {
  const dcap = cfg?.dcapVerifier;
  try {
    return intelCollateralSource({
      url: dcap?.collateralService ?? INTEL_PCS_URL,
      tcbUpdateType: dcap?.tcbUpdateType ?? DEFAULT_TCB_UPDATE_TYPE,
      ...(options.httpGet !== undefined ? { httpGet: options.httpGet } : {}),
      ...(options.onRefreshError !== undefined ? { cache: { onRefreshError: options.onRefreshError } } : {}),
    });
  } catch (e) {
    throw new ConfigError(`${DCAP} collateral_service: ${(e as Error).message}`, { cause: e });
  }
}

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
 * Reads the files the verifier settings name, and sets up the collateral services with trustee's
 * defaults: `snp` evidence without a certificate table gets its VCEK from AMD's KDS unless
 * `vcek_sources` says otherwise (`[]`: from nowhere), and TDX quotes get their collateral from
 * Intel's PCS unless `dcap_verifier` names another service or `tdx_verifier` configures it offline.
 */
export async function loadVerifierSettings(
  cfg: VerifierConfig | undefined,
  options: VerifierSettingsOptions = {},
): Promise<VerifierSettings> {
  const out: { -readonly [K in keyof VerifierSettings]: VerifierSettings[K] } = {};
  const snp = cfg?.snpVerifier;
  const vcekSources = snp?.vcekSources ?? TRUSTEE_DEFAULT_VCEK_SOURCES;
  if (vcekSources.length > 0) {
    out.snp = { vcekSources, ...(options.httpGet !== undefined ? { httpGet: options.httpGet } : {}) };
  }
  if (snp !== undefined) {
    const arks: AmdRootSet[] = [];
    for (const file of snp.trustedArkPaths ?? []) {
      const where = `${SNP} trusted_ark_paths`;
      const pem = (await readBounded(where, file, MAX_TRUST_FILE_BYTES)).toString('utf8');
      arks.push(checked(where, file, () => parseAmdRootBundle(pem)));
    }
    if (arks.length > 0) out.trustedArks = arks;
  }
  const tdx = cfg?.tdxVerifier;
  let collateral: TdxCollateralConfig | undefined;
  const trustedSgxRoots: string[] = [];
  if (tdx !== undefined) {
    for (const file of tdx.trustedSgxRootPaths) {
      const where = `${TDX} trusted_sgx_root_paths`;
      trustedSgxRoots.push(
        certificatesPem(where, file, await readBounded(where, file, MAX_TRUST_FILE_BYTES)),
      );
    }
    if (tdx.qeIdentityPath !== undefined) collateral = await tdxCollateral(tdx);
  }
  // Offline collateral wins; only without it is a service asked.
  out.tdx = {
    ...(collateral !== undefined ? { collateral } : { collateralService: collateralService(cfg, options) }),
    ...(trustedSgxRoots.length > 0 ? { trustedSgxRoots } : {}),
  };
  const nv = cfg?.nvidiaVerifier;
  if (nv !== undefined) {
    const trustedRoots: string[] = [];
    for (const file of nv.trustedRootPaths ?? []) {
      const where = `${NVIDIA} trusted_root_paths`;
      trustedRoots.push(certificatesPem(where, file, await readBounded(where, file, MAX_TRUST_FILE_BYTES)));
    }
    out.nvidia = {
      ...(trustedRoots.length > 0 ? { trustedRoots } : {}),
      ...(nv.type === 'Remote'
        ? {
            remote: {
              ...(nv.verifierUrl !== undefined ? { verifierUrl: nv.verifierUrl } : {}),
              ...(nv.jwksUrl !== undefined ? { jwksUrl: nv.jwksUrl } : {}),
            },
          }
        : {}),
    };
  }
  return out;
}

/** For the startup log: which trust material and sources the verifiers got (no file contents). */
export function describeVerifierSettings(cfg: VerifierConfig | undefined): Record<string, unknown> {
  return {
    trustedArkPaths: cfg?.snpVerifier?.trustedArkPaths ?? [],
    vcekSources: (cfg?.snpVerifier?.vcekSources ?? TRUSTEE_DEFAULT_VCEK_SOURCES).map((s) =>
      s.type === 'KDS'
        ? `KDS ${s.baseUrl ?? KDS_BASE_URL}`
        : `OfflineStore ${s.path ?? DEFAULT_OFFLINE_STORE_PATH}`,
    ),
    tdxCollateral: cfg?.tdxVerifier?.qeIdentityPath !== undefined,
    ...(cfg?.tdxVerifier?.qeIdentityPath === undefined
      ? {
          collateralService: cfg?.dcapVerifier?.collateralService ?? INTEL_PCS_URL,
          tcbUpdateType: cfg?.dcapVerifier?.tcbUpdateType ?? DEFAULT_TCB_UPDATE_TYPE,
        }
      : {}),
    trustedSgxRootPaths: cfg?.tdxVerifier?.trustedSgxRootPaths ?? [],
    ...(cfg?.nvidiaVerifier !== undefined
      ? {
          nvidiaVerifier: cfg.nvidiaVerifier.type,
          nvidiaTrustedRootPaths: cfg.nvidiaVerifier.trustedRootPaths ?? [],
        }
      : {}),
  };
}
