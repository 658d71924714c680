import { readFileSync } from 'node:fs';
import { ConfigError } from '@broker/cli';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import { parseKbsConfigText } from './config.js';

const EXAMPLE = readFileSync(vector('trustee/kbs-config.example.toml'), 'utf8');

const MIN = `
[http_server]
insecure_http = true
[admin]
authorization_mode = "DenyAll"
`;

function fails(text: string): string {
  try {
    parseKbsConfigText(text);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error('configuration was accepted');
}

describe('parseKbsConfigText', () => {
  it("loads trustee's sample kbs-config.toml", () => {
    const c = parseKbsConfigText(EXAMPLE);
    expect(c.httpServer.insecureHttp).toBe(true);
    expect(c.httpServer.sockets).toEqual([{ host: '127.0.0.1', port: 8080 }]);
    expect(c.httpServer.payloadRequestSize).toBe(2);
    expect(c.attestationToken.insecureHeaderJwk).toBe(true);
    expect(c.attestationService.type).toBe('coco_as_builtin');
    expect(c.attestationService.timeoutMin).toBe(5);
    expect(c.admin).toEqual({ mode: 'InsecureAllowAll' });
    expect(c.storageBackend).toEqual({
      storageType: 'LocalFs',
      localFsDir: '/opt/confidential-containers/storage',
    });
    expect(c.sessionStorageType).toBeUndefined();
    expect(c.resourcePlugin).toEqual({ backend: 'kvstorage' });
  });

  it('applies trustee defaults to an almost empty file', () => {
    const c = parseKbsConfigText(MIN);
    expect(c.httpServer.sockets).toEqual([{ host: '127.0.0.1', port: 8080 }]);
    expect(c.httpServer.tls.profile).toBe('intermediate');
    expect(c.storageBackend).toEqual({ storageType: 'Memory' });
    expect(c.resourcePlugin).toBeUndefined();
    expect(c.attestationToken).toEqual({
      trustedCertsPaths: [],
      trustedJwkSets: [],
      extraTeekeyPaths: [],
      insecureHeaderJwk: false,
    });
  });

  it('reads the HTTPS, token and TLS settings', () => {
    const c = parseKbsConfigText(`
session_storage_type = "LocalFs"
[http_server]
sockets = ["0.0.0.0:8443", "[::1]:9443"]
private_key = "/etc/kbs/key.pem"
certificate = "/etc/kbs/cert.pem"
payload_request_size = 4
worker_count = 4
tls_profile = "custom"
tls_min_version = "1.3"
tls_groups = "X25519"
[attestation_token]
trusted_certs_paths = ["/etc/ca.pem"]
trusted_jwk_sets = ["file:///etc/jwks.json"]
extra_teekey_paths = ["/custom/tee-pubkey"]
insecure_key = true
[admin]
authorization_mode = "InsecureAllowAll"
[storage_backend]
storage_type = "local_fs"
[storage_backend.backends.local_fs]
dir_path = "/var/lib/kbs"
[[plugins]]
name = "resource"
storage_backend_type = "kvstorage"
`);
    expect(c.httpServer.sockets).toEqual([
      { host: '0.0.0.0', port: 8443 },
      { host: '::1', port: 9443 },
    ]);
    expect(c.httpServer.privateKey).toBe('/etc/kbs/key.pem');
    expect(c.httpServer.payloadRequestSize).toBe(4);
    expect(c.httpServer.tls).toEqual({ profile: 'custom', minVersion: '1.3', groups: 'X25519' });
    expect(c.attestationToken.extraTeekeyPaths).toEqual(['/custom/tee-pubkey']);
    expect(c.storageBackend).toEqual({ storageType: 'LocalFs', localFsDir: '/var/lib/kbs' });
    expect(c.sessionStorageType).toBe('LocalFs');
    expect(c.httpServer.workerCount).toBe(4);
    expect(c.warnings.some((w) => w.includes('insecure_key'))).toBe(true);
  });

  it("reads trustee's Redis backend: [storage_backend.backends.redis] url, and session_storage_type", () => {
    const c = parseKbsConfigText(`
session_storage_type = "Redis"
[http_server]
insecure_http = true
worker_count = 2
[admin]
authorization_mode = "DenyAll"
[storage_backend]
storage_type = "Redis"
[storage_backend.backends.redis]
url = "redis://:pw@redis.kbs.svc:6379/2"
`);
    expect(c.storageBackend).toEqual({ storageType: 'Redis', redisUrl: 'redis://:pw@redis.kbs.svc:6379/2' });
    expect(c.sessionStorageType).toBe('Redis');
    expect(c.httpServer.workerCount).toBe(2);
    const d = parseKbsConfigText(`${MIN}
[storage_backend.backends.redis]
`);
    // trustee's default URL; the table alone does not select the backend.
    expect(d.storageBackend).toEqual({ storageType: 'Memory', redisUrl: 'redis://127.0.0.1:6379' });
  });

  it("reads trustee's Postgres backend: [storage_backend.backends.postgres] with its keys and defaults", () => {
    const c = parseKbsConfigText(`
session_storage_type = "Postgres"
[http_server]
insecure_http = true
worker_count = 2
[admin]
authorization_mode = "DenyAll"
[storage_backend]
storage_type = "Postgres"
[storage_backend.backends.postgres]
db = "kbs"
username = "kbs"
password = "pw"
port = 6432
host = "db.kbs.svc"
table = "key_value"
`);
    expect(c.storageBackend).toEqual({
      storageType: 'Postgres',
      postgres: { db: 'kbs', username: 'kbs', password: 'pw', port: 6432, host: 'db.kbs.svc' },
    });
    expect(c.sessionStorageType).toBe('Postgres');
    // Shared by every worker process.
    expect(c.httpServer.workerCount).toBe(2);
    expect(c.warnings.some((w) => /table is ignored: each namespace has its own table/.test(w))).toBe(true);
    const d = parseKbsConfigText(`${MIN}
[storage_backend]
storage_type = "postgres"
[storage_backend.backends.postgres]
`);
    expect(d.storageBackend).toEqual({
      storageType: 'Postgres',
      postgres: { db: 'postgres', username: 'postgres', port: 5432, host: 'localhost' },
    });
  });

  it('keeps sessions in Redis while resources stay in LocalFs', () => {
    const c = parseKbsConfigText(`
session_storage_type = "Redis"
[http_server]
insecure_http = true
worker_count = 2
[admin]
authorization_mode = "DenyAll"
[storage_backend]
storage_type = "LocalFs"
[storage_backend.backends.local_fs]
dir_path = "/var/lib/kbs"
[storage_backend.backends.redis]
url = "redis://127.0.0.1:6379"
`);
    expect(c.storageBackend.storageType).toBe('LocalFs');
    expect(c.sessionStorageType).toBe('Redis');
  });

  it('reads [mounted_files]', () => {
    const c = parseKbsConfigText(`${MIN}
[mounted_files]
attestation_policies = ["/etc/kbs/attestation-policy"]
resource_policy = "/etc/kbs/resource-policy"
reference_values = ["/etc/kbs/reference-values"]
resources = ["/etc/kbs/resources"]
`);
    expect(c.mountedFiles).toEqual({
      attestationPolicies: ['/etc/kbs/attestation-policy'],
      resourcePolicy: '/etc/kbs/resource-policy',
      referenceValues: ['/etc/kbs/reference-values'],
      resources: ['/etc/kbs/resources'],
    });
    expect(parseKbsConfigText(MIN).mountedFiles).toBeUndefined();
  });

  it("accepts trustee's earlier resource plugin form (type = LocalFs, dir_path)", () => {
    const c = parseKbsConfigText(`${MIN}
[[plugins]]
name = "resource"
type = "LocalFs"
dir_path = "/opt/confidential-containers/kbs/repository"
`);
    expect(c.resourcePlugin).toEqual({
      backend: 'LocalFs',
      dirPath: '/opt/confidential-containers/kbs/repository',
    });
  });

  it('reads AuthenticatedAuthorization with identity providers and ACLs', () => {
    const c = parseKbsConfigText(`
[http_server]
insecure_http = true
[admin]
authorization_mode = "AuthenticatedAuthorization"
[admin.authentication.bearer_jwt]
identity_providers = [{ issuer = "admin1", public_key_uri = "/etc/admin.pem" }, { jwk_set_uri = "file:///etc/jwks.json", audience = "kbs" }]
[[admin.authorization.regex_acl.acls]]
role = "admin1"
allowed_endpoints = "^/kbs/v0/resource/.+$"
`);
    expect(c.admin).toEqual({
      mode: 'AuthenticatedAuthorization',
      identityProviders: [
        { issuer: 'admin1', publicKeyUri: '/etc/admin.pem' },
        { jwkSetUri: 'file:///etc/jwks.json', audience: 'kbs' },
      ],
      acls: [{ role: 'admin1', allowedEndpoints: '^/kbs/v0/resource/.+$' }],
    });
  });

  describe('unknown keys', () => {
    it.each([
      ['a top-level key', `bogus = 1\n${MIN}`, 'unknown key "bogus" in the configuration is ignored'],
      [
        'a key in [http_server]',
        MIN.replace('insecure_http = true', 'insecure_http = true\nport = 1'),
        'unknown key "port" in [http_server] is ignored',
      ],
      [
        'a key in [attestation_token]',
        `${MIN}\n[attestation_token]\ntrusted_certs = []`,
        'unknown key "trusted_certs" in [attestation_token] is ignored (did you mean trusted_certs_paths?)',
      ],
      [
        'a key in [storage_backend]',
        `${MIN}\n[storage_backend]\nstorage = "Memory"`,
        'unknown key "storage" in [storage_backend] is ignored',
      ],
      [
        'session_storage_type inside a backend table',
        `${MIN}\n[storage_backend]\nstorage_type = "LocalFs"\n[storage_backend.backends.local_fs]\ndir_path = "/x"\nsession_storage_type = "Memory"`,
        'unknown key "session_storage_type" in [storage_backend.backends.local_fs] is ignored (session_storage_type is a top-level key: put it before the first [table])',
      ],
      [
        'a key in [[plugins]]',
        `${MIN}\n[[plugins]]\nname = "resource"\nfoo = 1`,
        'unknown key "foo" in [[plugins]] #1 is ignored',
      ],
      [
        'a key in [attestation_service]',
        `${MIN}\n[attestation_service]\nbogus_as_key = 1`,
        'unknown key "bogus_as_key" in [attestation_service] is ignored',
      ],
      [
        'a key in a verifier table',
        `${MIN}\n[attestation_service.verifier_config.snp_verifier]\nbogus = 1`,
        'unknown key "bogus" in [attestation_service.verifier_config.snp_verifier] is ignored',
      ],
    ])('are ignored with one warning naming key and section: %s', (_what, text, warning) => {
      expect(parseKbsConfigText(text).warnings).toEqual([warning]);
    });

    it.each([
      [
        'a key in [admin]',
        MIN.replace('"DenyAll"', '"DenyAll"\ninsecure_api = true'),
        '[admin] unknown field `insecure_api`, there are no fields (removed upstream: use authorization_mode = "InsecureAllowAll")',
      ],
      ['a key after [admin]', `${MIN}\nbogus = 1`, '[admin] unknown field `bogus`, there are no fields'],
      [
        'a key in an ACL rule',
        `[http_server]\ninsecure_http = true\n[admin]\nauthorization_mode = "AuthenticatedAuthorization"\n[admin.authentication.bearer_jwt]\nidentity_providers = [{ public_key_uri = "/k" }]\n[[admin.authorization.regex_acl.acls]]\nrole = "a"\nallowed_endpoints = "^/kbs/v0/.+$"\nextra = 1`,
        '[admin.authorization.regex_acl] acls[0] unknown field `extra`, expected `role` or `allowed_endpoints`',
      ],
      [
        'a key in an identity provider',
        `[http_server]\ninsecure_http = true\n[admin]\nauthorization_mode = "AuthenticatedAuthorization"\n[admin.authentication.bearer_jwt]\nidentity_providers = [{ public_key_uri = "/k", iss = "x" }]\n[admin.authorization.regex_acl]`,
        '[admin.authentication.bearer_jwt] identity_providers[0] unknown field `iss`, expected one of `issuer`, `audience`, `public_key_uri`, `jwk_set_uri`',
      ],
    ])(
      "are refused under [admin] (trustee's deny_unknown_fields), with serde's message: %s",
      (_what, text, msg) => {
        expect(fails(text)).toBe(`kbs-config.toml: ${msg}`);
      },
    );
  });

  describe('refuses', () => {
    it('HTTPS without a private key or certificate', () => {
      const msg = fails('[http_server]\n[admin]\nauthorization_mode = "DenyAll"');
      expect(msg).toMatch(/private_key and certificate missing/);
      expect(fails('[http_server]\nprivate_key = "/k.pem"\n[admin]\nauthorization_mode = "DenyAll"')).toMatch(
        /certificate missing/,
      );
    });

    it.each([
      ['no [http_server]', '[admin]\nauthorization_mode = "DenyAll"', /\[http_server\] is required/],
      ['no [admin]', '[http_server]\ninsecure_http = true', /\[admin\] is required/],
      [
        'no authorization_mode',
        '[http_server]\ninsecure_http = true\n[admin]',
        /authorization_mode is required/,
      ],
      ['an unknown authorization_mode', MIN.replace('DenyAll', 'AllowAll'), /not one of InsecureAllowAll/],
      [
        'a hostname socket',
        MIN.replace('insecure_http = true', 'insecure_http = true\nsockets = ["localhost:80"]'),
        /not an IP:port/,
      ],
      [
        'an unbracketed IPv6 socket',
        MIN.replace('insecure_http = true', 'insecure_http = true\nsockets = ["::1:80"]'),
        /IP:port|\[addr\]:port/,
      ],
      [
        'a string where a bool belongs',
        '[http_server]\ninsecure_http = "yes"\n[admin]\nauthorization_mode = "DenyAll"',
        /insecure_http: expected true or false/,
      ],
      [
        'a zero payload size',
        MIN.replace('insecure_http = true', 'insecure_http = true\npayload_request_size = 0'),
        /outside 1\.\.4096/,
      ],
      [
        'min TLS version above max',
        MIN.replace(
          'insecure_http = true',
          'insecure_http = true\ntls_min_version = "1.3"\ntls_max_version = "1.2"',
        ),
        /cannot be greater/,
      ],
      [
        'Redis storage without its table',
        `${MIN}\n[storage_backend]\nstorage_type = "Redis"`,
        /needs \[storage_backend\.backends\.redis\].*Redis configuration is required/,
      ],
      [
        'Redis sessions without the table',
        `session_storage_type = "Redis"\n${MIN}`,
        /Redis configuration is required/,
      ],
      [
        'Redis reference values without the table',
        `${MIN}\n[attestation_service.rvps_config]\ntype = "BuiltIn"\nstorage_type = "Redis"`,
        /rvps_config\] storage_type = "Redis" needs/,
      ],
      [
        'a Redis URL of another scheme',
        `${MIN}\n[storage_backend.backends.redis]\nurl = "http://127.0.0.1:6379"`,
        /redis:\/\/ or rediss:\/\//,
      ],
      [
        'Postgres storage without its table',
        `${MIN}\n[storage_backend]\nstorage_type = "Postgres"`,
        /needs \[storage_backend\.backends\.postgres\].*PostgreSQL configuration is required/,
      ],
      [
        'Postgres reference values without the table',
        `${MIN}\n[attestation_service.rvps_config]\ntype = "BuiltIn"\nstorage_type = "Postgres"`,
        /rvps_config\] storage_type = "Postgres" needs \[storage_backend\.backends\.postgres\]/,
      ],
      ['a Postgres port out of range', `${MIN}\n[storage_backend.backends.postgres]\nport = 70000`, /port/],
      [
        'a Postgres port that is a string',
        `${MIN}\n[storage_backend.backends.postgres]\nport = "5432"`,
        /port/,
      ],
      [
        'an empty Postgres host',
        `${MIN}\n[storage_backend.backends.postgres]\nhost = ""`,
        /host must not be empty/,
      ],
      [
        'several workers with Memory sessions',
        MIN.replace('insecure_http = true', 'insecure_http = true\nworker_count = 2'),
        /worker_count = 2 needs state shared.*the sessions.*Memory.*Redis.*or set worker_count = 1/,
      ],
      [
        'several workers with Redis sessions but Memory resources',
        `session_storage_type = "Redis"\n${MIN.replace('insecure_http = true', 'insecure_http = true\nworker_count = 2')}\n[storage_backend.backends.redis]`,
        /\[storage_backend\] storage_type, the attestation policies, the reference values are Memory/,
      ],
      [
        'a relative mounted file path',
        `${MIN}\n[mounted_files]\nresources = ["etc/kbs"]`,
        /resources: "etc\/kbs" is not an absolute path/,
      ],
      [
        'an unknown mounted_files key',
        `${MIN}\n[mounted_files]\npolicies = []`,
        /unknown key "policies" in \[mounted_files\]/,
      ],
      ['LocalFs without dir_path table', `${MIN}\n[storage_backend]\nstorage_type = "LocalFs"`, /local_fs/],
      ['another plugin', `${MIN}\n[[plugins]]\nname = "pkcs11"`, /pkcs11" is not supported/],
      [
        'a Vault resource backend',
        `${MIN}\n[[plugins]]\nname = "resource"\nstorage_backend_type = "Vault"`,
        /Vault/,
      ],
      [
        'a relative tee key pointer',
        `${MIN}\n[attestation_token]\nextra_teekey_paths = ["a/b"]`,
        /JSON pointer/,
      ],
      [
        'an unanchored ACL',
        '[http_server]\ninsecure_http = true\n[admin]\nauthorization_mode = "AuthenticatedAuthorization"\n[admin.authentication.bearer_jwt]\nidentity_providers = [{ public_key_uri = "/k" }]\n[admin.authorization.regex_acl]\nacls = [{ role = "a", allowed_endpoints = "/kbs/v0/.*" }]',
        /must be anchored/,
      ],
      ['malformed TOML', '[http_server\ninsecure_http = true', /kbs-config\.toml/],
    ])('%s', (_what, text, re) => {
      expect(fails(text)).toMatch(re);
    });
  });

  it('reads JSON when the file name says so', () => {
    const c = parseKbsConfigText(
      JSON.stringify({ http_server: { insecure_http: true }, admin: { authorization_mode: 'DenyAll' } }),
      'kbs.json',
    );
    expect(c.admin.mode).toBe('DenyAll');
  });
});
