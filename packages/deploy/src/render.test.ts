import { X509Certificate } from 'node:crypto';
import { DEFAULT_REPOSITORY_PREFIX, IMAGES_VERSION } from '@broker/images/version';
import { parseKbsConfigText } from '@broker/kbs';
import { parse as parseToml } from 'smol-toml';
import { describe, expect, it } from 'vitest';
import { parseBrokerConfig } from './broker-config.js';
import { BrokerConfigError, CertificateError } from './errors.js';
import { KBS_PATHS } from './kbs-config.js';
import { DEFAULT_KBS_IMAGE, type KubeObject, renderBrokerConfig } from './render.js';
import { collectSecrets } from './source-secrets.js';
import { brokerConfigDoc, CLUSTER_DOMAIN, HOST, NAMESPACE, sourceSecrets } from './testing/fixtures.js';
import { schemaProblems } from './testing/schemas.js';
import { parseYamlDocuments, stringifyYamlDocuments } from './yaml-io.js';

async function renderDoc(spec: Record<string, unknown> = {}) {
  const { secrets } = await sourceSecrets();
  return renderBrokerConfig(parseBrokerConfig(brokerConfigDoc(spec)), {
    clusterDomain: CLUSTER_DOMAIN,
    secrets,
  });
}

function find(objects: readonly KubeObject[], kind: string, name?: string): KubeObject {
  const o = objects.find((x) => x.kind === kind && (name === undefined || x.metadata.name === name));
  if (o === undefined) throw new Error(`no ${kind} ${name ?? ''}`);
  return o;
}

// biome-ignore lint/suspicious/noExplicitAny: test access to nested plain JSON
type Any = any;

describe('renderBrokerConfig', () => {
  it('generates every object of the spec table, with its name', async () => {
    const r = await renderDoc();
    const names = r.objects.map((o) => `${o.kind}/${o.metadata.name}`);
    expect(names).toEqual([
      'Secret/broker-https-key-secret',
      'Secret/broker-https-cert-secret',
      'Secret/broker-auth-secret',
      'Secret/broker-attestation-key-secret',
      'Secret/broker-attestation-cert-secret',
      'ConfigMap/broker-kbs-config',
      'ConfigMap/broker-rvps-reference-values',
      'ConfigMap/broker-attestation-policy',
      'ConfigMap/broker-tdx-config',
      'ConfigMap/broker-resource-policy',
      'KbsConfig/broker-kbs-config',
      'Service/kbs-service',
      'Service/kbs-metrics',
      'Deployment/kbs-deployment',
      'Route/kbs-route',
    ]);
    for (const o of r.objects) expect(o.metadata.namespace).toBe(NAMESPACE);
  });

  it('passes the schema of every object (Kubernetes, cert-manager, CRDs, Route)', async () => {
    for (const spec of [
      {},
      { replicas: 3, redisSpec: { urlSecretName: 'redis-url' } },
      { replicas: 3, postgresSpec: { urlSecretName: 'pg-url' } },
      { replicas: 2, redisSpec: { urlSecretName: 'redis-url' }, postgresSpec: { urlSecretName: 'pg-url' } },
    ]) {
      const r = await renderDoc(spec);
      for (const o of r.objects) expect(schemaProblems(o), `${o.kind}/${o.metadata.name}`).toEqual([]);
    }
    const { secrets } = await sourceSecrets();
    const permissive = renderBrokerConfig(
      parseBrokerConfig(
        brokerConfigDoc({
          profileType: 'Permissive',
          httpsSpec: null,
          attestationTokenVerificationSpec: null,
        }),
      ),
      { clusterDomain: CLUSTER_DOMAIN, secrets },
    );
    for (const o of permissive.objects) expect(schemaProblems(o), `${o.kind}/${o.metadata.name}`).toEqual([]);
  });

  it('a deliberately wrong field fails validation, in every kind', async () => {
    const r = await renderDoc();
    const broken: [string, (o: Any) => void][] = [
      ['Deployment', (o) => (o.spec.template.spec.containers[0].securityContex = {})],
      ['Deployment', (o) => (o.spec.template.spec.volumes[0].secrett = { secretName: 'x' })],
      ['Service', (o) => (o.spec.sessionAffinty = 'None')],
      ['Secret', (o) => (o.stringdata = {})],
      ['ConfigMap', (o) => (o.metadata.lables = {})],
      ['KbsConfig', (o) => (o.spec.kbsSecretResource = ['x'])],
      ['KbsConfig', (o) => (o.spec.tdxConfigSpec = { kbsTdxConfigMapName: 'x' })],
      ['KbsConfig', (o) => (o.spec.kbsDeploymentSpec = { replicas: 1 })],
      ['KbsConfig', (o) => (o.spec.KbsDeploymentSpec.replica = 1)],
      ['Route', (o) => (o.spec.tls.terminaton = 'passthrough')],
      ['Route', (o) => (o.spec.tls.insecureEdgeTerminationPolicy = 'Allow')],
      ['Deployment', (o) => (o.spec.replicas = 'three')],
    ];
    for (const [kind, breakIt] of broken) {
      const o = structuredClone(find(r.objects, kind));
      breakIt(o);
      expect(schemaProblems(o).length, `${kind} ${breakIt.toString()}`).toBeGreaterThan(0);
    }
    const d = structuredClone(find(r.objects, 'Deployment')) as Any;
    d.spec.template.spec.containers[0].securityContex = {};
    expect(schemaProblems(d)).toEqual([
      '/spec/template/spec/containers/0/securityContex is not a field of Deployment',
    ]);
  });

  it('renders a kbs-config that our KBS loads: HTTPS, authenticated admin API, signed-token verification', async () => {
    const r = await renderDoc();
    const cm = find(r.objects, 'ConfigMap', 'broker-kbs-config') as Any;
    const cfg = parseKbsConfigText(cm.data['kbs-config.toml']);
    expect(cfg.httpServer.insecureHttp).toBe(false);
    expect(cfg.httpServer.privateKey).toBe('/etc/https-key/privateKey');
    expect(cfg.httpServer.certificate).toBe('/etc/https-cert/certificate');
    expect(cfg.admin.mode).toBe('AuthenticatedAuthorization');
    expect(cfg.attestationToken).toMatchObject({
      trustedCertsPaths: ['/etc/attestation-cert/token.crt'],
      insecureHeaderJwk: false,
    });
    expect(cfg.attestationService.tokenBroker.signer).toEqual({
      keyPath: '/etc/attestation-key/token.key',
      certPath: '/etc/attestation-cert/token.crt',
    });
    expect(cfg.storageBackend.storageType).toBe('Memory');
    expect(cfg.sessionStorageType).toBeUndefined();
    expect(cfg.resourcePlugin).toEqual({ backend: 'kvstorage' });
    expect(cfg.mountedFiles).toEqual({
      attestationPolicies: ['/etc/kbs/attestation-policy'],
      resourcePolicy: '/etc/kbs/resource-policy',
      referenceValues: ['/etc/kbs/reference-values'],
      resources: ['/etc/kbs/resources'],
    });
    expect(cfg.warnings).toEqual([]);
  });

  it('round trip: YAML text back to objects; the kbs-config and every mounted path agree', async () => {
    const r = await renderDoc();
    const back = parseYamlDocuments(stringifyYamlDocuments(r.objects), 'rendered') as Any[];
    expect(back).toEqual(JSON.parse(JSON.stringify(r.objects)));
    const cm = back.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'broker-kbs-config');
    const toml = parseToml(cm.data['kbs-config.toml']) as Any;
    const deployment = back.find((o) => o.kind === 'Deployment');
    const container = deployment.spec.template.spec.containers[0];
    const mounts: Any[] = container.volumeMounts;
    const volumes: Any[] = deployment.spec.template.spec.volumes;
    const sourceOf = (path: string): { object: Any; key: string } => {
      const m = mounts
        .filter((x) => path === x.mountPath || path.startsWith(`${x.mountPath}/`))
        .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
      const v = volumes.find((x) => x.name === m.name);
      const key = m.subPath ?? path.slice(m.mountPath.length + 1);
      const object = v.secret
        ? back.find((o) => o.kind === 'Secret' && o.metadata.name === v.secret.secretName)
        : back.find((o) => o.kind === 'ConfigMap' && o.metadata.name === v.configMap.name);
      return { object, key };
    };
    // Every file the configuration names is a key of a mounted Secret or ConfigMap.
    for (const path of [
      toml.http_server.private_key,
      toml.http_server.certificate,
      toml.attestation_token.trusted_certs_paths[0],
      toml.attestation_service.attestation_token_broker.signer.key_path,
      toml.admin.authentication.bearer_jwt.identity_providers[0].public_key_uri,
      container.command[2],
      `${toml.mounted_files.attestation_policies[0]}/default_cpu.rego`,
      `${toml.mounted_files.resource_policy}/resource-policy.rego`,
      `${toml.mounted_files.reference_values[0]}/reference-values.json`,
    ]) {
      const { object, key } = sourceOf(path);
      expect(object, path).toBeDefined();
      expect(Object.keys(object.data), path).toContain(key);
    }
    expect(container.command).toEqual(['kbs', '--config-file', '/etc/kbs-config/kbs-config.toml']);
  });

  it('copies the TLS Secrets: key and certificate unchanged, auth Secret holds the token public key', async () => {
    const r = await renderDoc();
    const { certs } = await sourceSecrets();
    const data = (name: string, key: string) =>
      Buffer.from((find(r.objects, 'Secret', name) as Any).data[key], 'base64').toString('utf8');
    expect(data('broker-https-key-secret', 'privateKey')).toBe(certs.https.keyPem);
    expect(data('broker-https-cert-secret', 'certificate')).toBe(certs.https.certPem);
    expect(data('broker-attestation-key-secret', 'token.key')).toBe(certs.token.keyPem);
    expect(data('broker-attestation-cert-secret', 'token.crt')).toBe(certs.token.certPem);
    const pub = data('broker-auth-secret', 'publicKey');
    expect(pub).toContain('BEGIN PUBLIC KEY');
    expect(new X509Certificate(certs.token.certPem).publicKey.export({ format: 'pem', type: 'spki' })).toBe(
      pub,
    );
  });

  it("KbsConfig follows trustee-operator's KbsConfigSpec: names, casing, deployment type, env", async () => {
    const r = await renderDoc();
    const spec = (find(r.objects, 'KbsConfig') as Any).spec;
    expect(spec).toMatchObject({
      kbsSecretResources: ['attestation-status', 'kbsres1'],
      kbsHttpsKeySecretName: 'broker-https-key-secret',
      kbsHttpsCertSecretName: 'broker-https-cert-secret',
      kbsAuthSecretName: 'broker-auth-secret',
      kbsAttestationKeySecretName: 'broker-attestation-key-secret',
      kbsAttestationCertSecretName: 'broker-attestation-cert-secret',
      kbsConfigMapName: 'broker-kbs-config',
      kbsRvpsRefValuesConfigMapName: 'broker-rvps-reference-values',
      kbsAttestationPolicyConfigMapName: 'broker-attestation-policy',
      kbsResourcePolicyConfigMapName: 'broker-resource-policy',
      kbsServiceType: 'ClusterIP',
      kbsDeploymentType: 'AllInOneDeployment',
      KbsEnvVars: { RUST_LOG: 'info' },
      KbsDeploymentSpec: { replicas: 1 },
    });
    // trustee-operator removed tdxConfigSpec.
    expect(spec.tdxConfigSpec).toBeUndefined();
    // The container gets the same plain environment.
    const env = (find(r.objects, 'Deployment') as Any).spec.template.spec.containers[0].env;
    expect(env).toContainEqual({ name: 'RUST_LOG', value: 'info' });
  });

  it('Route: passthrough TLS, host kbs-route-<namespace>.<cluster_domain>, to the KBS Service', async () => {
    const r = await renderDoc();
    const route = find(r.objects, 'Route') as Any;
    expect(route.metadata.name).toBe('kbs-route');
    expect(route.spec.host).toBe(`kbs-route-${NAMESPACE}.${CLUSTER_DOMAIN}`);
    expect(r.routeHost).toBe(HOST);
    expect(route.spec.tls.termination).toBe('passthrough');
    expect(route.spec.to).toEqual({ kind: 'Service', name: 'kbs-service', weight: 100 });
  });

  it('mounts whole directories (live updates), each kbsSecretResources Secret as default/<secret>/', async () => {
    const r = await renderDoc();
    const pod = (find(r.objects, 'Deployment') as Any).spec.template.spec;
    for (const s of ['attestation-status', 'kbsres1']) {
      const v = pod.volumes.find((x: Any) => x.secret?.secretName === s);
      const m = pod.containers[0].volumeMounts.find((x: Any) => x.name === v.name);
      expect(m).toEqual({
        name: v.name,
        mountPath: `/etc/kbs/resources/default/${s}`,
        readOnly: true,
      });
      expect(m.subPath).toBeUndefined();
    }
    // Only trustee's fixed DCAP file is a subPath mount; everything the KBS reloads is a directory.
    const subPaths = pod.containers[0].volumeMounts.filter((x: Any) => x.subPath !== undefined);
    expect(subPaths.map((x: Any) => x.mountPath)).toEqual([KBS_PATHS.tdxQcnlFile]);
  });

  it('a mount with others inside it is writable: the runtime creates their mountpoints in it', async () => {
    const r = await renderDoc({ kbsSecretResources: ['attestation-status', 'kbsres1'] });
    const mounts = (find(r.objects, 'Deployment') as Any).spec.template.spec.containers[0].volumeMounts;
    const parents = mounts.filter((m: Any) =>
      mounts.some((o: Any) => o !== m && o.mountPath.startsWith(`${m.mountPath}/`)),
    );
    expect(parents.map((m: Any) => m.mountPath)).toEqual([KBS_PATHS.resourcesDir]);
    for (const m of parents) expect(m.readOnly, m.mountPath).not.toBe(true);
    // Everything else is read-only, but /tmp.
    const writable = mounts.filter((m: Any) => m.readOnly !== true).map((m: Any) => m.mountPath);
    expect(writable.sort()).toEqual([KBS_PATHS.resourcesDir, KBS_PATHS.tmpDir].sort());
  });

  it('restricted security context on the pod and the container', async () => {
    const r = await renderDoc();
    const pod = (find(r.objects, 'Deployment') as Any).spec.template.spec;
    expect(pod.securityContext).toEqual({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.containers[0].securityContext).toEqual({
      privileged: false,
      allowPrivilegeEscalation: false,
      runAsNonRoot: true,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
  });

  it('runs the kbs image `make images` builds unless spec.kbsImage or --image names another', async () => {
    const image = async (spec: Record<string, unknown>, override?: string) => {
      const { secrets } = await sourceSecrets();
      const r = renderBrokerConfig(parseBrokerConfig(brokerConfigDoc(spec)), {
        clusterDomain: CLUSTER_DOMAIN,
        secrets,
        ...(override !== undefined && { image: override }),
      });
      return (find(r.objects, 'Deployment') as Any).spec.template.spec.containers[0].image;
    };
    expect(DEFAULT_KBS_IMAGE).toBe(`${DEFAULT_REPOSITORY_PREFIX}/kbs:${IMAGES_VERSION}`);
    expect(await image({})).toBe('localhost/broker/kbs:0.1.0');
    expect(await image({ kbsImage: 'registry.example/broker/kbs:1' })).toBe('registry.example/broker/kbs:1');
    expect(await image({ kbsImage: 'registry.example/broker/kbs:1' }, 'other/kbs:2')).toBe('other/kbs:2');
  });

  it('replicas with Redis: N pods, no session affinity, state in Redis with the URL from the Secret', async () => {
    const r = await renderDoc({
      replicas: 3,
      redisSpec: { urlSecretName: 'redis-url', urlSecretKey: 'connection' },
    });
    const d = find(r.objects, 'Deployment') as Any;
    expect(d.spec.replicas).toBe(3);
    expect(d.spec.template.spec.topologySpreadConstraints).toHaveLength(1);
    expect((find(r.objects, 'Service') as Any).spec.sessionAffinity).toBe('None');
    expect(d.spec.template.spec.containers[0].env).toContainEqual({
      name: 'REDIS_URL',
      valueFrom: { secretKeyRef: { name: 'redis-url', key: 'connection' } },
    });
    const toml = parseToml(r.kbsConfigToml) as Any;
    expect(toml.storage_backend).toEqual({ storage_type: 'Redis', backends: { redis: {} } });
    const cfg = parseKbsConfigText(r.kbsConfigToml);
    expect(cfg.storageBackend.storageType).toBe('Redis');
    expect(cfg.warnings).toEqual([]);
    expect((find(r.objects, 'KbsConfig') as Any).spec.KbsDeploymentSpec).toEqual({ replicas: 3 });
  });

  it('replicas with PostgreSQL: state and sessions in PostgreSQL, POSTGRES_URL from the Secret', async () => {
    const r = await renderDoc({
      replicas: 3,
      postgresSpec: { urlSecretName: 'pg-url', urlSecretKey: 'uri' },
    });
    const d = find(r.objects, 'Deployment') as Any;
    expect(d.spec.replicas).toBe(3);
    expect(d.spec.template.spec.topologySpreadConstraints).toHaveLength(1);
    expect((find(r.objects, 'Service', 'kbs-service') as Any).spec.sessionAffinity).toBe('None');
    expect(d.spec.template.spec.containers[0].env).toEqual([
      { name: 'RUST_LOG', value: 'info' },
      { name: 'POSTGRES_URL', valueFrom: { secretKeyRef: { name: 'pg-url', key: 'uri' } } },
    ]);
    const toml = parseToml(r.kbsConfigToml) as Any;
    expect(toml.storage_backend).toEqual({ storage_type: 'Postgres', backends: { postgres: {} } });
    expect(toml.session_storage_type).toBe('Postgres');
    const cfg = parseKbsConfigText(r.kbsConfigToml);
    expect(cfg.storageBackend.storageType).toBe('Postgres');
    // The empty table: every key at trustee's default, all of them replaced by POSTGRES_URL at start.
    expect(cfg.storageBackend.postgres).toBeDefined();
    expect(cfg.storageBackend.redisUrl).toBeUndefined();
    expect(cfg.sessionStorageType).toBe('Postgres');
    expect(cfg.warnings).toEqual([]);
    const spec = (find(r.objects, 'KbsConfig') as Any).spec;
    expect(spec.KbsDeploymentSpec).toEqual({ replicas: 3 });
    expect(spec.kbsPostgresSpec).toEqual({ urlSecretName: 'pg-url', urlSecretKey: 'uri' });
    expect(spec.kbsRedisSpec).toBeUndefined();
  });

  it('PostgreSQL with one replica, and the Secret key defaulting to url', async () => {
    const r = await renderDoc({ postgresSpec: { urlSecretName: 'pg-url' } });
    const d = find(r.objects, 'Deployment') as Any;
    expect(d.spec.replicas).toBe(1);
    expect(d.spec.template.spec.topologySpreadConstraints).toBeUndefined();
    expect(d.spec.template.spec.containers[0].env).toContainEqual({
      name: 'POSTGRES_URL',
      valueFrom: { secretKeyRef: { name: 'pg-url', key: 'url' } },
    });
    expect(parseKbsConfigText(r.kbsConfigToml).storageBackend.storageType).toBe('Postgres');
  });

  it('PostgreSQL and Redis together: state in PostgreSQL, sessions in Redis, both URLs from Secrets', async () => {
    const r = await renderDoc({
      replicas: 2,
      redisSpec: { urlSecretName: 'store-urls', urlSecretKey: 'redis' },
      postgresSpec: { urlSecretName: 'store-urls', urlSecretKey: 'postgres' },
    });
    const env = (find(r.objects, 'Deployment') as Any).spec.template.spec.containers[0].env;
    expect(env).toEqual([
      { name: 'RUST_LOG', value: 'info' },
      { name: 'REDIS_URL', valueFrom: { secretKeyRef: { name: 'store-urls', key: 'redis' } } },
      { name: 'POSTGRES_URL', valueFrom: { secretKeyRef: { name: 'store-urls', key: 'postgres' } } },
    ]);
    const toml = parseToml(r.kbsConfigToml) as Any;
    expect(toml.session_storage_type).toBe('Redis');
    expect(toml.storage_backend).toEqual({
      storage_type: 'Postgres',
      backends: { postgres: {}, redis: {} },
    });
    const cfg = parseKbsConfigText(r.kbsConfigToml);
    expect(cfg.storageBackend.storageType).toBe('Postgres');
    expect(cfg.sessionStorageType).toBe('Redis');
    expect(cfg.warnings).toEqual([]);
    const spec = (find(r.objects, 'KbsConfig') as Any).spec;
    expect(spec.kbsRedisSpec).toEqual({ urlSecretName: 'store-urls', urlSecretKey: 'redis' });
    expect(spec.kbsPostgresSpec).toEqual({ urlSecretName: 'store-urls', urlSecretKey: 'postgres' });
  });

  it('never copies a database URL into the output, even when its Secret is among the inputs', async () => {
    const url = 'postgresql://kbs:s3cret-pg-pass@db.internal:5432/kbs?sslmode=require';
    const redisUrl = 'rediss://:s3cret-redis-pass@redis.internal:6380/0';
    const { secrets } = await sourceSecrets();
    const withUrls = new Map(secrets);
    withUrls.set('store-urls', {
      name: 'store-urls',
      type: 'Opaque',
      data: new Map([
        ['postgres', Buffer.from(url)],
        ['redis', Buffer.from(redisUrl)],
      ]),
    });
    const r = renderBrokerConfig(
      parseBrokerConfig(
        brokerConfigDoc({
          replicas: 2,
          redisSpec: { urlSecretName: 'store-urls', urlSecretKey: 'redis' },
          postgresSpec: { urlSecretName: 'store-urls', urlSecretKey: 'postgres' },
        }),
      ),
      { clusterDomain: CLUSTER_DOMAIN, secrets: withUrls },
    );
    // Decoded, so that a base64 copy in a Secret's data would be found too.
    const text = r.objects
      .map((o: Any) =>
        JSON.stringify({
          ...o,
          decoded: Object.values(o.kind === 'Secret' ? (o.data ?? {}) : {}).map((v) =>
            Buffer.from(v as string, 'base64').toString('utf8'),
          ),
        }),
      )
      .join('\n');
    for (const needle of ['s3cret-pg-pass', 's3cret-redis-pass', 'db.internal', 'redis.internal']) {
      expect(text, needle).not.toContain(needle);
    }
    expect(r.objects.map((o) => `${o.kind}/${o.metadata.name}`)).not.toContain('Secret/store-urls');
    for (const cm of r.objects.filter((o) => o.kind === 'ConfigMap') as Any[]) {
      for (const v of Object.values(cm.data) as string[]) {
        expect(v, cm.metadata.name).not.toMatch(/(postgres(ql)?|rediss?):\/\/[^\s]/);
      }
    }
    const backends = (parseToml(r.kbsConfigToml) as Any).storage_backend.backends;
    expect(backends).toEqual({ postgres: {}, redis: {} });
  });

  it('Permissive without TLS Secrets: plain HTTP, no admin, header JWK; edge Route', async () => {
    const r = renderBrokerConfig(
      parseBrokerConfig(
        brokerConfigDoc({
          profileType: 'Permissive',
          httpsSpec: null,
          attestationTokenVerificationSpec: null,
        }),
      ),
      { clusterDomain: CLUSTER_DOMAIN, secrets: new Map() },
    );
    expect(r.objects.filter((o) => o.kind === 'Secret')).toEqual([]);
    const cfg = parseKbsConfigText(r.kbsConfigToml);
    expect(cfg.httpServer.insecureHttp).toBe(true);
    expect(cfg.admin.mode).toBe('DenyAll');
    expect(cfg.attestationToken.insecureHeaderJwk).toBe(true);
    expect((find(r.objects, 'Route') as Any).spec.tls.termination).toBe('edge');
  });

  it('the pod template changes when any configuration changes, so apply rolls the pods', async () => {
    const a = await renderDoc();
    const b = await renderDoc({ profileType: 'Permissive' });
    const hash = (r: typeof a) => (find(r.objects, 'Deployment') as Any).spec.template.metadata.annotations;
    expect(hash(a)).toEqual(hash(await renderDoc()));
    expect(hash(a)).not.toEqual(hash(b));
  });

  it('refuses a missing TLS Secret, naming it', async () => {
    expect(() =>
      renderBrokerConfig(parseBrokerConfig(brokerConfigDoc()), {
        clusterDomain: CLUSTER_DOMAIN,
        secrets: new Map(),
      }),
    ).toThrow(/names Secret kbs-https-tls, which was not given/);
  });

  it('refuses an HTTPS certificate that does not name the route host', async () => {
    const { secrets } = await sourceSecrets();
    expect(() =>
      renderBrokerConfig(parseBrokerConfig(brokerConfigDoc()), { clusterDomain: 'apps.other.test', secrets }),
    ).toThrow(CertificateError);
    expect(() =>
      renderBrokerConfig(parseBrokerConfig(brokerConfigDoc()), { clusterDomain: 'apps.other.test', secrets }),
    ).toThrow(/do not cover kbs-route-trustee-ns\.apps\.other\.test/);
  });

  it('refuses a token key that is not P-256, a key of another certificate, bad PEM and a wrong Secret type', async () => {
    const { docs } = await sourceSecrets();
    const [https, token] = docs as Any[];
    const variants: [string, (h: Any, t: Any) => void, RegExp][] = [
      ['RSA token key', (h, t) => (t.data = h.data), /must be ECDSA P-256/],
      [
        'swapped key',
        (h, t) => (h.data['tls.key'] = t.data['tls.key']),
        /does not belong to the certificate/,
      ],
      [
        'garbage cert',
        (h) =>
          (h.data['tls.crt'] = Buffer.from(
            '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n',
          ).toString('base64')),
        /does not parse/,
      ],
      [
        'no cert block',
        (h) => (h.data['tls.crt'] = Buffer.from('hello').toString('base64')),
        /no PEM CERTIFICATE/,
      ],
      ['no key', (h) => delete h.data['tls.key'], /has no tls.key/],
      ['opaque type', (h) => (h.type = 'Opaque'), /expected kubernetes.io\/tls/],
    ];
    for (const [what, change, message] of variants) {
      const h = structuredClone(https);
      const t = structuredClone(token);
      change(h, t);
      const { secrets } = collectSecrets([h, t], what);
      expect(
        () =>
          renderBrokerConfig(parseBrokerConfig(brokerConfigDoc()), {
            clusterDomain: CLUSTER_DOMAIN,
            secrets,
          }),
        what,
      ).toThrow(message);
    }
  });

  it('refuses a bad cluster domain', async () => {
    const { secrets } = await sourceSecrets();
    for (const d of ['', 'localhost', 'Apps.Example.test', 'a..b', `${'x'.repeat(250)}.test`]) {
      expect(
        () => renderBrokerConfig(parseBrokerConfig(brokerConfigDoc()), { clusterDomain: d, secrets }),
        d,
      ).toThrow();
    }
  });

  it('BrokerConfig errors are BrokerConfigError', () => {
    expect(() => parseBrokerConfig(brokerConfigDoc({ profile: 'Restricted' }))).toThrow(BrokerConfigError);
  });
});
