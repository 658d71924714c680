// trustee's and trustee-operator's own configuration files (test/vectors), and the keys they use that a
// strict reader used to refuse.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError } from '@broker/cli';
import { describe, expect, it } from 'vitest';
import { parseKbsConfigText, sessionStorageOf, validateAdminConfig } from './config.js';

const VECTORS = join(import.meta.dirname, '..', '..', '..', 'test', 'vectors');
const read = (path: string) => parseKbsConfigText(readFileSync(join(VECTORS, path), 'utf8'), path);

function fails(text: string): string {
  try {
    parseKbsConfigText(text);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error('configuration was accepted');
}

const MIN = '[http_server]\ninsecure_http = true\n[admin]\nauthorization_mode = "DenyAll"\n';
const WORKERS = (n: number) =>
  MIN.replace('insecure_http = true', `insecure_http = true\nworker_count = ${n}`);

const TEST_DATA = 'trustee/configs/kbs/test_data/configs';
const INTEL_TA = /\[attestation_service\] type: "intel_ta" \(Intel Trust Authority\) is not supported/;

describe("trustee's kbs/test_data/configs", () => {
  it.each([
    // Its remote RVPS is read; HTTPS without a key or certificate is what is refused.
    ['coco-as-builtin-1.toml', /private_key and certificate missing/],
    ['intel-ta-1.toml', INTEL_TA],
    ['intel-ta-2.toml', INTEL_TA],
    ['intel-ta-3.toml', INTEL_TA],
  ])('%s names a remote service: a clear "not supported" error', (file, re) => {
    expect(() => read(`${TEST_DATA}/${file}`)).toThrow(re);
  });

  it.each([
    ['coco-as-grpc-2.toml', 'http://as:50004', 100, 5],
    ['coco-as-grpc-3.toml', 'http://127.0.0.1:50004', 100, 5],
    ['tls-profile-custom-pqc.toml', 'http://127.0.0.1:50001', 100, 5],
    ['tls-profile-custom.toml', 'http://127.0.0.1:50001', 100, 5],
    ['tls-profile-intermediate.toml', 'http://127.0.0.1:50001', 100, 5],
    ['tls-profile-modern.toml', 'http://127.0.0.1:50001', 100, 5],
    ['tls-profile-old.toml', 'http://127.0.0.1:50001', 100, 5],
  ])(
    '%s selects the remote attestation service (coco_as_grpc) at %s',
    (file, asAddr, poolSize, timeoutMin) => {
      const c = read(`${TEST_DATA}/${file}`);
      expect(c.attestationService.type).toBe('coco_as_grpc');
      expect(c.attestationService.grpc).toEqual({ asAddr, poolSize });
      expect(c.attestationService.timeoutMin).toBe(timeoutMin);
    },
  );

  it('coco-as-grpc-1.toml selects the remote service and configures the sample plugin beside resource', () => {
    const c = read(`${TEST_DATA}/coco-as-grpc-1.toml`);
    expect(c.attestationService.type).toBe('coco_as_grpc');
    expect(c.attestationService.grpc).toEqual({ asAddr: 'http://127.0.0.1:50001', poolSize: 100 });
    expect(c.builtinPlugins).toEqual({ sample: { item: 'value1' } });
    expect(c.resourcePlugin).toEqual({ backend: 'kvstorage' });
  });

  it('coco-as-builtin-1.toml selects the built-in service with a remote RVPS (GrpcRemote)', () => {
    // As shipped it asks for HTTPS without a key (refused above); with plain HTTP it parses.
    const text = readFileSync(join(VECTORS, TEST_DATA, 'coco-as-builtin-1.toml'), 'utf8');
    const c = parseKbsConfigText(text.replace('insecure_http = false', 'insecure_http = true'));
    expect(c.attestationService.type).toBe('coco_as_builtin');
    expect(c.attestationService.rvps).toEqual({ type: 'GrpcRemote', address: 'http://127.0.0.1:50003' });
  });

  it('coco-as-builtin-2.toml parses as trustee reads it', () => {
    const c = read(`${TEST_DATA}/coco-as-builtin-2.toml`);
    expect(c.sessionStorageType).toBe('Memory');
    expect(c.httpServer.sockets).toEqual([{ host: '0.0.0.0', port: 8080 }]);
    expect(c.httpServer.payloadRequestSize).toBe(2);
    expect(c.admin).toEqual({ mode: 'InsecureAllowAll' });
    expect(c.storageBackend).toEqual({ storageType: 'Memory' });
    expect(c.warnings).toEqual([]);
  });

  it('coco-as-builtin-3.toml parses (LocalJson store, admin without identity providers); the start refuses the admin table as trustee does', () => {
    const c = read(`${TEST_DATA}/coco-as-builtin-3.toml`);
    expect(c.storageBackend).toEqual({
      storageType: 'LocalJson',
      localJsonDir: '/opt/confidential-containers/trustee',
    });
    expect(c.admin).toEqual({ mode: 'AuthenticatedAuthorization', identityProviders: [], acls: [] });
    expect(c.resourcePlugin).toEqual({ backend: 'kvstorage' });
    expect(() => validateAdminConfig(c.admin)).toThrow(
      'AuthenticatedAuthorization requires at least one `identity_providers` entry in [admin.authentication.bearer_jwt]',
    );
  });
});

describe('the configurations a KBS is started on', () => {
  it('trustee kbs/test/config/kbs.toml: tpm_verifier keys are read (and reported unused, as today in trustee)', () => {
    const c = read('trustee/configs/kbs/test/config/kbs.toml');
    expect(c.attestationService.verifierConfig?.tpmVerifier).toEqual({
      trustedAkKeysDir: './work/attestation-service/tpm_trusted_keys',
      maxTrustedAkKeys: 100,
    });
    expect(c.attestationService.ignoredKeys).toEqual([
      'attestation_service.verifier_config.tpm_verifier.trusted_ak_keys_dir',
      'attestation_service.verifier_config.tpm_verifier.max_trusted_ak_keys',
    ]);
    expect(c.warnings).toEqual([]);
  });

  it('trustee-operator kbs-config-permissive.toml: LocalJson reference values in dir_path, worker_count explained', () => {
    const c = read('trustee-operator/config/templates/kbs-config-permissive.toml');
    expect(c.attestationService.rvps.storageType).toBe('LocalJson');
    expect(c.storageBackend).toEqual({
      storageType: 'LocalFs',
      localFsDir: '/opt/confidential-containers/storage',
      localJsonDir: '/opt/confidential-containers/storage/local_json',
    });
    expect(c.httpServer.workerCount).toBeUndefined();
    expect(c.warnings).toEqual([
      '[http_server] worker_count = 4 (trustee: actix worker threads) is not applied: here it would fork 4 processes, but the reference values use LocalJson (a file rewritten whole by one process), so this KBS runs as one process (Node serves concurrent requests on one event loop)',
    ]);
  });

  it('trustee-operator kbs-config-restricted.toml (rendered): attestation_token_type is ignored with one warning', () => {
    const c = read('trustee-operator/rendered/kbs-config-restricted.toml');
    expect(c.httpServer.tls.profile).toBe('intermediate');
    expect(c.attestationToken.trustedCertsPaths).toEqual(['/etc/attestation-cert/token.crt']);
    expect(c.attestationService.tokenBroker.signer).toEqual({
      keyPath: '/etc/attestation-key/token.key',
      certPath: '/etc/attestation-cert/token.crt',
    });
    expect(c.warnings[0]).toBe('unknown key "attestation_token_type" in [attestation_token] is ignored');
    expect(c.warnings).toHaveLength(2);
  });
});

describe('LocalJson storage settings', () => {
  const lj = (table: string, type = 'LocalJson') =>
    parseKbsConfigText(`${MIN}[storage_backend]\nstorage_type = "${type}"\n${table}`);

  it("reads trustee's file_dir_path, the operator's dir_path, and trustee's default directory", () => {
    expect(
      lj('[storage_backend.backends.local_json]\nfile_dir_path = "/a"').storageBackend.localJsonDir,
    ).toBe('/a');
    expect(lj('[storage_backend.backends.local_json]\ndir_path = "/b"').storageBackend.localJsonDir).toBe(
      '/b',
    );
    expect(lj('[storage_backend.backends.local_json]').storageBackend.localJsonDir).toBe(
      '/opt/confidential-containers/storage/local_json',
    );
    expect(lj('backends.local_json.file_dir_path = "/c"', 'local_json').storageBackend).toEqual({
      storageType: 'LocalJson',
      localJsonDir: '/c',
    });
  });

  it('keeps the sessions of one process in memory unless session_storage_type says LocalJson, and then warns', () => {
    const table = '[storage_backend.backends.local_json]\nfile_dir_path = "/a"';
    const main = lj(table);
    expect(main.warnings).toEqual([]);
    expect(sessionStorageOf(main)).toBe('Memory');
    const explicit = parseKbsConfigText(
      `session_storage_type = "LocalJson"\n${MIN}[storage_backend]\nstorage_type = "LocalJson"\n${table}`,
    );
    expect(sessionStorageOf(explicit)).toBe('LocalJson');
    expect(explicit.warnings).toEqual([
      'the RCAR sessions are kept in LocalJson, one file rewritten whole on every /auth and /attest: set session_storage_type = "Memory" (or LocalFs, Redis) unless the load is small',
    ]);
  });

  it('refuses LocalJson without its table, and two different directories', () => {
    expect(fails(`${MIN}[storage_backend]\nstorage_type = "LocalJson"`)).toMatch(
      /storage_type = "LocalJson" needs \[storage_backend.backends.local_json\] with file_dir_path \(Local JSON configuration is required\)/,
    );
    expect(
      fails(`${MIN}[attestation_service.rvps_config]\ntype = "BuiltIn"\nstorage_type = "LocalJson"`),
    ).toMatch(
      /\[attestation_service.rvps_config\] storage_type = "LocalJson" needs \[storage_backend.backends.local_json\]/,
    );
    expect(
      fails(`${MIN}[storage_backend.backends.local_json]\nfile_dir_path = "/a"\ndir_path = "/b"`),
    ).toMatch(/file_dir_path and dir_path name different directories/);
  });
});

describe('worker_count', () => {
  it('with shared stores (LocalFs) forks that many processes and says so once', () => {
    const c = parseKbsConfigText(
      `${WORKERS(4)}[storage_backend]\nstorage_type = "LocalFs"\n[storage_backend.backends.local_fs]\ndir_path = "/s"`,
    );
    expect(c.httpServer.workerCount).toBe(4);
    expect(c.warnings).toEqual([
      '[http_server] worker_count = 4 (trustee: actix worker threads): here 4 worker processes share the sockets and keep their state in the shared stores (LocalFs)',
    ]);
  });

  it('with a LocalJson store runs one process, with one warning about it', () => {
    const c = parseKbsConfigText(
      `${WORKERS(2)}[storage_backend]\nstorage_type = "LocalJson"\n[storage_backend.backends.local_json]\nfile_dir_path = "/j"`,
    );
    expect(c.httpServer.workerCount).toBeUndefined();
    // One process: its sessions are kept in memory, so there is no warning about them.
    expect(sessionStorageOf(c)).toBe('Memory');
    expect(c.warnings).toHaveLength(1);
    expect(c.warnings[0]).toMatch(
      /worker_count = 2 .* the sessions, \[storage_backend\] storage_type, the attestation policies, the reference values use LocalJson/,
    );
  });

  it('with one worker says nothing', () => {
    expect(parseKbsConfigText(WORKERS(1)).warnings).toEqual([]);
  });
});

describe('[attestation_service.verifier_config.tpm_verifier]', () => {
  const tpm = (body: string) => `${MIN}[attestation_service.verifier_config.tpm_verifier]\n${body}`;

  it('takes an empty table', () => {
    expect(parseKbsConfigText(tpm('')).attestationService.verifierConfig?.tpmVerifier).toEqual({});
  });

  it.each([
    ['trusted_ak_keys_dir = 5', /trusted_ak_keys_dir: expected a string, found number 5/],
    ['max_trusted_ak_keys = "100"', /max_trusted_ak_keys: expected an integer/],
    ['max_trusted_ak_keys = -1', /max_trusted_ak_keys: -1 is outside 0\.\./],
  ])('refuses %s', (body, re) => {
    expect(fails(tpm(body))).toMatch(re);
  });
});

describe('validateAdminConfig (what trustee checks at start)', () => {
  it('refuses an identity provider without a key source, with trustee message', () => {
    expect(() =>
      validateAdminConfig({
        mode: 'AuthenticatedAuthorization',
        identityProviders: [{ publicKeyUri: '/k' }, { issuer: 'x' }],
        acls: [],
      }),
    ).toThrow('identity_providers[1] must set `public_key_uri` and/or `jwk_set_uri`');
  });

  it('accepts the other modes and complete providers', () => {
    validateAdminConfig({ mode: 'DenyAll' });
    validateAdminConfig({
      mode: 'AuthenticatedAuthorization',
      identityProviders: [{ jwkSetUri: 'file:///j' }],
      acls: [],
    });
  });
});
