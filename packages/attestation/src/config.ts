// `[attestation_service]` of kbs-config.toml, with trustee's key names
// (kbs/src/attestation/config.rs, coco/builtin.rs, attestation-service ear_token
// and rvps config). Unknown keys go to the caller's warnings list (refused when it
// gives none); keys that old trustee releases wrote and today's ignores are accepted
// and reported in `ignoredKeys`.
import { isAbsolute } from 'node:path';
import { ConfigError, Section } from '@broker/cli';

export const DEFAULT_SESSION_TIMEOUT_MIN = 5;
export const DEFAULT_TOKEN_DURATION_MIN = 5;
export const DEFAULT_ISSUER_NAME = 'CoCo-Attestation-Service';
export const DEFAULT_DEVELOPER_NAME = 'https://confidentialcontainers.org';
export const DEFAULT_BUILD_NAME = 'broker-attestation-service 0.1.0';
export const DEFAULT_PROFILE_NAME = 'tag:github.com,2024:confidential-containers/Trustee';

/** A week, in minutes: longer sessions or tokens are a configuration mistake, not a need. */
const MAX_MINUTES = 7 * 24 * 60;

export type StorageType = 'Memory' | 'LocalJson' | 'LocalFs' | 'Postgres' | 'Redis';

export interface TokenSignerConfig {
  /** PEM file of a P-256 private key (SEC1 or PKCS#8). */
  readonly keyPath: string;
  /** PEM certificate chain, leaf first; its DER forms become the header `x5c`. */
  readonly certPath?: string;
  /** Published in the header jwk as `x5u`. */
  readonly certUrl?: string;
}

export interface TokenBrokerConfig {
  readonly durationMin: number;
  readonly issuerName: string;
  readonly developerName: string;
  readonly buildName: string;
  readonly profileName: string;
  /** When false, `additional-evidence` is left out of the runtime-data claims. */
  readonly verboseToken: boolean;
  /** Absent: an ephemeral key is generated at start, and tokens carry no x5c. */
  readonly signer?: TokenSignerConfig;
}

export type VcekSource =
  | { readonly type: 'KDS'; readonly baseUrl?: string }
  | { readonly type: 'OfflineStore'; readonly path?: string };

/**
 * `[attestation_service.verifier_config.snp_verifier]`: used by the `snp` and `az-snp-vtpm` verifiers.
 * `vcek_sources` is trustee's; `trusted_ark_paths` is this project's addition.
 */
export interface SnpVerifierConfig {
  /** Where `snp` evidence without `cert_chain` finds its VCEK, tried in order. */
  readonly vcekSources?: readonly VcekSource[];
  /**
   * PEM bundles (a self-signed ARK with the ASK and/or ASVK it signed) trusted besides AMD's built-in
   * roots, e.g. the mock TEE's `roots/amd-roots.pem`. Test hardware only.
   */
  readonly trustedArkPaths?: readonly string[];
}

/**
 * `[attestation_service.verifier_config.tdx_verifier]` (this project's own table): the offline Intel
 * collateral of the `tdx` and `az-tdx-vtpm` verifiers, and test SGX roots.
 */
export interface TdxVerifierConfig {
  /** TCB info JSON documents (PCS `tdx/certification/v4/tcb` answers), one per FMSPC. */
  readonly tcbInfoPaths: readonly string[];
  /** The TD QE identity JSON (PCS `tdx/certification/v4/qe/identity`); required with `tcbInfoPaths`. */
  readonly qeIdentityPath?: string;
  /** PEM certificates that sign collateral (the PCS issuer chain), besides Intel's built-in one. */
  readonly collateralSignerPaths: readonly string[];
  /** The PCK CA's CRL (DER or PEM): without it PCK certificates are not checked for revocation. */
  readonly pckCrlPath?: string;
  /** The SGX root CA's CRL (DER or PEM). */
  readonly rootCaCrlPath?: string;
  /** Self-signed SGX roots (PEM) trusted besides Intel's, e.g. the mock TEE's. Test hardware only. */
  readonly trustedSgxRootPaths: readonly string[];
}

/**
 * `[attestation_service.verifier_config.tpm_verifier]`. trustee's verifier once loaded up to
 * `max_trusted_ak_keys` `.pub` files from `trusted_ak_keys_dir` and refused other AKs; since May 2026
 * it trusts the AKs of the `trusted_aks` reference value (checked by the policy) and no longer reads
 * either key. Both are kept as written, and reported as unused.
 */
export interface TpmVerifierConfig {
  readonly trustedAkKeysDir?: string;
  readonly maxTrustedAkKeys?: number;
}

/** Per-verifier settings. */
export interface VerifierConfig {
  readonly snpVerifier?: SnpVerifierConfig;
  readonly tdxVerifier?: TdxVerifierConfig;
  /** trustee's DCAP settings: accepted so its configurations load; collateral here is offline (`tdxVerifier`). */
  readonly dcapVerifier?: {
    readonly collateralService: string;
    readonly useSecureCert?: boolean;
    readonly tcbUpdateType?: 'early' | 'standard';
  };
  readonly tpmVerifier?: TpmVerifierConfig;
  /** `trusted_root_paths` (test device roots besides NVIDIA's) is this project's addition. */
  readonly nvidiaVerifier?: (
    | { readonly type: 'Local' }
    | { readonly type: 'Remote'; readonly verifierUrl?: string; readonly jwksUrl?: string }
  ) & { readonly trustedRootPaths?: readonly string[] };
  /** Kept as written: its layout belongs to the NVIDIA DPU verifier. */
  readonly nvidiaDpuVerifier?: Readonly<Record<string, unknown>>;
}

export interface RvpsConfig {
  /** `GrpcRemote`: trustee's RVPS in another process, at `address`. */
  readonly type: 'BuiltIn' | 'GrpcRemote';
  /** `http://HOST:PORT` (the scheme added when missing, as trustee does), for `GrpcRemote`. */
  readonly address?: string;
  /** This project's credential keys, for a `GrpcRemote` RVPS that authenticates registrations. */
  readonly credentials?: RemoteCredentialPaths;
  /** Overrides `[storage_backend] storage_type` for reference values. */
  readonly storageType?: StorageType;
  /** `extractors.swid_extractor`, kept as written (SWID extraction is not supported). */
  readonly extractors?: Readonly<Record<string, unknown>>;
}

/**
 * This project's keys for a remote service (the AS of `coco_as_grpc`, a `GrpcRemote` RVPS) that
 * authenticates writes (policies, reference values) or serves TLS with a private CA. All are PEM file
 * paths.
 */
export interface RemoteCredentialPaths {
  /** `admin_private_key`: signs a short-lived admin JWT sent with each write. */
  readonly adminPrivateKey?: string;
  /** `ca_cert`: trust anchors of an `https://` address instead of the system roots. */
  readonly caCert?: string;
  /** `client_cert` and `client_key`: presented over TLS (mutual TLS). */
  readonly clientCert?: string;
  readonly clientKey?: string;
}

/** `[attestation_service]` of `type = "coco_as_grpc"`: trustee's `as_addr` and `pool_size`, and ours. */
export interface RemoteAsConfig extends RemoteCredentialPaths {
  readonly asAddr: string;
  readonly poolSize: number;
}

const CREDENTIAL_KEYS = ['admin_private_key', 'ca_cert', 'client_cert', 'client_key'] as const;

/** The credential keys of a remote service's section; `address` is where it is reached. */
function parseRemoteCredentials(s: Section, address: string): RemoteCredentialPaths {
  const paths: Partial<Record<(typeof CREDENTIAL_KEYS)[number], string>> = {};
  for (const key of CREDENTIAL_KEYS) {
    const v = s.optString(key);
    if (v !== undefined && v.length === 0) throw new ConfigError(`${s.where} ${key} must not be empty`);
    if (v !== undefined) paths[key] = v;
  }
  if ((paths.client_cert === undefined) !== (paths.client_key === undefined)) {
    throw new ConfigError(`${s.where} client_cert and client_key go together`);
  }
  if (address.startsWith('http:')) {
    for (const key of ['ca_cert', 'client_cert'] as const) {
      if (paths[key] !== undefined) {
        throw new ConfigError(
          `${s.where} ${key} needs an https:// address, not ${JSON.stringify(address.slice(0, 100))}`,
        );
      }
    }
  }
  return {
    ...(paths.admin_private_key !== undefined && { adminPrivateKey: paths.admin_private_key }),
    ...(paths.ca_cert !== undefined && { caCert: paths.ca_cert }),
    ...(paths.client_cert !== undefined && { clientCert: paths.client_cert }),
    ...(paths.client_key !== undefined && { clientKey: paths.client_key }),
  };
}

export interface AttestationServiceConfig {
  /** `coco_as_grpc`: trustee's attestation service in another process, reached over gRPC (`grpc`). */
  readonly type: 'coco_as_builtin' | 'coco_as_grpc';
  /** `as_addr` (with its scheme) and `pool_size`, for `coco_as_grpc`, and this project's credentials. */
  readonly grpc?: RemoteAsConfig;
  /** RCAR session lifetime in minutes, fixed at `/auth`. */
  readonly timeoutMin: number;
  readonly tokenBroker: TokenBrokerConfig;
  readonly rvps: RvpsConfig;
  readonly verifierConfig?: VerifierConfig;
  /** Overrides `[storage_backend] storage_type` for attestation policies (and, unless rvps overrides it, reference values). */
  readonly storageType?: StorageType;
  /** Dotted paths of legacy keys that were accepted and ignored; the KBS may log them. */
  readonly ignoredKeys: readonly string[];
}

const STORAGE_TYPES: Readonly<Record<string, StorageType>> = {
  Memory: 'Memory',
  memory: 'Memory',
  LocalJson: 'LocalJson',
  local_json: 'LocalJson',
  LocalFs: 'LocalFs',
  local_fs: 'LocalFs',
  Postgres: 'Postgres',
  postgres: 'Postgres',
  Redis: 'Redis',
  redis: 'Redis',
};

function storageType(s: Section, key: string): StorageType | undefined {
  const v = s.optString(key);
  if (v === undefined) return undefined;
  const t = Object.hasOwn(STORAGE_TYPES, v) ? STORAGE_TYPES[v] : undefined;
  if (t === undefined) {
    throw new ConfigError(
      `${s.where} ${key}: unknown storage type ${JSON.stringify(v)}; expected Memory, LocalFs, LocalJson, Postgres or Redis`,
    );
  }
  return t;
}

function nonEmpty(s: Section, key: string, def: string): string {
  const v = s.string(key, def);
  if (v.length === 0) throw new ConfigError(`${s.where} ${key} must not be empty`);
  return v;
}

function parseSigner(s: Section): TokenSignerConfig {
  const keyPath = s.string('key_path');
  const certPath = s.optString('cert_path');
  const certUrl = s.optString('cert_url');
  s.finish();
  return {
    keyPath,
    ...(certPath !== undefined ? { certPath } : {}),
    ...(certUrl !== undefined ? { certUrl } : {}),
  };
}

function parseTokenBroker(s: Section | undefined, ignored: string[]): TokenBrokerConfig {
  const cfg: TokenBrokerConfig = {
    durationMin: s?.optInt('duration_min', 1, MAX_MINUTES) ?? DEFAULT_TOKEN_DURATION_MIN,
    issuerName: s?.string('issuer_name', DEFAULT_ISSUER_NAME) ?? DEFAULT_ISSUER_NAME,
    developerName: s ? nonEmpty(s, 'developer_name', DEFAULT_DEVELOPER_NAME) : DEFAULT_DEVELOPER_NAME,
    buildName: s ? nonEmpty(s, 'build_name', DEFAULT_BUILD_NAME) : DEFAULT_BUILD_NAME,
    profileName: s ? nonEmpty(s, 'profile_name', DEFAULT_PROFILE_NAME) : DEFAULT_PROFILE_NAME,
    verboseToken: s?.bool('verbose_token', true) ?? true,
  };
  if (s === undefined) return cfg;
  const signer = s.optSection('signer');
  // Older trustee had a `type` (token flavour) and a `policy_dir` here; today's ignores both, so a
  // `type = "Simple"` gets EAR tokens there too: accepted, and reported.
  if (s.has('type')) {
    const t = s.raw('type');
    ignored.push(
      t === 'Ear' || t === 'ear'
        ? 'attestation_service.attestation_token_broker.type'
        : `attestation_service.attestation_token_broker.type = ${JSON.stringify(t)} (only EAR tokens are issued; the Simple token was removed upstream)`,
    );
  }
  if (s.has('policy_dir')) {
    s.raw('policy_dir');
    ignored.push('attestation_service.attestation_token_broker.policy_dir');
  }
  s.finish();
  return signer === undefined ? cfg : { ...cfg, signer: parseSigner(signer) };
}

function parseRvps(s: Section | undefined, ignored: string[]): RvpsConfig {
  if (s === undefined) return { type: 'BuiltIn' };
  const type = s.string('type');
  if (type === 'GrpcRemote') {
    const given = s.optString('address') ?? '127.0.0.1:50003';
    const address = /^[a-z]+:\/\//.test(given) ? given : `http://${given}`;
    if (!/^https?:\/\/[^/]+\/?$/.test(address)) {
      throw new ConfigError(
        `${s.where} address ${JSON.stringify(given.slice(0, 100))} must be HOST:PORT or http(s)://HOST:PORT`,
      );
    }
    const credentials = parseRemoteCredentials(s, address);
    s.finish();
    return {
      type: 'GrpcRemote',
      address,
      ...(Object.keys(credentials).length > 0 && { credentials }),
    };
  }
  if (type !== 'BuiltIn') {
    throw new ConfigError(
      `${s.where} type: unknown RVPS type ${JSON.stringify(type)}; expected "BuiltIn" or "GrpcRemote"`,
    );
  }
  const st = storageType(s, 'storage_type');
  const ex = s.optSection('extractors');
  let extractors: Record<string, unknown> | undefined;
  if (ex !== undefined) {
    const swid = ex.optSection('swid_extractor');
    ex.finish();
    extractors = swid === undefined ? {} : { swid_extractor: ex.raw('swid_extractor') };
  }
  // Older trustee configured the RVPS store here.
  if (s.has('storage')) {
    s.raw('storage');
    ignored.push('attestation_service.rvps_config.storage');
  }
  s.finish({
    address: 'only used by type = "GrpcRemote"',
    ...Object.fromEntries(CREDENTIAL_KEYS.map((k) => [k, 'only used by type = "GrpcRemote"'])),
  });
  return {
    type: 'BuiltIn',
    ...(st !== undefined ? { storageType: st } : {}),
    ...(extractors !== undefined ? { extractors } : {}),
  };
}

function parseVcekSources(s: Section): VcekSource[] {
  return s.sectionArray('vcek_sources').map((src) => {
    const type = src.string('type');
    let out: VcekSource;
    if (type === 'KDS') {
      const baseUrl = src.optString('base_url');
      out = { type, ...(baseUrl !== undefined ? { baseUrl } : {}) };
    } else if (type === 'OfflineStore') {
      const path = src.optString('path');
      out = { type, ...(path !== undefined ? { path } : {}) };
    } else {
      throw new ConfigError(
        `${src.where} type: expected "KDS" or "OfflineStore", found ${JSON.stringify(type)}`,
      );
    }
    src.finish();
    return out;
  });
}

/** File paths must be absolute: the KBS's working directory is not something a config should depend on. */
function path(s: Section, key: string): string | undefined {
  const p = s.optString(key);
  if (p === undefined) return undefined;
  if (!isAbsolute(p))
    throw new ConfigError(`${s.where} ${key}: ${JSON.stringify(p)} is not an absolute path`);
  return p;
}

function paths(s: Section, key: string): string[] {
  const list = s.stringArray(key);
  list.forEach((p, i) => {
    if (!isAbsolute(p)) {
      throw new ConfigError(`${s.where} ${key}[${i}]: ${JSON.stringify(p)} is not an absolute path`);
    }
  });
  return list;
}

function parseTdxVerifier(s: Section): TdxVerifierConfig {
  const tcbInfoPaths = paths(s, 'tcb_info_paths');
  const qeIdentityPath = path(s, 'qe_identity_path');
  const collateralSignerPaths = paths(s, 'collateral_signer_paths');
  const pckCrlPath = path(s, 'pck_crl_path');
  const rootCaCrlPath = path(s, 'root_ca_crl_path');
  const trustedSgxRootPaths = paths(s, 'trusted_sgx_root_paths');
  s.finish();
  // A TCB status needs both documents; one without the other is a half-done configuration.
  if (tcbInfoPaths.length > 0 !== (qeIdentityPath !== undefined)) {
    throw new ConfigError(`${s.where} tcb_info_paths and qe_identity_path go together`);
  }
  if (qeIdentityPath === undefined) {
    for (const key of ['collateral_signer_paths', 'pck_crl_path', 'root_ca_crl_path'] as const) {
      const set = key === 'collateral_signer_paths' ? collateralSignerPaths.length > 0 : s.has(key);
      if (set) throw new ConfigError(`${s.where} ${key} needs tcb_info_paths and qe_identity_path`);
    }
  }
  return {
    tcbInfoPaths,
    ...(qeIdentityPath !== undefined ? { qeIdentityPath } : {}),
    collateralSignerPaths,
    ...(pckCrlPath !== undefined ? { pckCrlPath } : {}),
    ...(rootCaCrlPath !== undefined ? { rootCaCrlPath } : {}),
    trustedSgxRootPaths,
  };
}

function parseTpmVerifier(s: Section, ignored: string[]): TpmVerifierConfig {
  const trustedAkKeysDir = s.optString('trusted_ak_keys_dir');
  // usize in trustee.
  const maxTrustedAkKeys = s.optInt('max_trusted_ak_keys', 0, Number.MAX_SAFE_INTEGER);
  s.finish();
  for (const [key, v] of [
    ['trusted_ak_keys_dir', trustedAkKeysDir],
    ['max_trusted_ak_keys', maxTrustedAkKeys],
  ] as const) {
    if (v !== undefined) ignored.push(`attestation_service.verifier_config.tpm_verifier.${key}`);
  }
  return {
    ...(trustedAkKeysDir !== undefined ? { trustedAkKeysDir } : {}),
    ...(maxTrustedAkKeys !== undefined ? { maxTrustedAkKeys } : {}),
  };
}

function parseVerifierConfig(s: Section, ignored: string[]): VerifierConfig {
  const out: {
    -readonly [K in keyof VerifierConfig]: VerifierConfig[K];
  } = {};
  const snp = s.optSection('snp_verifier');
  if (snp !== undefined) {
    const vcekSources = snp.has('vcek_sources') ? parseVcekSources(snp) : undefined;
    const trustedArkPaths = snp.has('trusted_ark_paths') ? paths(snp, 'trusted_ark_paths') : undefined;
    snp.finish();
    out.snpVerifier = {
      ...(vcekSources !== undefined ? { vcekSources } : {}),
      ...(trustedArkPaths !== undefined ? { trustedArkPaths } : {}),
    };
  }
  const tdx = s.optSection('tdx_verifier');
  if (tdx !== undefined) out.tdxVerifier = parseTdxVerifier(tdx);
  const dcap = s.optSection('dcap_verifier');
  if (dcap !== undefined) {
    const collateralService = dcap.string('collateral_service');
    const useSecureCert = dcap.has('use_secure_cert') ? dcap.bool('use_secure_cert', false) : undefined;
    const tcb = dcap.optString('tcb_update_type');
    if (tcb !== undefined && tcb !== 'early' && tcb !== 'standard') {
      throw new ConfigError(
        `${dcap.where} tcb_update_type: expected "early" or "standard", found ${JSON.stringify(tcb)}`,
      );
    }
    dcap.finish();
    out.dcapVerifier = {
      collateralService,
      ...(useSecureCert !== undefined ? { useSecureCert } : {}),
      ...(tcb !== undefined ? { tcbUpdateType: tcb } : {}),
    };
  }
  const tpm = s.optSection('tpm_verifier');
  if (tpm !== undefined) out.tpmVerifier = parseTpmVerifier(tpm, ignored);
  const nv = s.optSection('nvidia_verifier');
  if (nv !== undefined) {
    const t = nv.string('type', 'Local');
    const roots = nv.has('trusted_root_paths') ? { trustedRootPaths: paths(nv, 'trusted_root_paths') } : {};
    if (t === 'Local' || t === 'local') {
      out.nvidiaVerifier = { type: 'Local', ...roots };
    } else if (t === 'Remote' || t === 'remote') {
      const verifierUrl = nv.optString('verifier_url');
      // jwks_url is this project's addition (trustee always asks NVIDIA's), for a private or mock NRAS.
      const jwksUrl = nv.optString('jwks_url');
      out.nvidiaVerifier = {
        type: 'Remote',
        ...(verifierUrl !== undefined ? { verifierUrl } : {}),
        ...(jwksUrl !== undefined ? { jwksUrl } : {}),
        ...roots,
      };
    } else {
      throw new ConfigError(`${nv.where} type: expected "Local" or "Remote", found ${JSON.stringify(t)}`);
    }
    nv.finish();
  }
  const dpu = s.optSection('nvidia_dpu_verifier');
  if (dpu !== undefined) out.nvidiaDpuVerifier = s.raw('nvidia_dpu_verifier') as Record<string, unknown>;
  s.finish();
  return out;
}

/**
 * Reads the `[attestation_service]` table (already parsed from TOML); `undefined`
 * when the file has none, which selects the built-in service with defaults.
 */
export function parseAttestationServiceConfig(
  table: unknown,
  /** Receives one line per unknown key (ignored, as trustee does); without it they are refused. */
  warnings?: string[],
): AttestationServiceConfig {
  const ignored: string[] = [];
  if (table === undefined) {
    return {
      type: 'coco_as_builtin',
      timeoutMin: DEFAULT_SESSION_TIMEOUT_MIN,
      tokenBroker: parseTokenBroker(undefined, ignored),
      rvps: { type: 'BuiltIn' },
      ignoredKeys: ignored,
    };
  }
  const s = Section.of(table, '[attestation_service]', warnings);
  // A table without `type` (or none at all) selects the built-in service, the only one there is.
  const type = s.string('type', 'coco_as_builtin');
  if (type === 'coco_as_grpc' || type === 'CoCoASGrpc') {
    const timeoutMin = s.optInt('timeout', 1, MAX_MINUTES) ?? DEFAULT_SESSION_TIMEOUT_MIN;
    const asAddr = s.optString('as_addr') ?? 'http://127.0.0.1:50004';
    if (!/^https?:\/\/[^/]+\/?$/.test(asAddr)) {
      throw new ConfigError(
        `[attestation_service] as_addr ${JSON.stringify(asAddr.slice(0, 100))} must be http://HOST:PORT or https://HOST:PORT`,
      );
    }
    const poolSize = s.optInt('pool_size', 1, 10_000) ?? 100;
    const credentials = parseRemoteCredentials(s, asAddr);
    s.finish();
    return {
      type: 'coco_as_grpc',
      grpc: { asAddr, poolSize, ...credentials },
      timeoutMin,
      tokenBroker: parseTokenBroker(undefined, ignored),
      rvps: { type: 'BuiltIn' },
      ignoredKeys: ignored,
    };
  }
  if (type === 'intel_ta' || type === 'IntelTA') {
    throw new ConfigError(
      '[attestation_service] type: "intel_ta" (Intel Trust Authority) is not supported; use type = "coco_as_builtin"',
    );
  }
  if (type !== 'coco_as_builtin' && type !== 'CoCoASBuiltIn') {
    throw new ConfigError(
      `[attestation_service] type: unknown attestation service ${JSON.stringify(type)}; expected "coco_as_builtin" or "coco_as_grpc"`,
    );
  }
  const timeoutMin = s.optInt('timeout', 1, MAX_MINUTES) ?? DEFAULT_SESSION_TIMEOUT_MIN;
  const tokenBroker = parseTokenBroker(s.optSection('attestation_token_broker'), ignored);
  const rvps = parseRvps(s.optSection('rvps_config'), ignored);
  const vc = s.optSection('verifier_config');
  const verifierConfig = vc === undefined ? undefined : parseVerifierConfig(vc, ignored);
  const st = storageType(s, 'storage_type');
  // Keys of older trustee releases that today's silently ignores.
  for (const legacy of ['work_dir', 'policy_engine', 'attestation_token_config']) {
    if (s.has(legacy)) {
      s.raw(legacy);
      ignored.push(`attestation_service.${legacy}`);
    }
  }
  s.finish({
    as_addr: 'only used by type = "coco_as_grpc"',
    pool_size: 'only used by type = "coco_as_grpc"',
    admin_private_key: 'only used by type = "coco_as_grpc"',
    ca_cert: 'only used by type = "coco_as_grpc"',
    client_cert: 'only used by type = "coco_as_grpc"',
    client_key: 'only used by type = "coco_as_grpc"',
  });
  return {
    type: 'coco_as_builtin',
    timeoutMin,
    tokenBroker,
    rvps,
    ...(verifierConfig !== undefined ? { verifierConfig } : {}),
    ...(st !== undefined ? { storageType: st } : {}),
    ignoredKeys: ignored,
  };
}
