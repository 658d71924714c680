import { readFileSync } from 'node:fs';
import { ConfigError } from '@broker/cli';
import { vector } from '@broker/cli/testing';
import { parse } from 'smol-toml';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_BUILD_NAME,
  DEFAULT_DEVELOPER_NAME,
  DEFAULT_ISSUER_NAME,
  DEFAULT_PROFILE_NAME,
  DEFAULT_SESSION_TIMEOUT_MIN,
  parseAttestationServiceConfig,
} from './config.js';

function asTable(toml: string): unknown {
  return (parse(toml) as Record<string, unknown>).attestation_service;
}

function configError(table: unknown): string {
  try {
    parseAttestationServiceConfig(table);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error('expected a ConfigError');
}

// trustee's kbs/config/kbs-config.toml.
const TRUSTEE_EXAMPLE = readFileSync(vector('trustee/kbs-config.example.toml'), 'utf8');

describe('[attestation_service] configuration', () => {
  it("loads trustee's example configuration with trustee's defaults", () => {
    const cfg = parseAttestationServiceConfig(asTable(TRUSTEE_EXAMPLE));
    expect(cfg).toEqual({
      type: 'coco_as_builtin',
      timeoutMin: DEFAULT_SESSION_TIMEOUT_MIN,
      tokenBroker: {
        durationMin: 5,
        issuerName: DEFAULT_ISSUER_NAME,
        developerName: DEFAULT_DEVELOPER_NAME,
        buildName: DEFAULT_BUILD_NAME,
        profileName: DEFAULT_PROFILE_NAME,
        verboseToken: true,
      },
      rvps: { type: 'BuiltIn' },
      ignoredKeys: [],
    });
    expect(DEFAULT_ISSUER_NAME).toBe('CoCo-Attestation-Service');
    expect(DEFAULT_DEVELOPER_NAME).toBe('https://confidentialcontainers.org');
    expect(DEFAULT_PROFILE_NAME).toBe('tag:github.com,2024:confidential-containers/Trustee');
  });

  it('defaults everything when the table is absent or empty', () => {
    expect(parseAttestationServiceConfig({})).toEqual(parseAttestationServiceConfig(undefined));
    const cfg = parseAttestationServiceConfig(undefined);
    expect(cfg.timeoutMin).toBe(5);
    expect(cfg.tokenBroker.durationMin).toBe(5);
    expect(cfg.tokenBroker.signer).toBeUndefined();
  });

  it('reads every documented key', () => {
    const cfg = parseAttestationServiceConfig(
      asTable(`
[attestation_service]
type = "CoCoASBuiltIn"
timeout = 10
storage_type = "local_fs"
[attestation_service.attestation_token_broker]
duration_min = 30
issuer_name = "me"
developer_name = "dev"
build_name = "b 1"
profile_name = "p"
verbose_token = false
[attestation_service.attestation_token_broker.signer]
key_path = "/k.pem"
cert_path = "/c.pem"
cert_url = "https://example.com/c.pem"
[attestation_service.rvps_config]
type = "BuiltIn"
storage_type = "LocalJson"
[attestation_service.rvps_config.extractors]
swid_extractor = {}
[attestation_service.verifier_config.snp_verifier]
vcek_sources = [{ type = "OfflineStore", path = "/v" }, { type = "KDS" }]
[attestation_service.verifier_config.dcap_verifier]
collateral_service = "https://pccs.example/sgx/certification/v4/"
tcb_update_type = "standard"
[attestation_service.verifier_config.tpm_verifier]
[attestation_service.verifier_config.nvidia_verifier]
type = "Remote"
verifier_url = "https://nras.example"
`),
    );
    expect(cfg).toEqual({
      type: 'coco_as_builtin',
      timeoutMin: 10,
      storageType: 'LocalFs',
      tokenBroker: {
        durationMin: 30,
        issuerName: 'me',
        developerName: 'dev',
        buildName: 'b 1',
        profileName: 'p',
        verboseToken: false,
        signer: { keyPath: '/k.pem', certPath: '/c.pem', certUrl: 'https://example.com/c.pem' },
      },
      rvps: { type: 'BuiltIn', storageType: 'LocalJson', extractors: { swid_extractor: {} } },
      verifierConfig: {
        snpVerifier: { vcekSources: [{ type: 'OfflineStore', path: '/v' }, { type: 'KDS' }] },
        dcapVerifier: {
          collateralService: 'https://pccs.example/sgx/certification/v4/',
          tcbUpdateType: 'standard',
        },
        tpmVerifier: {},
        nvidiaVerifier: { type: 'Remote', verifierUrl: 'https://nras.example' },
      },
      ignoredKeys: [],
    });
  });

  it('accepts keys of older trustee releases and reports them as ignored', () => {
    const cfg = parseAttestationServiceConfig(
      asTable(`
[attestation_service]
type = "coco_as_builtin"
work_dir = "/opt/confidential-containers/attestation-service"
policy_engine = "opa"
[attestation_service.attestation_token_broker]
type = "Ear"
policy_dir = "/opt/policies"
[attestation_service.rvps_config]
type = "BuiltIn"
[attestation_service.rvps_config.storage]
type = "LocalFs"
`),
    );
    expect([...cfg.ignoredKeys].sort()).toEqual([
      'attestation_service.attestation_token_broker.policy_dir',
      'attestation_service.attestation_token_broker.type',
      'attestation_service.policy_engine',
      'attestation_service.rvps_config.storage',
      'attestation_service.work_dir',
    ]);
  });

  it.each([
    ['an unknown top-level key', '[attestation_service]\ntype = "coco_as_builtin"\ntimout = 5', 'timout'],
    [
      'an unknown token broker key',
      '[attestation_service]\ntype = "coco_as_builtin"\n[attestation_service.attestation_token_broker]\nduration = 5',
      'duration',
    ],
    [
      'an unknown signer key',
      '[attestation_service]\ntype = "coco_as_builtin"\n[attestation_service.attestation_token_broker.signer]\nkey_path = "/k"\nkey = "x"',
      '"key"',
    ],
    [
      'an unknown rvps key',
      '[attestation_service]\ntype = "coco_as_builtin"\n[attestation_service.rvps_config]\ntype = "BuiltIn"\nfoo = 1',
      'foo',
    ],
    [
      'an unknown verifier',
      '[attestation_service]\ntype = "coco_as_builtin"\n[attestation_service.verifier_config.sev_verifier]\nx = 1',
      'sev_verifier',
    ],
  ])('refuses %s, naming it', (_name, toml, key) => {
    expect(configError(asTable(toml))).toContain(key);
  });

  it.each([
    ['intel_ta', 'intel_ta'],
    ['something', 'unknown attestation service'],
  ])('refuses type = %s clearly', (type, text) => {
    expect(configError({ type })).toContain(text);
  });

  it('reads coco_as_grpc with trustee defaults, and refuses an as_addr without scheme', () => {
    const c = parseAttestationServiceConfig({ type: 'coco_as_grpc' });
    expect(c.type).toBe('coco_as_grpc');
    expect(c.grpc).toEqual({ asAddr: 'http://127.0.0.1:50004', poolSize: 100 });
    expect(configError({ type: 'coco_as_grpc', as_addr: '127.0.0.1:50004' })).toContain('http://HOST:PORT');
  });

  it('reads the credentials of coco_as_grpc for an AS that authenticates writes', () => {
    const c = parseAttestationServiceConfig({
      type: 'coco_as_grpc',
      as_addr: 'https://as:50004',
      admin_private_key: '/etc/kbs/as-admin.key',
      ca_cert: '/etc/kbs/as-ca.pem',
      client_cert: '/etc/kbs/as-client.pem',
      client_key: '/etc/kbs/as-client.key',
    });
    expect(c.grpc).toEqual({
      asAddr: 'https://as:50004',
      poolSize: 100,
      adminPrivateKey: '/etc/kbs/as-admin.key',
      caCert: '/etc/kbs/as-ca.pem',
      clientCert: '/etc/kbs/as-client.pem',
      clientKey: '/etc/kbs/as-client.key',
    });
    expect(parseAttestationServiceConfig({ type: 'coco_as_grpc', admin_private_key: 'k.pem' }).grpc).toEqual({
      asAddr: 'http://127.0.0.1:50004',
      poolSize: 100,
      adminPrivateKey: 'k.pem',
    });
    expect(configError({ type: 'coco_as_grpc', as_addr: 'https://as:1', client_cert: 'c.pem' })).toContain(
      'client_cert and client_key go together',
    );
    expect(configError({ type: 'coco_as_grpc', ca_cert: 'ca.pem' })).toContain('ca_cert needs an https://');
    expect(configError({ type: 'coco_as_grpc', admin_private_key: '' })).toContain('must not be empty');
    expect(configError({ admin_private_key: 'k.pem' })).toContain('only used by type = "coco_as_grpc"');
  });

  it('reads a remote RVPS (GrpcRemote), adding http:// as trustee does', () => {
    const c = parseAttestationServiceConfig({
      type: 'coco_as_builtin',
      rvps_config: { type: 'GrpcRemote', address: '127.0.0.1:50003' },
    });
    expect(c.rvps).toEqual({ type: 'GrpcRemote', address: 'http://127.0.0.1:50003' });
    expect(parseAttestationServiceConfig({ rvps_config: { type: 'GrpcRemote' } }).rvps.address).toBe(
      'http://127.0.0.1:50003',
    );
    expect(configError({ rvps_config: { type: 'GrpcRemote', address: 'ftp://x:1' } })).toContain('address');
  });

  it('reads the credentials of a GrpcRemote RVPS that authenticates registrations', () => {
    const c = parseAttestationServiceConfig({
      rvps_config: {
        type: 'GrpcRemote',
        address: 'https://rvps:50003',
        admin_private_key: 'admin.key',
        ca_cert: 'ca.pem',
        client_cert: 'c.pem',
        client_key: 'c.key',
      },
    });
    expect(c.rvps).toEqual({
      type: 'GrpcRemote',
      address: 'https://rvps:50003',
      credentials: {
        adminPrivateKey: 'admin.key',
        caCert: 'ca.pem',
        clientCert: 'c.pem',
        clientKey: 'c.key',
      },
    });
    expect(configError({ rvps_config: { type: 'GrpcRemote', ca_cert: 'ca.pem' } })).toContain(
      '[attestation_service.rvps_config] ca_cert needs an https://',
    );
    expect(configError({ rvps_config: { type: 'BuiltIn', admin_private_key: 'k' } })).toContain(
      'only used by type = "GrpcRemote"',
    );
  });

  it('accepts the removed Simple token type as trustee does (ignored), and reports it', () => {
    const cfg = parseAttestationServiceConfig({
      type: 'coco_as_builtin',
      attestation_token_broker: { type: 'Simple' },
    });
    expect(cfg.ignoredKeys).toEqual([
      'attestation_service.attestation_token_broker.type = "Simple" (only EAR tokens are issued; the Simple token was removed upstream)',
    ]);
  });

  it.each([
    [{ type: 'coco_as_builtin', timeout: 0 }, 'timeout'],
    [{ type: 'coco_as_builtin', timeout: 1.5 }, 'timeout'],
    [{ type: 'coco_as_builtin', timeout: '5' }, 'timeout'],
    [{ type: 'coco_as_builtin', attestation_token_broker: { duration_min: -1 } }, 'duration_min'],
    [{ type: 'coco_as_builtin', attestation_token_broker: { verbose_token: 'yes' } }, 'verbose_token'],
    [{ type: 'coco_as_builtin', attestation_token_broker: { build_name: '' } }, 'build_name'],
    [{ type: 'coco_as_builtin', attestation_token_broker: { signer: {} } }, 'key_path'],
    [{ type: 'coco_as_builtin', storage_type: 'Disk' }, 'storage_type'],
    [{ type: 'coco_as_builtin', rvps_config: {} }, 'type'],
    ['coco_as_builtin', 'table'],
  ])('refuses bad values (%j)', (table, key) => {
    expect(configError(table)).toContain(key);
  });

  it("reads snp_verifier's trusted_ark_paths and the tdx_verifier table", () => {
    const cfg = parseAttestationServiceConfig(
      asTable(`
[attestation_service]
[attestation_service.verifier_config.snp_verifier]
trusted_ark_paths = ["/roots/amd-roots.pem"]
[attestation_service.verifier_config.tdx_verifier]
tcb_info_paths = ["/c/tcb-a.json", "/c/tcb-b.json"]
qe_identity_path = "/c/qe.json"
collateral_signer_paths = ["/c/signer.pem"]
pck_crl_path = "/c/pck.crl"
root_ca_crl_path = "/c/root.crl"
trusted_sgx_root_paths = ["/c/root.pem"]
`),
    );
    expect(cfg.verifierConfig).toEqual({
      snpVerifier: { trustedArkPaths: ['/roots/amd-roots.pem'] },
      tdxVerifier: {
        tcbInfoPaths: ['/c/tcb-a.json', '/c/tcb-b.json'],
        qeIdentityPath: '/c/qe.json',
        collateralSignerPaths: ['/c/signer.pem'],
        pckCrlPath: '/c/pck.crl',
        rootCaCrlPath: '/c/root.crl',
        trustedSgxRootPaths: ['/c/root.pem'],
      },
    });
    expect(
      parseAttestationServiceConfig(asTable('[attestation_service.verifier_config.snp_verifier]\n'))
        .verifierConfig,
    ).toEqual({ snpVerifier: {} });
  });

  it.each([
    [{ snp_verifier: { trusted_ark_paths: 'x.pem' } }, 'trusted_ark_paths'],
    [{ snp_verifier: { trusted_ark_paths: ['rel.pem'] } }, 'not an absolute path'],
    [{ snp_verifier: { trusted_ark: ['/x.pem'] } }, 'trusted_ark'],
    [{ tdx_verifier: { tcb_info_paths: ['/t.json'] } }, 'go together'],
    [{ tdx_verifier: { collateral_signer_paths: ['/s.pem'] } }, 'needs tcb_info_paths'],
    [{ tdx_verifier: { qe_identity_path: 'qe.json', tcb_info_paths: ['/t.json'] } }, 'absolute'],
  ])('refuses bad verifier settings (%j)', (vc, text) => {
    expect(configError({ type: 'coco_as_builtin', verifier_config: vc })).toContain(text);
  });

  it('accepts TOML integers parsed as bigint', () => {
    expect(parseAttestationServiceConfig({ type: 'coco_as_builtin', timeout: 7n }).timeoutMin).toBe(7);
  });
});
