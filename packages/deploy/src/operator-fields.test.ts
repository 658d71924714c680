// trustee-operator's fields brokerctl render writes as the operator does, on upstream's own CRs
// (test/vectors/trustee-operator): TrusteeConfig spec.tlsConfig in every profile, kbsLocalCertCacheSpec,
// kbsGpuAttestationPolicyConfigMapName; MicroservicesDeployment refused with the reason; and a misspelt
// field named with the field it likely means. The rendered deployment is run for real where it matters:
// our KBS on the modern profile, probed with openssl s_client, and the mounted GPU policy read at start.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseKbsConfigText, startKbs } from '@broker/kbs';
import pino from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify } from 'yaml';
import { parseBrokerConfig } from './broker-config.js';
import { brokerctlMain } from './brokerctl.js';
import { generateCertificates, tlsSecrets } from './certs.js';
import { BrokerConfigError, InputError } from './errors.js';
import { routeHost } from './names.js';
import { renderBrokerConfig } from './render.js';
import { brokerConfigDoc, CLUSTER_DOMAIN, sourceSecrets } from './testing/fixtures.js';
import { localKbsConfig, materialize } from './testing/kubelet.js';
import { memoryIO } from './testing/memory-io.js';
import { schemaProblems } from './testing/schemas.js';
import { opensslCipherName, parseTrusteeConfig } from './trustee-config.js';
import { parseYamlDocuments } from './yaml-io.js';

// biome-ignore lint/suspicious/noExplicitAny: rendered objects are read loosely in assertions
type Any = any;

const operatorFile = (...path: string[]) =>
  readFileSync(
    join(import.meta.dirname, '..', '..', '..', 'test', 'vectors', 'trustee-operator', ...path),
    'utf8',
  );
/** trustee-operator's e2e TrusteeConfig: Restricted, both TLS Secrets, tlsConfig profile intermediate. */
const RESTRICTED = operatorFile('tests', 'e2e', 'sample-trusteeconfig-restricted', '10-trusteeconfig.yaml');
/** trustee-operator's e2e KbsConfig with kbsLocalCertCacheSpec. */
const CERT_CACHE_KBSCONFIG = parseYaml(
  operatorFile('tests', 'e2e', 'sample-attester', '08-kbsconfig_sample.yaml'),
) as Any;
const MICROSERVICES_KBSCONFIG = parseYaml(
  operatorFile('config', 'samples', 'microservices', 'kbsconfig_sample.yaml'),
) as Any;
const ALL_IN_ONE_KBSCONFIG = parseYaml(
  operatorFile('config', 'samples', 'all-in-one', 'kbsconfig_sample.yaml'),
) as Any;

const OPERATOR_NS = 'trustee-operator-system';
let secretsYaml: string;
let httpsCertPem: string;

beforeAll(async () => {
  // The Secrets upstream's TrusteeConfig names, for its namespace's route host.
  const names = {
    namespace: OPERATOR_NS,
    routeHost: routeHost(OPERATOR_NS, CLUSTER_DOMAIN),
    httpsSecretName: 'kbs-tls-secret',
    tokenSecretName: 'kbs-attestation-token-secret',
    organization: 'Example Org',
  };
  const certs = await generateCertificates(names);
  httpsCertPem = certs.https.certPem;
  secretsYaml = (tlsSecrets(names, certs) as unknown[]).map((d) => stringify(d)).join('---\n');
}, 60_000);

/** upstream's restricted TrusteeConfig with its tlsConfig replaced. */
function withTls(tlsConfig: unknown): string {
  const doc = parseYaml(RESTRICTED) as Any;
  doc.spec.tlsConfig = tlsConfig;
  return stringify(doc);
}

async function render(files: Record<string, string>, file: string) {
  const io = memoryIO({ ...files, 'secrets.yaml': secretsYaml });
  const code = await brokerctlMain(
    ['render', file, '--cluster-domain', CLUSTER_DOMAIN, '--secrets', 'secrets.yaml'],
    io,
  );
  return { code, io, objects: code === 0 ? (parseYamlDocuments(io.stdout, 'rendered') as Any[]) : [] };
}

const kbsToml = (objects: Any[]) =>
  objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name.endsWith('-kbs-config')).data[
    'kbs-config.toml'
  ];

describe('TrusteeConfig spec.tlsConfig', () => {
  it("renders upstream's restricted TrusteeConfig with its intermediate profile, as the operator writes it", async () => {
    const r = await render({ 't.yaml': RESTRICTED }, 't.yaml');
    expect(r.code, r.io.stderr).toBe(0);
    for (const o of r.objects) expect(schemaProblems(o), `${o.kind}/${o.metadata.name}`).toEqual([]);
    const toml = kbsToml(r.objects);
    expect(toml).toContain(
      '# TLS configuration - Mozilla intermediate profile\ntls_profile = "intermediate"\n',
    );
    expect(parseKbsConfigText(toml).httpServer.tls).toEqual({ profile: 'intermediate' });
  });

  it.each(['old', 'modern'])('profile %s', async (profile) => {
    const r = await render({ 't.yaml': withTls({ profile }) }, 't.yaml');
    expect(r.code, r.io.stderr).toBe(0);
    expect(parseKbsConfigText(kbsToml(r.objects)).httpServer.tls).toEqual({ profile });
  });

  it("profile custom, trustee-operator's own example: versions, OpenSSL cipher names, groups", async () => {
    // The values of the operator's TestGetTLSConfigFromTlsConfig_Custom (internal/controller/tlsconfig_test.go).
    const r = await render(
      {
        't.yaml': withTls({
          profile: 'custom',
          minVersion: '1.2',
          maxVersion: '1.3',
          ciphers: ['TLS_AES_128_GCM_SHA256', 'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256'],
          groups: ['x25519', 'secp256r1'],
        }),
      },
      't.yaml',
    );
    expect(r.code, r.io.stderr).toBe(0);
    expect(parseKbsConfigText(kbsToml(r.objects)).httpServer.tls).toEqual({
      profile: 'custom',
      minVersion: '1.2',
      maxVersion: '1.3',
      ciphers: 'TLS_AES_128_GCM_SHA256:ECDHE-RSA-AES128-GCM-SHA256',
      groups: 'x25519:secp256r1',
    });
  });

  it("names ciphers as trustee-operator's convertSingleCipher does (its test vectors)", () => {
    const vectors: [string, string][] = [
      ['TLS_AES_128_GCM_SHA256', 'TLS_AES_128_GCM_SHA256'],
      ['TLS_CHACHA20_POLY1305_SHA256', 'TLS_CHACHA20_POLY1305_SHA256'],
      ['TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256', 'ECDHE-RSA-AES128-GCM-SHA256'],
      ['TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384', 'ECDHE-ECDSA-AES256-GCM-SHA384'],
      ['TLS_DHE_RSA_WITH_AES_128_CBC_SHA', 'DHE-RSA-AES128-CBC-SHA'],
      ['TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256', 'ECDHE-RSA-CHACHA20-POLY1305'],
      ['TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256', 'ECDHE-ECDSA-CHACHA20-POLY1305'],
      ['TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256', 'DHE-RSA-CHACHA20-POLY1305'],
      ['TLS_RSA_WITH_AES_128_CBC_SHA', 'AES128-SHA'],
      ['TLS_RSA_WITH_AES_256_GCM_SHA384', 'AES256-GCM-SHA384'],
      ['TLS_RSA_WITH_3DES_EDE_CBC_SHA', 'DES-CBC3-SHA'],
    ];
    for (const [iana, openssl] of vectors) expect(opensslCipherName(iana), iana).toBe(openssl);
  });

  it('custom settings with another profile are ignored with a warning, as the operator ignores them', () => {
    const { config, warnings } = parseTrusteeConfig(
      parseYamlDocuments(withTls({ profile: 'modern', minVersion: '1.2' }), 't')[0],
    );
    expect(config.tls).toEqual({ profile: 'modern' });
    expect(warnings).toContain(
      'TrusteeConfig spec.tlsConfig.minVersion applies to profile custom only: ignored with profile modern, as trustee-operator does',
    );
    // An empty profile is intermediate, as upstream.
    expect(parseTrusteeConfig(parseYamlDocuments(withTls({ profile: '' }), 't')[0]).config.tls).toEqual({
      profile: 'intermediate',
    });
  });

  it.each([
    [
      { profile: 'custom', minVersion: '1.1' },
      'spec.tlsConfig.minVersion: TLS 1.1: this KBS speaks TLS 1.2 and 1.3 only',
    ],
    [
      { profile: 'custom', minVersion: '1.3', maxVersion: '1.2' },
      'minVersion must not be greater than maxVersion',
    ],
    [{ profile: 'custom', maxVersion: '2.0' }, 'is not 1.0, 1.1, 1.2 or 1.3'],
    [{ profile: 'custom', ciphers: ['AES128 SHA'] }, 'spec.tlsConfig.ciphers[0]'],
    [
      { profile: 'paranoid' },
      'spec.tlsConfig.profile: "paranoid" is not one of old, intermediate, modern, custom',
    ],
  ])('refuses %j by name', (tls, message) => {
    const doc = parseYamlDocuments(withTls(tls), 't')[0];
    expect(() => parseTrusteeConfig(doc)).toThrow(InputError);
    expect(() => parseTrusteeConfig(doc)).toThrow(message);
  });

  it('the modern profile runs: our KBS on the rendered files refuses TLS 1.2 and answers TLS 1.3 (openssl s_client)', async () => {
    const r = await render({ 't.yaml': withTls({ profile: 'modern' }) }, 't.yaml');
    expect(r.code, r.io.stderr).toBe(0);
    const root = mkdtempSync(join(tmpdir(), 'deploy-tls-'));
    try {
      materialize(root, r.objects, {});
      const kbs = await startKbs(parseKbsConfigText(localKbsConfig(kbsToml(r.objects), root)), {
        logger: pino({ level: 'silent' }),
      });
      try {
        const port = kbs.addresses[0]?.port as number;
        const sClient = (version: string) =>
          new Promise<{ code: number; out: string }>((resolve) => {
            const child = execFile(
              'openssl',
              [
                's_client',
                '-connect',
                `127.0.0.1:${port}`,
                '-servername',
                routeHost(OPERATOR_NS, CLUSTER_DOMAIN),
                version,
              ],
              { timeout: 20_000 },
              (err, stdout, stderr) =>
                resolve({
                  code: err === null ? 0 : ((err as { code?: number }).code ?? 1),
                  out: `${stdout}${stderr}`,
                }),
            );
            child.stdin?.end();
          });
        const v12 = await sClient('-tls1_2');
        expect(v12.code).not.toBe(0);
        expect(v12.out).toMatch(/alert protocol version/);
        expect(v12.out).toContain('no peer certificate available');
        const v13 = await sClient('-tls1_3');
        expect(v13.out).toMatch(/TLSv1\.3/);
        // The certificate served is the TrusteeConfig's HTTPS Secret's.
        const served = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(v13.out)?.[0];
        expect(served?.replace(/\s/g, '')).toBe(httpsCertPem.trim().replace(/\s/g, ''));
      } finally {
        await kbs.close();
      }
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

const GPU_POLICY = `package policy
import rego.v1
default hardware := 97
hardware := 2 if { input.sampledevice.svn == "2" }
trust_claims := {"hardware": hardware}
`;

async function renderSpec(spec: Record<string, unknown>) {
  const { secrets } = await sourceSecrets();
  return renderBrokerConfig(parseBrokerConfig(brokerConfigDoc(spec)), {
    clusterDomain: CLUSTER_DOMAIN,
    secrets,
  });
}

describe('kbsLocalCertCacheSpec and kbsGpuAttestationPolicyConfigMapName', () => {
  it("upstream's kbsLocalCertCacheSpec: the KbsConfig carries it, each Secret is mounted at its path, VCEKs read there first", async () => {
    const cache = CERT_CACHE_KBSCONFIG.spec.kbsLocalCertCacheSpec;
    const r = await renderSpec({ kbsLocalCertCacheSpec: cache });
    const kbsConfig = r.objects.find((o) => o.kind === 'KbsConfig') as Any;
    expect(kbsConfig.spec.kbsLocalCertCacheSpec).toEqual(cache);
    for (const o of r.objects) expect(schemaProblems(o), `${o.kind}/${o.metadata.name}`).toEqual([]);
    const pod = (r.objects.find((o) => o.kind === 'Deployment') as Any).spec.template.spec;
    const mount = pod.containers[0].volumeMounts.find((m: Any) => m.mountPath === '/etc/kbs/snp/ek');
    expect(pod.volumes.find((v: Any) => v.name === mount.name).secret).toEqual({ secretName: 'vcek-secret' });
    expect(mount.readOnly).toBe(true);
    expect(
      parseKbsConfigText(r.kbsConfigToml).attestationService?.verifierConfig?.snpVerifier?.vcekSources,
    ).toEqual([
      { type: 'OfflineStore', path: '/opt/confidential-containers/attestation-service/kds-store' },
      { type: 'KDS' },
    ]);
    // Without a mountPath, trustee-operator's default directory.
    const d = await renderSpec({ kbsLocalCertCacheSpec: { secrets: [{ secretName: 'vcek-a' }] } });
    const mounts = (d.objects.find((o) => o.kind === 'Deployment') as Any).spec.template.spec.containers[0]
      .volumeMounts;
    expect(mounts.map((m: Any) => m.mountPath)).toContain(
      '/opt/confidential-containers/attestation-service/kds-store/vcek',
    );
  });

  it('a GPU policy ConfigMap joins the CPU policy in the policy directory; the KBS reads it at start', async () => {
    const r = await renderSpec({ kbsGpuAttestationPolicyConfigMapName: 'gpu-policy' });
    const kbsConfig = r.objects.find((o) => o.kind === 'KbsConfig') as Any;
    expect(kbsConfig.spec.kbsGpuAttestationPolicyConfigMapName).toBe('gpu-policy');
    for (const o of r.objects) expect(schemaProblems(o), `${o.kind}/${o.metadata.name}`).toEqual([]);
    const start = async (policy: string) => {
      const root = mkdtempSync(join(tmpdir(), 'deploy-gpu-'));
      try {
        materializeWith(r.objects, root, policy);
        const kbs = await startKbs(parseKbsConfigText(localKbsConfig(r.kbsConfigToml, root)), {
          logger: pino({ level: 'silent' }),
        });
        await kbs.close();
        return readFileSync(join(root, 'etc/kbs/attestation-policy/default_gpu.rego'), 'utf8');
      } finally {
        rmSync(root, { recursive: true, force: true });
      }
    };
    expect(await start(GPU_POLICY)).toBe(GPU_POLICY);
    // The file is applied, not just present: a GPU policy that does not compile stops the start, named.
    await expect(start('package policy\nthis is not rego')).rejects.toThrow(/default_gpu/);
  });
});

function materializeWith(objects: readonly Any[], root: string, gpuPolicy: string): void {
  materialize(root, objects, {
    'attestation-status': { status: Buffer.from('success') },
    kbsres1: { key1: Buffer.alloc(32, 7) },
    'gpu-policy': { 'default_gpu.rego': Buffer.from(gpuPolicy) },
  });
}

describe('MicroservicesDeployment', () => {
  it("upstream's microservices KbsConfig fields are refused with the reason; AllInOneDeployment is accepted", () => {
    const { kbsDeploymentType, kbsAsConfigMapName, kbsRvpsConfigMapName } = MICROSERVICES_KBSCONFIG.spec;
    const refuse = (spec: Record<string, unknown>, message: string) => {
      expect(() => parseBrokerConfig(brokerConfigDoc(spec))).toThrow(BrokerConfigError);
      expect(() => parseBrokerConfig(brokerConfigDoc(spec))).toThrow(message);
    };
    refuse(
      { kbsDeploymentType },
      'BrokerConfig spec.kbsDeploymentType: MicroservicesDeployment: brokerctl render runs the attestation service and the RVPS inside the kbs container',
    );
    refuse({ kbsAsConfigMapName }, 'spec.kbsAsConfigMapName: is a MicroservicesDeployment field');
    refuse({ kbsRvpsConfigMapName }, 'spec.kbsRvpsConfigMapName: is a MicroservicesDeployment field');
    expect(
      parseBrokerConfig(brokerConfigDoc({ kbsDeploymentType: ALL_IN_ONE_KBSCONFIG.spec.kbsDeploymentType }))
        .name,
    ).toBe('broker');
  });
});

describe('a misspelt field names the one it likely means', () => {
  const bc = (spec: Record<string, unknown>) => stringify(brokerConfigDoc(spec));
  it.each([
    [{ profileTyp: 'Permissive' }, 'BrokerConfig spec.profileTyp: unknown field (did you mean profileType?)'],
    [{ profile: 'Permissive' }, 'BrokerConfig spec.profile: unknown field (did you mean profileType?)'],
    [
      { kbsServicType: 'NodePort' },
      'BrokerConfig spec.kbsServicType: unknown field (did you mean kbsServiceType?)',
    ],
    [{ Replicas: 2 }, 'BrokerConfig spec.Replicas: unknown field (did you mean replicas?)'],
    [
      { httpsSpec: { tlsSecretname: 'kbs-https-tls' } },
      'BrokerConfig spec.httpsSpec.tlsSecretname: unknown field (did you mean tlsSecretName?)',
    ],
    [{ frobnicate: true }, 'BrokerConfig spec.frobnicate: unknown field\n'],
  ])('brokerctl render %j', async (spec, message) => {
    // Restricted without its TLS Secrets too: the misspelling is what is reported, not the missing Secret.
    const doc = bc(spec).replace(/ {4}tlsSecretName: kbs-token-tls\n/, '');
    const io = memoryIO({ 'bc.yaml': doc });
    expect(await brokerctlMain(['render', 'bc.yaml', '--cluster-domain', CLUSTER_DOMAIN], io)).toBe(1);
    expect(io.stderr).toContain(`brokerctl: ${message}`);
  });

  it('a TrusteeConfig field the API server would prune is named in the warning with its likely field', () => {
    const { warnings } = parseTrusteeConfig(parseYamlDocuments(withTls({ profil: 'modern' }), 't')[0]);
    expect(warnings).toContain(
      'TrusteeConfig spec.tlsConfig.profil is not a TrusteeConfig field (did you mean profile?): ignored, as the API server prunes it',
    );
  });
});
