import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CdhConfigError,
  credentialsFromKernelCmdline,
  DEFAULT_AA_SOCKET_ADDR,
  DEFAULT_CDH_SOCKET_ADDR,
  DEFAULT_IMAGE_WORK_DIR,
  defaultCdhConfig,
  imageConfigFromKernelCmdline,
  kbcFromAaKbcParams,
  loadCdhConfig,
  MAX_CONFIG_BYTES,
  parseCdhConfig,
  parseLogLevel,
} from './config.js';

const FIXTURE = vector('guest-components/configs/confidential-data-hub.example.config.toml');

let certPem: string;
let fixtureText: string;
beforeAll(async () => {
  fixtureText = await readFile(FIXTURE, 'utf8');
  // The fixture's kbs_cert is a real certificate (an AMD VCEK); reuse it as "the service's PEM".
  certPem = /kbs_cert = """\n([\s\S]*?)"""/.exec(fixtureText)?.[1] as string;
});

/** The spec's initdata `cdh.toml`, written the way the initdata table lists it. */
function specCdhToml(cert: string): string {
  return `socket = 'unix:///run/confidential-containers/cdh.sock'
credentials = []

[kbc]
name = 'cc_kbc'
url = 'https://kbs-trustee-operator-system.apps.example.com'
kbs_cert = """
${cert}"""

[image]
image_security_policy_uri = 'kbs:///default/security-policy/osc'
`;
}

function configError(f: () => unknown): CdhConfigError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(CdhConfigError);
    return e as CdhConfigError;
  }
  throw new Error('expected a CdhConfigError');
}

describe('upstream example config', () => {
  it('parses every key', () => {
    const c = parseCdhConfig(fixtureText);
    expect(c.socket).toBe('unix:///run/confidential-containers/cdh.sock');
    expect(c.socketAddress).toEqual({ path: '/run/confidential-containers/cdh.sock' });
    expect(c.aa.aaSocket).toBe(DEFAULT_AA_SOCKET_ADDR);
    expect(c.aa.aaAddress).toEqual({
      path: '/run/confidential-containers/attestation-agent/attestation-agent.sock',
    });
    expect(c.kbc.name).toBe('cc_kbc');
    expect(c.kbc.url).toBe('http://example.io:8080');
    expect(c.kbc.kbsCert).toContain('-----BEGIN CERTIFICATE-----');
    expect(c.credentials).toEqual([
      {
        path: '/run/confidential-containers/cdh/kbs/kms-credential/aliyun/ecsRamRole.json',
        resourceUri: 'kbs:///default/aliyun/ecs_ram_role',
      },
      { path: '/run/confidential-containers/cdh/kbs/test/file', resourceUri: 'kbs:///default/test/file' },
    ]);
    expect(c.skipSealedSecretVerification).toBe(false);
    expect(c.log.level).toBe('info');
    // In the example, these two keys follow `[[image.registry_config.registry.mirror]]`, so TOML puts
    // them in that mirror table, where upstream ignores them too.
    expect(c.unknownKeys).toEqual([
      'image.registry_config.registry[2].mirror[0].extra_root_certificates',
      'image.registry_config.registry[2].mirror[0].work_dir',
    ]);
    const image = c.image;
    expect(image.maxConcurrentLayerDownloadsPerImage).toBe(3);
    expect(image.sigstoreConfigUri).toBe('kbs:///default/sigstore-config/test');
    expect(image.imageSecurityPolicyUri).toBe('kbs:///default/security-policy/test');
    expect(image.imageSecurityPolicy).toBeNull();
    expect(image.authenticatedRegistryCredentialsUri).toBe('kbs:///default/credential/test');
    expect(image.registryConfigurationUri).toBe('kbs:///default/registry-configuration/test');
    expect(image.workDir).toBe(DEFAULT_IMAGE_WORK_DIR);
    expect(image.extraRootCertificates).toEqual([]);
    expect(image.imagePullProxy).toEqual({
      httpsProxy: 'http://127.0.0.1:5432',
      httpProxy: 'http://127.0.0.1:5432',
      noProxy: '192.168.0.1,localhost',
    });
    expect(image.registryConfig).toEqual({
      unqualifiedSearchRegistries: ['docker.io', 'example1.com'],
      registry: [
        { prefix: 'example.com/banned', insecure: false, blocked: true, location: '', mirror: [] },
        {
          prefix: 'example.com/foo',
          insecure: false,
          blocked: false,
          location: 'internal-registry-for-example.com/bar',
          mirror: [
            { location: 'example-mirror-0.local/mirror-for-foo', insecure: false },
            { location: 'example-mirror-1.local/mirrors/foo', insecure: true },
          ],
        },
        {
          prefix: '',
          insecure: false,
          blocked: false,
          location: 'docker.io',
          mirror: [{ location: '123456.mirror.aliyuncs.com', insecure: false }],
        },
      ],
    });
  });
});

describe("the spec's initdata cdh.toml", () => {
  it('works unchanged, including credentials = []', () => {
    const c = parseCdhConfig(specCdhToml(certPem));
    expect(c.socket).toBe(DEFAULT_CDH_SOCKET_ADDR);
    expect(c.credentials).toEqual([]);
    expect(c.kbc).toEqual({
      name: 'cc_kbc',
      url: 'https://kbs-trustee-operator-system.apps.example.com',
      kbsCert: `${certPem}`,
    });
    expect(c.image.imageSecurityPolicyUri).toBe('kbs:///default/security-policy/osc');
    expect(c.image.workDir).toBe(DEFAULT_IMAGE_WORK_DIR);
    expect(c.aa.aaSocket).toBe(DEFAULT_AA_SOCKET_ADDR);
    expect(c.unknownKeys).toEqual([]);
  });
});

describe("upstream's config test cases", () => {
  it('reads offline_fs_kbc with an empty url and cert, and the image section', () => {
    const c = parseCdhConfig(`
socket = "unix:///run/confidential-containers/cdh.sock"
[aa]
aa_socket = "unix:///run/confidential-containers/attestation-agent/attestation-agent.sock"
[kbc]
name = "offline_fs_kbc"
url = ""
kbs_cert = ""
[image]
max_concurrent_layer_downloads_per_image = 3
extra_root_certificates = ["cert1", "cert2"]
[image.registry_config]
unqualified-search-registries = ["docker.io", "example1.com"]
[[image.registry_config.registry]]
prefix = "example.com/foo"
location = "internal-registry-for-example.com/bar"
[[image.registry_config.registry.mirror]]
location = "example-mirror-0.local/mirror-for-foo"
[image.image_pull_proxy]
https_proxy = "http://127.0.0.1:8080"
`);
    expect(c.kbc).toEqual({ name: 'offline_fs_kbc', url: '', kbsCert: null });
    expect(c.image.extraRootCertificates).toEqual(['cert1', 'cert2']);
    expect(c.image.imagePullProxy).toEqual({
      httpsProxy: 'http://127.0.0.1:8080',
      httpProxy: null,
      noProxy: null,
    });
    expect(c.image.registryConfig?.registry[0]?.mirror).toEqual([
      { location: 'example-mirror-0.local/mirror-for-foo', insecure: false },
    ]);
  });

  it('refuses a [[credentials]] entry without its keys', () => {
    const e = configError(() =>
      parseCdhConfig(
        'socket = "unix:///x.sock"\n[kbc]\nname = "offline_fs_kbc"\nurl = ""\n[[credentials]]\n',
      ),
    );
    expect(e.message).toBe('credentials[0].resource_uri is required');
  });

  it('fills every default from a minimal [kbc]', () => {
    const c = parseCdhConfig('[kbc]\nname = "offline_fs_kbc"\n');
    expect(c.socket).toBe(DEFAULT_CDH_SOCKET_ADDR);
    expect(c.aa.aaSocket).toBe(DEFAULT_AA_SOCKET_ADDR);
    expect(c.kbc).toEqual({ name: 'offline_fs_kbc', url: '', kbsCert: null });
    expect(c.credentials).toEqual([]);
    expect(c.skipSealedSecretVerification).toBe(false);
    expect(c.log.level).toBe('info');
    expect(c.image.imageSecurityPolicyUri).toBeNull();
    expect(c.image.maxConcurrentLayerDownloadsPerImage).toBe(3);
  });

  it('accepts unknown keys (no deny_unknown_fields upstream) and reports them', () => {
    const c = parseCdhConfig(
      '[log]\nlevel = "warn"\n[kbc]\nname = "offline_fs_kbc"\nextra = 1\n[image]\nsome_undefined_field = "unknown value"\n' +
        '[image.registry_config]\n[[image.registry_config.registry]]\nlocation = "a"\nweird = true\n' +
        '[aa]\naa_sockett = "x"\n',
    );
    expect(c.log.level).toBe('warn');
    expect([...c.unknownKeys].sort()).toEqual([
      'aa.aa_sockett',
      'image.registry_config.registry[0].weird',
      'image.some_undefined_field',
      'kbc.extra',
    ]);
  });

  it('keeps an inline image policy', () => {
    const c = parseCdhConfig(
      '[kbc]\nname = "offline_fs_kbc"\n[image]\nimage_security_policy = """\n{\n    "default": [\n        {\n            "type": "reject"\n        }\n    ]\n}\n"""\n',
    );
    expect(c.image.imageSecurityPolicy).toBe(
      '{\n    "default": [\n        {\n            "type": "reject"\n        }\n    ]\n}\n',
    );
  });
});

describe('refusals', () => {
  it('needs [kbc] and a known KBC name, with upstream’s wording', () => {
    expect(configError(() => parseCdhConfig('socket = "unix:///x"')).message).toMatch(
      /\[kbc\] section is missing/,
    );
    expect(configError(() => parseCdhConfig('[kbc]\nurl = "http://x"')).message).toBe('kbc.name is required');
    expect(configError(() => parseCdhConfig('[kbc]\nname = "sample_kbc"')).message).toBe(
      'unknown kbc name sample_kbc, only support `cc_kbc`(feature `kbs`) and `offline_fs_kbc`.',
    );
  });

  it('refuses wrong types instead of defaulting', () => {
    expect(configError(() => parseCdhConfig('socket = 1\n[kbc]\nname = "cc_kbc"')).message).toBe(
      'socket: expected a string, found number 1',
    );
    expect(
      configError(() => parseCdhConfig('skip_sealed_secret_verification = "true"\n[kbc]\nname = "cc_kbc"'))
        .message,
    ).toBe('skip_sealed_secret_verification: expected true or false, found string "true"');
    expect(configError(() => parseCdhConfig('credentials = {}\n[kbc]\nname = "cc_kbc"')).message).toBe(
      'credentials: expected an array of tables, found a table',
    );
    expect(configError(() => parseCdhConfig('credentials = [1]\n[kbc]\nname = "cc_kbc"')).message).toBe(
      'credentials[0]: expected a table, found number 1',
    );
    expect(
      configError(() =>
        parseCdhConfig('[kbc]\nname = "cc_kbc"\n[image]\nmax_concurrent_layer_downloads_per_image = 0'),
      ).message,
    ).toMatch(/outside 1\.\.1024/);
    expect(
      configError(() => parseCdhConfig('[kbc]\nname = "cc_kbc"\n[image]\nextra_root_certificates = "pem"'))
        .message,
    ).toMatch(/expected an array of strings/);
  });

  it('refuses a socket that is not unix://, as upstream', () => {
    expect(
      configError(() => parseCdhConfig('socket = "tcp://127.0.0.1:1"\n[kbc]\nname = "cc_kbc"')).message,
    ).toBe('socket address scheme is not expected');
    expect(configError(() => parseCdhConfig('socket = "unix://"\n[kbc]\nname = "cc_kbc"')).message).toMatch(
      /^socket: invalid ttrpc address/,
    );
    expect(
      configError(() => parseCdhConfig('[aa]\naa_socket = "http://x"\n[kbc]\nname = "cc_kbc"')).message,
    ).toMatch(/^aa\.aa_socket: /);
  });

  it('refuses a KBS URL that is not http(s) and a certificate that does not parse', () => {
    expect(configError(() => parseCdhConfig('[kbc]\nname = "cc_kbc"\nurl = "ftp://x"')).message).toMatch(
      /not an http\(s\) URL/,
    );
    expect(configError(() => parseCdhConfig('[kbc]\nname = "cc_kbc"\nurl = "not a url"')).message).toMatch(
      /is not a URL/,
    );
    expect(configError(() => parseCdhConfig('[kbc]\nname = "cc_kbc"\nkbs_cert = "hello"')).message).toBe(
      'kbc.kbs_cert: no PEM certificate found',
    );
    expect(
      configError(() =>
        parseCdhConfig(
          '[kbc]\nname = "cc_kbc"\nkbs_cert = "-----BEGIN CERTIFICATE-----\\nAAAA\\n-----END CERTIFICATE-----"',
        ),
      ).message,
    ).toMatch(/^kbc\.kbs_cert: not a valid certificate/);
  });

  it('refuses two different resources for one credential path, keeps exact duplicates once', () => {
    const two = (a: string, b: string) =>
      `[kbc]\nname = "cc_kbc"\n[[credentials]]\npath = "/p"\nresource_uri = "${a}"\n[[credentials]]\npath = "/p"\nresource_uri = "${b}"\n`;
    expect(configError(() => parseCdhConfig(two('kbs:///a/b/c', 'kbs:///a/b/d'))).message).toMatch(
      /credential path \/p is given twice/,
    );
    expect(parseCdhConfig(two('kbs:///a/b/c', 'kbs:///a/b/c')).credentials).toEqual([
      { path: '/p', resourceUri: 'kbs:///a/b/c' },
    ]);
  });

  it('refuses garbage, truncated and oversize input', () => {
    expect(configError(() => parseCdhConfig('[kbc\nname = "cc_kbc"')).message).toMatch(/^invalid config: /);
    expect(configError(() => parseCdhConfig('\u0000\u0001\u0002')).message).toMatch(/^invalid config: /);
    expect(configError(() => parseCdhConfig('[kbc]\nname = "cc_')).message).toMatch(/^invalid config: /);
    expect(configError(() => parseCdhConfig('x'.repeat(MAX_CONFIG_BYTES + 1))).message).toMatch(
      /larger than/,
    );
    expect(configError(() => parseCdhConfig('[1, 2]', 'json')).message).toMatch(
      /expected a table, found an array/,
    );
    expect(configError(() => parseCdhConfig('{"kbc":', 'json')).message).toMatch(/^invalid config: /);
  });
});

describe('log levels', () => {
  it('accepts upstream level names and EnvFilter directives', () => {
    expect(parseLogLevel('debug')).toBe('debug');
    expect(parseLogLevel('WARN')).toBe('warn');
    expect(parseLogLevel('info,ttrpc=warn')).toBe('info');
    expect(parseLogLevel('ttrpc=warn')).toBe('info');
    expect(parseLogLevel('off')).toBe('off');
    expect(() => parseLogLevel('loud')).toThrow('Invalid log level: loud');
    expect(configError(() => parseCdhConfig('[kbc]\nname = "cc_kbc"\n[log]\nlevel = "loud"')).message).toBe(
      'Invalid log level: loud',
    );
  });
});

describe('values read outside the file', () => {
  it('takes the registry credentials URI from the env var, as upstream', () => {
    const c = parseCdhConfig(
      '[kbc]\nname = "offline_fs_kbc"\n[image]\nauthenticated_registry_credentials_uri = "kbs:///default/auth/1"\n',
      'toml',
      { env: { CDH_DEFAULT_IMAGE_AUTHENTICATED_REGISTRY_CREDENTIALS: 'file:///test' } },
    );
    expect(c.image.authenticatedRegistryCredentialsUri).toBe('file:///test');
    expect(
      parseCdhConfig('[kbc]\nname = "offline_fs_kbc"\n', 'toml', { env: {} }).image
        .authenticatedRegistryCredentialsUri,
    ).toBeNull();
  });

  it('appends cdh.kbs_resources credentials from the kernel command line', () => {
    const cmdline =
      'console=ttyS0 cdh.kbs_resources=kbs:///default/key/1::/run/confidential-containers/cdh/kbs/k1,bogus,kbs:///default/key/2::/run/x quiet\n';
    expect(credentialsFromKernelCmdline(cmdline)).toEqual([
      { resourceUri: 'kbs:///default/key/1', path: '/run/confidential-containers/cdh/kbs/k1' },
      { resourceUri: 'kbs:///default/key/2', path: '/run/x' },
    ]);
    expect(credentialsFromKernelCmdline('quiet')).toEqual([]);
    const c = parseCdhConfig(
      '[kbc]\nname = "cc_kbc"\n[[credentials]]\npath = "/a"\nresource_uri = "kbs:///r/t/a"\n',
      'toml',
      { kernelCmdline: 'cdh.kbs_resources=kbs:///r/t/b::/b' },
    );
    expect(c.credentials.map((x) => x.path)).toEqual(['/a', '/b']);
  });

  it('reads image settings from the kernel command line when [image] is absent', () => {
    const cmdline =
      'agent.image_registry_auth=kbs:///default/credential/test agent.image_policy_file=kbs:///default/security-policy/test agent.https_proxy=http://p:1';
    expect(imageConfigFromKernelCmdline(cmdline)).toMatchObject({
      authenticatedRegistryCredentialsUri: 'kbs:///default/credential/test',
      imageSecurityPolicyUri: null, // only with agent.enable_signature_verification=true
      imagePullProxy: { httpsProxy: 'http://p:1', httpProxy: null, noProxy: null },
    });
    expect(
      imageConfigFromKernelCmdline(`${cmdline} agent.enable_signature_verification=true`)
        .imageSecurityPolicyUri,
    ).toBe('kbs:///default/security-policy/test');
    const c = parseCdhConfig('[kbc]\nname = "cc_kbc"\n', 'toml', { kernelCmdline: cmdline });
    expect(c.image.authenticatedRegistryCredentialsUri).toBe('kbs:///default/credential/test');
    // With [image] present the command line is not consulted.
    const d = parseCdhConfig('[kbc]\nname = "cc_kbc"\n[image]\n', 'toml', { kernelCmdline: cmdline });
    expect(d.image.authenticatedRegistryCredentialsUri).toBeNull();
  });

  it('without a file: the KBC from AA_KBC_PARAMS, then the kernel command line, else offline_fs_kbc', () => {
    expect(
      kbcFromAaKbcParams({ AA_KBC_PARAMS: 'cc_kbc::http://kbs:8080' }, 'agent.aa_kbc_params=x::y'),
    ).toEqual({
      name: 'cc_kbc',
      url: 'http://kbs:8080',
      kbsCert: null,
    });
    expect(kbcFromAaKbcParams({}, 'agent.aa_kbc_params=cc_kbc::https://k')).toEqual({
      name: 'cc_kbc',
      url: 'https://k',
      kbsCert: null,
    });
    expect(kbcFromAaKbcParams({}, '')).toEqual({ name: 'offline_fs_kbc', url: '', kbsCert: null });
    expect(() => kbcFromAaKbcParams({ AA_KBC_PARAMS: 'cc_kbc' }, '')).toThrow(
      'illegal aa_kbc_params format: cc_kbc',
    );
    expect(() => kbcFromAaKbcParams({ AA_KBC_PARAMS: 'a::b::c' }, '')).toThrow(/illegal aa_kbc_params/);
    const c = defaultCdhConfig({ env: { AA_KBC_PARAMS: 'cc_kbc::http://kbs:8080' }, kernelCmdline: '' });
    expect(c.socket).toBe(DEFAULT_CDH_SOCKET_ADDR);
    expect(c.kbc.url).toBe('http://kbs:8080');
    expect(c.credentials).toEqual([]);
  });
});

describe('loadCdhConfig', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cdh-config-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('reads TOML, and JSON for a .json file', async () => {
    await writeFile(join(dir, 'cdh.toml'), specCdhToml(certPem));
    expect((await loadCdhConfig(join(dir, 'cdh.toml'), { env: {}, kernelCmdline: '' })).kbc.name).toBe(
      'cc_kbc',
    );
    await writeFile(
      join(dir, 'cdh.json'),
      JSON.stringify({
        socket: 'unix:///tmp/x.sock',
        kbc: { name: 'cc_kbc', url: 'http://k' },
        credentials: [],
      }),
    );
    const c = await loadCdhConfig(join(dir, 'cdh.json'), { env: {}, kernelCmdline: '' });
    expect(c.socketAddress.path).toBe('/tmp/x.sock');
  });

  it('names the file in errors', async () => {
    await expect(loadCdhConfig(join(dir, 'missing.toml'), { env: {}, kernelCmdline: '' })).rejects.toThrow(
      /^failed to read config file .*missing\.toml: /,
    );
    await writeFile(join(dir, 'bad.toml'), '[kbc]\nname = 3\n');
    await expect(loadCdhConfig(join(dir, 'bad.toml'), { env: {}, kernelCmdline: '' })).rejects.toThrow(
      /bad\.toml: kbc\.name: expected a string, found number 3$/,
    );
    await writeFile(join(dir, 'big.toml'), Buffer.alloc(MAX_CONFIG_BYTES + 1, 0x20));
    await expect(loadCdhConfig(join(dir, 'big.toml'), { env: {}, kernelCmdline: '' })).rejects.toThrow(
      /larger than/,
    );
  });

  it('uses the defaults without a path', async () => {
    const c = await loadCdhConfig(undefined, {
      env: { AA_KBC_PARAMS: 'offline_fs_kbc::' },
      kernelCmdline: '',
    });
    expect(c.kbc).toEqual({ name: 'offline_fs_kbc', url: '', kbsCert: null });
  });
});
