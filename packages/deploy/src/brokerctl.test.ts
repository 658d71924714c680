import { DEFAULT_POLICIES } from '@broker/attestation';
import { parseKbsConfigText } from '@broker/kbs';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parseBrokerConfig } from './broker-config.js';
import { brokerctlMain } from './brokerctl.js';
import { BrokerConfigError } from './errors.js';
import { brokerConfigDoc, CLUSTER_DOMAIN, NAMESPACE } from './testing/fixtures.js';
import { memoryIO } from './testing/memory-io.js';
import { schemaProblems } from './testing/schemas.js';
import { MAX_YAML_BYTES, parseYamlDocuments } from './yaml-io.js';

// biome-ignore lint/suspicious/noExplicitAny: test access to nested plain JSON
type Any = any;

async function run(argv: string[], files: Record<string, string> = {}) {
  const io = memoryIO(files);
  const code = await brokerctlMain(argv, io);
  return { code, io };
}

describe('brokerctl', () => {
  it('certs → render: the full path from nothing to applicable YAML', async () => {
    const bc = stringify(brokerConfigDoc());
    const certs = await run(['certs', 'bc.yaml', '--cluster-domain', CLUSTER_DOMAIN, '--out', 'out'], {
      'bc.yaml': bc,
    });
    expect(certs.code).toBe(0);
    expect([...certs.io.files.keys()].sort()).toEqual(
      [
        'bc.yaml',
        'out/https.crt',
        'out/https.key',
        'out/secrets.yaml',
        'out/token.crt',
        'out/token.key',
      ].sort(),
    );
    expect(certs.io.modes.get('out/https.key')).toBe(0o600);
    expect(certs.io.modes.get('out/token.key')).toBe(0o600);
    const secrets = parseYamlDocuments(certs.io.stdout, 'stdout') as Any[];
    expect(secrets.map((s) => `${s.metadata.namespace}/${s.metadata.name}`)).toEqual([
      `${NAMESPACE}/kbs-https-tls`,
      `${NAMESPACE}/kbs-token-tls`,
    ]);

    // Secrets given as a separate file…
    const r1 = await run(['render', 'bc.yaml', '--cluster-domain', CLUSTER_DOMAIN, '--secrets', 's.yaml'], {
      'bc.yaml': bc,
      's.yaml': certs.io.stdout,
    });
    expect(r1.io.stderr).toBe('');
    expect(r1.code).toBe(0);
    // …or in the same stream give the same output.
    const r2 = await run(['render', 'all.yaml', `--cluster-domain=${CLUSTER_DOMAIN}`], {
      'all.yaml': `${bc}---\n${certs.io.stdout}`,
    });
    expect(r2.io.stderr).toBe('');
    expect(r2.io.stdout).toBe(r1.io.stdout);
    const objects = parseYamlDocuments(r1.io.stdout, 'rendered') as Any[];
    expect(objects).toHaveLength(15);
    for (const o of objects) expect(schemaProblems(o), `${o.kind}/${o.metadata.name}`).toEqual([]);
    const cm = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'broker-kbs-config');
    expect(parseKbsConfigText(cm.data['kbs-config.toml']).admin.mode).toBe('AuthenticatedAuthorization');
  });

  it('render with postgresSpec: a URL Secret in the input stream stays out of the output', async () => {
    const doc = brokerConfigDoc({
      profileType: 'Permissive',
      httpsSpec: null,
      attestationTokenVerificationSpec: null,
      replicas: 2,
      postgresSpec: { urlSecretName: 'pg-url' },
    });
    const urlSecret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'pg-url', namespace: NAMESPACE },
      stringData: { url: 'postgresql://kbs:pg-pass-7f3a@db.internal:5432/kbs' },
    };
    const r = await run(['render', 'all.yaml', '--cluster-domain', CLUSTER_DOMAIN], {
      'all.yaml': `${stringify(doc)}---\n${stringify(urlSecret)}`,
    });
    expect(r.io.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.io.stdout).not.toContain('pg-pass-7f3a');
    expect(r.io.stdout).not.toContain(Buffer.from(urlSecret.stringData.url).toString('base64'));
    const objects = parseYamlDocuments(r.io.stdout, 'rendered') as Any[];
    expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
    const d = objects.find((o) => o.kind === 'Deployment');
    expect(d.spec.replicas).toBe(2);
    expect(d.spec.template.spec.containers[0].env).toContainEqual({
      name: 'POSTGRES_URL',
      valueFrom: { secretKeyRef: { name: 'pg-url', key: 'url' } },
    });
  });

  it('render --image and --crd-group', async () => {
    const doc = brokerConfigDoc({
      profileType: 'Permissive',
      httpsSpec: null,
      attestationTokenVerificationSpec: null,
    });
    doc.apiVersion = 'kbs.example.org/v1alpha1';
    const r = await run(
      [
        'render',
        'bc.yaml',
        '--cluster-domain',
        CLUSTER_DOMAIN,
        '--crd-group',
        'kbs.example.org',
        '--image',
        'reg.example/kbs@sha256:ab',
      ],
      {
        'bc.yaml': stringify(doc),
      },
    );
    expect(r.code).toBe(0);
    const objects = parseYamlDocuments(r.io.stdout, 'rendered') as Any[];
    expect(objects.find((o) => o.kind === 'KbsConfig').apiVersion).toBe('kbs.example.org/v1alpha1');
    expect(objects.find((o) => o.kind === 'Deployment').spec.template.spec.containers[0].image).toBe(
      'reg.example/kbs@sha256:ab',
    );
    const mismatch = await run(
      ['render', 'bc.yaml', '--cluster-domain', CLUSTER_DOMAIN, '--crd-group', 'other.example.org'],
      {
        'bc.yaml': stringify(doc),
      },
    );
    expect(mismatch.code).toBe(1);
    expect(mismatch.io.stderr).toContain('apiVersion: must be other.example.org/v1alpha1');
  });

  it("attestation-policy prints broker's five-PCR policy, the KBS's broker_default_cpu", async () => {
    const r = await run(['attestation-policy']);
    expect(r.code).toBe(0);
    expect(r.io.stdout).toBe(DEFAULT_POLICIES.broker_default_cpu);
    expect(r.io.stdout).not.toBe(DEFAULT_POLICIES.default_cpu);
    expect((await run(['attestation-policy', 'x'])).code).toBe(2);
  });

  it('crds prints both CRDs', async () => {
    const r = await run(['crds', '--crd-group', 'kbs.example.org']);
    expect(r.code).toBe(0);
    const crds = parseYamlDocuments(r.io.stdout, 'crds') as Any[];
    expect(crds.map((c) => c.metadata.name)).toEqual([
      'brokerconfigs.kbs.example.org',
      'kbsconfigs.kbs.example.org',
    ]);
    expect((await run(['crds', '--crd-group', 'nodot'])).code).toBe(2);
  });

  it('cert-manager prints the Issuer and both Certificates', async () => {
    const r = await run(['cert-manager', '--namespace', 'ns1', '--route-host', 'kbs.example.test']);
    expect(r.code).toBe(0);
    const objs = parseYamlDocuments(r.io.stdout, 'cm') as Any[];
    expect(objs.map((o) => o.metadata.name)).toEqual(['kbs-issuer', 'kbs-https', 'kbs-token']);
    expect(objs[1].spec.dnsNames).toEqual(['kbs.example.test']);
    for (const o of objs) expect(schemaProblems(o)).toEqual([]);
    const noNs = await run(['certs', '--route-host', 'kbs.example.test']);
    expect(noNs.code).toBe(0);
    const secrets = parseYamlDocuments(noNs.io.stdout, 'certs') as Any[];
    expect(secrets.map((x) => x.metadata)).toEqual([{ name: 'kbs-https-tls' }, { name: 'kbs-token-tls' }]);
    expect((await run(['certs', '--route-host', 'kbs.example.test', '--namespace', 'Bad NS'])).code).toBe(1);
    expect((await run(['certs', '--namespace', 'ns'])).code).toBe(2);
  });

  it('add-secret prints the patch, the commands and the restart step', async () => {
    const r = await run(['add-secret', 'kbsres2', '--config', 'broker', '--namespace', NAMESPACE]);
    expect(r.code).toBe(0);
    const lines = r.io.stdout.split('\n');
    expect(lines[1]).toBe('[{"op":"add","path":"/spec/kbsSecretResources/-","value":"kbsres2"}]');
    expect(r.io.stdout).toContain(`kubectl rollout restart deployment/kbs-deployment -n '${NAMESPACE}'`);
    const json = await run([
      'add-secret',
      'kbsres2',
      '--config',
      'broker',
      '--namespace',
      NAMESPACE,
      '--json',
    ]);
    expect(JSON.parse(json.io.stdout)).toEqual([
      { op: 'add', path: '/spec/kbsSecretResources/-', value: 'kbsres2' },
    ]);
  });

  it('usage errors exit 2, input errors exit 1, with a message', async () => {
    expect((await run([])).code).toBe(2);
    expect((await run(['--help'])).code).toBe(0);
    expect((await run(['frobnicate'])).code).toBe(2);
    expect((await run(['render', 'bc.yaml', '--clusterdomain', 'x'])).io.stderr).toContain(
      "unknown option '--clusterdomain'",
    );
    expect((await run(['render', 'bc.yaml'], { 'bc.yaml': stringify(brokerConfigDoc()) })).code).toBe(2);
    const missing = await run(['render', 'nope.yaml', '--cluster-domain', CLUSTER_DOMAIN]);
    expect(missing.code).toBe(1);
    expect(missing.io.stderr).toContain('cannot read nope.yaml');
    const noSecrets = await run(['render', 'bc.yaml', '--cluster-domain', CLUSTER_DOMAIN], {
      'bc.yaml': stringify(brokerConfigDoc()),
    });
    expect(noSecrets.code).toBe(1);
    expect(noSecrets.io.stderr).toContain('names Secret kbs-https-tls, which was not given');
    expect((await run(['add-secret', 'x'])).code).toBe(2);
  });

  it('refuses hostile and malformed YAML', async () => {
    const cases: [string, string | Buffer, RegExp][] = [
      ['syntax', 'apiVersion: [unclosed', /not valid YAML/],
      ['duplicate key', 'kind: BrokerConfig\nkind: BrokerConfig\n', /not valid YAML/],
      [
        'alias bomb',
        `a: &a [x, x, x, x, x, x, x, x, x, x]\n${Array.from(
          { length: 12 },
          (_, i) =>
            `b${i}: &b${i} [${Array(10)
              .fill(i === 0 ? '*a' : `*b${i - 1}`)
              .join(', ')}]`,
        ).join('\n')}\n`,
        /alias|Excessive|YAML/i,
      ],
      ['too large', `# ${'x'.repeat(MAX_YAML_BYTES)}\n`, /larger than/],
      ['not utf-8', Buffer.from([0x6b, 0x3a, 0x20, 0xff, 0xfe]), /not UTF-8/],
      [
        'two configs',
        `${stringify(brokerConfigDoc())}---\n${stringify(brokerConfigDoc({}, 'other'))}`,
        /expected one BrokerConfig/,
      ],
      [
        'other kinds',
        'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n',
        /only BrokerConfig \(or TrusteeConfig\) and Secret/,
      ],
      ['a list', '- 1\n- 2\n', /only BrokerConfig \(or TrusteeConfig\) and Secret/],
      ['empty', '', /expected one BrokerConfig/],
    ];
    for (const [what, text, message] of cases) {
      const io = memoryIO({ 'bc.yaml': text });
      const code = await brokerctlMain(['render', 'bc.yaml', '--cluster-domain', CLUSTER_DOMAIN], io);
      expect(code, what).toBe(1);
      expect(io.stderr, what).toMatch(message);
    }
  });
});

describe('parseBrokerConfig', () => {
  it('reads postgresSpec and redisSpec, the Secret keys defaulting to url', () => {
    const cfg = parseBrokerConfig(
      brokerConfigDoc({
        replicas: 4,
        redisSpec: { urlSecretName: 'redis-url' },
        postgresSpec: { urlSecretName: 'pg-url' },
      }),
    );
    expect(cfg.replicas).toBe(4);
    expect(cfg.redis).toEqual({ urlSecretName: 'redis-url', urlSecretKey: 'url' });
    expect(cfg.postgres).toEqual({ urlSecretName: 'pg-url', urlSecretKey: 'url' });
    expect(
      parseBrokerConfig(brokerConfigDoc({ replicas: 3, postgresSpec: { urlSecretName: 'p' } })).postgres,
    ).toEqual({
      urlSecretName: 'p',
      urlSecretKey: 'url',
    });
    expect(parseBrokerConfig(brokerConfigDoc()).postgres).toBeUndefined();
  });

  it('reads the spec fields, with defaults', () => {
    const cfg = parseBrokerConfig({
      apiVersion: 'broker.confidentialcontainers.org/v1alpha1',
      kind: 'BrokerConfig',
      metadata: { name: 'b', namespace: 'ns', labels: { team: 'x' } },
      spec: { httpsSpec: { tlsSecretName: 'h' }, attestationTokenVerificationSpec: { tlsSecretName: 't' } },
    });
    expect(cfg).toEqual({
      crdGroup: 'broker.confidentialcontainers.org',
      name: 'b',
      namespace: 'ns',
      labels: { team: 'x' },
      profileType: 'Restricted',
      kbsServiceType: 'ClusterIP',
      httpsTlsSecretName: 'h',
      tokenTlsSecretName: 't',
      kbsSecretResources: [],
      replicas: 1,
    });
  });

  it('refuses unknown fields, naming them, at every level', () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ ...brokerConfigDoc(), extra: 1 }, 'BrokerConfig extra: unknown field'],
      [
        brokerConfigDoc({ profile: 'Restricted' }),
        'BrokerConfig spec.profile: unknown field (did you mean profileType?)',
      ],
      [
        brokerConfigDoc({ httpsSpec: { tlsSecretName: 'a', secretName: 'b' } }),
        'BrokerConfig spec.httpsSpec.secretName: unknown field',
      ],
      [
        brokerConfigDoc({ redisSpec: { urlSecretName: 'r', url: 'redis://x' } }),
        'BrokerConfig spec.redisSpec.url: unknown field',
      ],
      [
        brokerConfigDoc({ postgres: { urlSecretName: 'p' } }),
        'BrokerConfig spec.postgres: unknown field (did you mean postgresSpec?)',
      ],
      [
        brokerConfigDoc({ postgresqlSpec: { urlSecretName: 'p' } }),
        'BrokerConfig spec.postgresqlSpec: unknown field (did you mean postgresSpec?)',
      ],
      [
        brokerConfigDoc({ postgresSpec: { urlSecretName: 'p', password: 'x' } }),
        'BrokerConfig spec.postgresSpec.password: unknown field (put the connection, password included, in the postgresql:// URI of the Secret urlSecretName names',
      ],
      [
        brokerConfigDoc({ postgresSpec: { urlSecretName: 'p', url: 'postgresql://u:p@db/kbs' } }),
        'BrokerConfig spec.postgresSpec.url: unknown field (put the connection',
      ],
      [
        { ...brokerConfigDoc(), metadata: { name: 'b', namespace: 'ns', nmespace: 'x' } },
        'BrokerConfig metadata.nmespace: unknown field',
      ],
    ];
    for (const [doc, message] of cases) expect(() => parseBrokerConfig(doc)).toThrow(message);
  });

  it('refuses wrong values with the field path', () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [brokerConfigDoc({ replicas: 0 }), /spec.replicas: must be an integer from 1 to 32/],
      [brokerConfigDoc({ replicas: 1.5 }), /spec.replicas/],
      [
        brokerConfigDoc({ replicas: 2 }),
        /spec.replicas: 2 replicas need spec.redisSpec or spec.postgresSpec: handshake sessions must be shared/,
      ],
      [brokerConfigDoc({ kbsServiceType: 'ExternalName' }), /spec.kbsServiceType/],
      [
        brokerConfigDoc({ httpsSpec: null }),
        /spec.httpsSpec.tlsSecretName: is required with profileType Restricted/,
      ],
      [
        brokerConfigDoc({ attestationTokenVerificationSpec: {} }),
        /attestationTokenVerificationSpec.tlsSecretName: is required/,
      ],
      [brokerConfigDoc({ kbsSecretResources: ['a', 'a'] }), /kbsSecretResources\[1\]: "a" is listed twice/],
      [brokerConfigDoc({ kbsSecretResources: ['../etc'] }), /kbsSecretResources\[0\]/],
      [brokerConfigDoc({ kbsSecretResources: 'a' }), /kbsSecretResources: must be a list/],
      [brokerConfigDoc({ kbsSecretResources: [1] }), /kbsSecretResources\[0\]: must be a string/],
      [brokerConfigDoc({ redisSpec: {} }), /redisSpec.urlSecretName: is required/],
      [brokerConfigDoc({ redisSpec: { urlSecretName: 'r', urlSecretKey: 'a b' } }), /urlSecretKey/],
      [brokerConfigDoc({ postgresSpec: {} }), /spec.postgresSpec.urlSecretName: is required/],
      [
        brokerConfigDoc({ postgresSpec: { urlSecretName: '' } }),
        /spec.postgresSpec.urlSecretName: is required/,
      ],
      [
        brokerConfigDoc({ postgresSpec: { urlSecretName: 'Bad_Name' } }),
        /spec.postgresSpec.urlSecretName: "Bad_Name" is not a valid Secret name/,
      ],
      [
        brokerConfigDoc({ postgresSpec: { urlSecretName: 'p', urlSecretKey: 'a/b' } }),
        /spec.postgresSpec.urlSecretKey: "a\/b" is not a valid Secret key/,
      ],
      [brokerConfigDoc({ postgresSpec: 'postgresql://db' }), /spec.postgresSpec: must be a mapping/],
      [
        brokerConfigDoc({
          redisSpec: { urlSecretName: 'urls' },
          postgresSpec: { urlSecretName: 'urls' },
        }),
        /spec.postgresSpec.urlSecretKey: names the same Secret key as spec.redisSpec \(urls\/url\)/,
      ],
      [brokerConfigDoc({ kbsImage: 'has space' }), /kbsImage/],
      [{ ...brokerConfigDoc(), kind: 'TrusteeConfig' }, /kind: must be BrokerConfig/],
      [{ ...brokerConfigDoc(), apiVersion: 'v1' }, /apiVersion: must be/],
      [{ ...brokerConfigDoc(), apiVersion: 'broker.confidentialcontainers.org/v1' }, /apiVersion: must be/],
      [{ ...brokerConfigDoc(), metadata: { name: 'Bad_Name', namespace: 'ns' } }, /metadata.name/],
      [{ ...brokerConfigDoc(), metadata: { name: 'b' } }, /metadata.namespace: is required/],
      [
        { ...brokerConfigDoc(), metadata: { name: 'b', namespace: 'ns', labels: { a: 1 } } },
        /metadata.labels.a: must be a string/,
      ],
      [{ ...brokerConfigDoc(), spec: [] }, /spec: must be a mapping, found a list/],
    ];
    for (const [doc, message] of cases) {
      expect(() => parseBrokerConfig(doc), String(message)).toThrow(BrokerConfigError);
      expect(() => parseBrokerConfig(doc), String(message)).toThrow(message);
    }
    expect(() => parseBrokerConfig(null)).toThrow(BrokerConfigError);
  });

  it('accepts what the API server adds to an exported object', () => {
    const doc = brokerConfigDoc();
    doc.metadata = {
      ...(doc.metadata as object),
      uid: 'u',
      resourceVersion: '1',
      generation: 2,
      annotations: { a: 'b' },
    };
    doc.status = { isReady: true };
    expect(parseBrokerConfig(doc).name).toBe('broker');
  });
});
