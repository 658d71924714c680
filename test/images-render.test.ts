// `brokerctl render`'s Deployment run as a kubelet would run it: the objects it prints (Secrets,
// ConfigMaps, Deployment) turned into a runc bundle of the kbs image `make images` builds (the image the
// Deployment names by default), with the pod template's command, env, volumes and mounts (kubelet's
// `..data` layout, items, subPath, readOnly, emptyDir, in containerd's mount order) and security context
// (non-root, read-only root, no privilege escalation, no capabilities). The rendered readiness probe
// decides when it is ready; then a guest attests with the sample TEE and fetches the resource Secrets the
// operator created, and an admin holding the token key `brokerctl certs` made stores one more.
import { execFileSync } from 'node:child_process';
import { createPublicKey, generateKeyPairSync, verify } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brokerctlMain, nodeIO } from '@broker/deploy';
import { DEFAULT_REPOSITORY_PREFIX, IMAGES_VERSION } from '@broker/images/version';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import {
  type ContainerSpec,
  NetworkNamespace,
  Pod,
  type UnpackedImage,
  unpackImage,
  type Volume,
  type VolumeMount,
  waitForProbe,
} from './helpers/oci-runtime.js';
import { binary, ROOT } from './helpers/process.js';

const isRoot = process.getuid?.() === 0;
const NAMESPACE = 'trustee';
const CLUSTER_DOMAIN = 'apps.example.test';
const ROUTE_HOST = `kbs-route-${NAMESPACE}.${CLUSTER_DOMAIN}`;

// biome-ignore lint/suspicious/noExplicitAny: rendered objects are plain JSON read field by field
type Any = any;

interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  [field: string]: Any;
}

/** A ConfigMap's or Secret's keys and bytes, as the kubelet writes them into a volume. */
function keyData(o: KubeObject): Record<string, Buffer> {
  const out: Record<string, Buffer> = {};
  if (o.kind === 'ConfigMap') {
    for (const [k, v] of Object.entries<string>(o.data ?? {})) out[k] = Buffer.from(v, 'utf8');
    for (const [k, v] of Object.entries<string>(o.binaryData ?? {})) out[k] = Buffer.from(v, 'base64');
  } else {
    for (const [k, v] of Object.entries<string>(o.data ?? {})) out[k] = Buffer.from(v, 'base64');
    // The API server merges stringData into data.
    for (const [k, v] of Object.entries<string>(o.stringData ?? {})) out[k] = Buffer.from(v, 'utf8');
  }
  return out;
}

function unsupported(what: string): never {
  throw new Error(`the pod translation does not handle ${what}: extend test/images-render.test.ts`);
}

function only(o: Record<string, unknown>, known: readonly string[], what: string): void {
  for (const k of Object.keys(o)) if (!known.includes(k)) unsupported(`${what}.${k}`);
}

/** Kubernetes' `$(VAR)` expansion in command, args and env values (`$$` escapes). */
function expand(s: string, env: Readonly<Record<string, string>>): string {
  return s.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (m, name?: string) =>
    name === undefined ? '$' : (env[name] ?? m),
  );
}

/** A Kubernetes memory quantity (`1Gi`, `256Mi`, `500M`, `1024`) in bytes. */
function bytesOf(quantity: string): number {
  const m = /^(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(quantity);
  if (m === null) return unsupported(`the memory quantity ${quantity}`);
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  return Number(m[1]) * (m[2] === undefined ? 1 : unit[m[2] as keyof typeof unit]);
}

interface TranslatedPod {
  readonly volumes: Record<string, Volume>;
  readonly container: Omit<ContainerSpec, 'image'>;
  readonly image: string;
  /** The kubelet's probe URLs (from the pod's own network). */
  readonly readinessUrl: string;
  readonly livenessUrl: string;
}

/**
 * A Deployment's pod template as the kubelet and containerd turn it into an OCI runtime spec. Every field
 * it does not translate makes it throw, so that a new field in the render cannot go unnoticed.
 */
function translatePod(deployment: KubeObject, cluster: readonly KubeObject[]): TranslatedPod {
  const lookup = (kind: string, name: string) =>
    cluster.find(
      (o) =>
        o.kind === kind && o.metadata.name === name && o.metadata.namespace === deployment.metadata.namespace,
    );
  const pod = deployment.spec.template.spec;
  only(
    pod,
    [
      'automountServiceAccountToken',
      'enableServiceLinks',
      'securityContext',
      'containers',
      'volumes',
      'topologySpreadConstraints',
    ],
    'pod spec',
  );
  if (pod.containers.length !== 1) unsupported('more than one container');
  const c = pod.containers[0];
  only(
    c,
    [
      'name',
      'image',
      'imagePullPolicy',
      'command',
      'args',
      'ports',
      'env',
      'readinessProbe',
      'livenessProbe',
      'resources',
      'securityContext',
      'volumeMounts',
    ],
    'container',
  );

  const volumes: Record<string, Volume> = {};
  for (const v of pod.volumes ?? []) {
    only(v, ['name', 'emptyDir', 'configMap', 'secret'], 'volume');
    if (v.emptyDir !== undefined) {
      volumes[v.name] = { emptyDir: true };
      continue;
    }
    const isConfigMap = v.configMap !== undefined;
    const ref = isConfigMap ? v.configMap : v.secret;
    only(ref, [isConfigMap ? 'name' : 'secretName', 'items', 'defaultMode', 'optional'], `volume ${v.name}`);
    const kind = isConfigMap ? 'ConfigMap' : 'Secret';
    const objectName: string = isConfigMap ? ref.name : ref.secretName;
    const source = lookup(kind, objectName);
    if (source === undefined && ref.optional !== true)
      throw new Error(`pod cannot start: volume ${v.name} needs ${kind} ${objectName}, which does not exist`);
    const data = source === undefined ? {} : keyData(source);
    let files: Record<string, Buffer> = data;
    if (ref.items !== undefined) {
      files = {};
      for (const item of ref.items) {
        only(item, ['key', 'path'], `volume ${v.name} item`);
        if (item.path.includes('/')) unsupported('item paths with folders');
        const bytes = data[item.key];
        if (bytes === undefined)
          throw new Error(`pod cannot start: ${kind} ${objectName} has no key ${item.key}`);
        files[item.path] = bytes;
      }
    }
    const mode = ref.defaultMode === undefined ? {} : { defaultMode: ref.defaultMode as number };
    volumes[v.name] = isConfigMap ? { configMap: files, ...mode } : { secret: files, ...mode };
  }

  const env: Record<string, string> = {};
  for (const e of c.env ?? []) {
    only(e, ['name', 'value', 'valueFrom'], `env ${e.name}`);
    if (e.valueFrom === undefined) {
      env[e.name] = expand(e.value ?? '', env);
      continue;
    }
    only(e.valueFrom, ['configMapKeyRef', 'secretKeyRef'], `env ${e.name}.valueFrom`);
    const isConfigMap = e.valueFrom.configMapKeyRef !== undefined;
    const ref = e.valueFrom.configMapKeyRef ?? e.valueFrom.secretKeyRef;
    const source = lookup(isConfigMap ? 'ConfigMap' : 'Secret', ref.name);
    const value = source === undefined ? undefined : keyData(source)[ref.key];
    if (value === undefined) {
      if (ref.optional === true) continue;
      throw new Error(`pod cannot start: env ${e.name} needs ${ref.name}/${ref.key}`);
    }
    env[e.name] = value.toString('utf8');
  }

  // containerd orders the mounts by depth, so that a mount inside another lands on top of it.
  const depth = (p: string) => p.split('/').filter((s) => s !== '').length;
  const volumeMounts: VolumeMount[] = (c.volumeMounts ?? [])
    .map((m: Any) => {
      only(m, ['name', 'mountPath', 'subPath', 'readOnly'], `volumeMount ${m.name}`);
      if (volumes[m.name] === undefined) throw new Error(`volumeMount ${m.name} names no volume`);
      return { name: m.name, mountPath: m.mountPath, subPath: m.subPath, readOnly: m.readOnly };
    })
    .sort((a: VolumeMount, b: VolumeMount) => depth(a.mountPath) - depth(b.mountPath));

  // The container's security context over the pod's.
  const podSc = pod.securityContext ?? {};
  const sc = c.securityContext ?? {};
  only(podSc, ['runAsNonRoot', 'runAsUser', 'seccompProfile'], 'pod securityContext');
  only(
    sc,
    [
      'privileged',
      'allowPrivilegeEscalation',
      'runAsNonRoot',
      'runAsUser',
      'readOnlyRootFilesystem',
      'capabilities',
      'seccompProfile',
    ],
    'container securityContext',
  );
  if (sc.privileged === true) unsupported('privileged containers');
  only(sc.capabilities ?? {}, ['drop'], 'capabilities');
  const dropAll: boolean = (sc.capabilities?.drop ?? []).includes('ALL');
  if (!dropAll && sc.capabilities?.drop !== undefined) unsupported('dropping single capabilities');

  // Requests only place the pod; the memory limit becomes the container's cgroup limit.
  only(c.resources ?? {}, ['requests', 'limits'], 'resources');
  only(c.resources?.limits ?? {}, ['memory'], 'resources.limits');
  const memoryLimit = c.resources?.limits?.memory as string | undefined;

  const ports = new Map<string, number>(
    (c.ports ?? []).filter((p: Any) => p.name !== undefined).map((p: Any) => [p.name, p.containerPort]),
  );
  const probeUrl = (probe: Any, what: string) => {
    only(
      probe,
      [
        'httpGet',
        'initialDelaySeconds',
        'periodSeconds',
        'timeoutSeconds',
        'failureThreshold',
        'successThreshold',
      ],
      what,
    );
    const g = probe.httpGet;
    if (g === undefined) unsupported(`${what} without httpGet`);
    only(g, ['path', 'port', 'scheme'], `${what}.httpGet`);
    const port = typeof g.port === 'number' ? g.port : ports.get(g.port);
    if (port === undefined)
      throw new Error(`${what} names port ${g.port}, which the container does not declare`);
    return `${(g.scheme ?? 'HTTP').toLowerCase()}://127.0.0.1:${port}${g.path ?? '/'}`;
  };

  return {
    image: c.image,
    volumes,
    readinessUrl: probeUrl(c.readinessProbe, 'readinessProbe'),
    livenessUrl: probeUrl(c.livenessProbe, 'livenessProbe'),
    container: {
      name: c.name,
      command: c.command?.map((s: string) => expand(s, env)),
      args: c.args?.map((s: string) => expand(s, env)),
      env,
      volumeMounts,
      memoryLimitBytes: memoryLimit === undefined ? undefined : bytesOf(memoryLimit),
      securityContext: {
        runAsNonRoot: sc.runAsNonRoot ?? podSc.runAsNonRoot,
        runAsUser: sc.runAsUser ?? podSc.runAsUser,
        readOnlyRootFilesystem: sc.readOnlyRootFilesystem,
        allowPrivilegeEscalation: sc.allowPrivilegeEscalation,
        dropAllCapabilities: dropAll,
      },
    },
  };
}

/** A resource Secret as `kubectl create secret generic NAME --from-literal=…` makes it. */
function userSecret(name: string, data: Record<string, Buffer>): KubeObject {
  const encoded: Record<string, string> = {};
  for (const [k, v] of Object.entries(data)) encoded[k] = v.toString('base64');
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: NAMESPACE },
    type: 'Opaque',
    data: encoded,
  };
}

/** brokerctl as its command line runs it (dist/bin/brokerctl is this function), from the sources under test. */
async function brokerctl(...args: string[]): Promise<string> {
  let stdout = '';
  let stderr = '';
  const code = await brokerctlMain(args, {
    ...nodeIO,
    out: (s) => {
      stdout += s;
    },
    err: (s) => {
      stderr += s;
    },
  });
  expect(code, stderr).toBe(0);
  return stdout;
}

/** Polls `check` (a guest request) until it holds; the milliseconds it took. */
async function eventually(check: () => boolean, what: string, timeoutMs = 60_000): Promise<number> {
  const t0 = performance.now();
  while (performance.now() - t0 < timeoutMs) {
    if (check()) return performance.now() - t0;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${what} did not happen in ${timeoutMs} ms`);
}

/** `kubectl patch --type=json` of `add` operations (RFC 6902; `-` appends to an array). */
function applyJsonPatch(
  target: KubeObject,
  patch: readonly { op: string; path: string; value: unknown }[],
): KubeObject {
  const out = structuredClone(target);
  for (const { op, path, value } of patch) {
    if (op !== 'add') unsupported(`JSON patch op ${op}`);
    const keys = path
      .split('/')
      .slice(1)
      .map((k) => k.replaceAll('~1', '/').replaceAll('~0', '~'));
    const last = keys.pop() as string;
    let at: Any = out;
    for (const k of keys) {
      at = at[Array.isArray(at) ? Number(k) : k];
      if (at === undefined) throw new Error(`JSON patch path ${path} does not exist`);
    }
    if (Array.isArray(at)) at.splice(last === '-' ? at.length : Number(last), 0, structuredClone(value));
    else at[last] = structuredClone(value);
  }
  return out;
}

describe.skipIf(!isRoot)('brokerctl render: the Deployment runs the kbs image', () => {
  const work = mkdtempSync(join(tmpdir(), 'broker-images-render-'));
  const out = join(work, 'images');
  /** Image references the node's runtime knows: the layouts built here, as `make images` names them. */
  const known = new Map<string, { layout: string; tag: string }>();
  const unpacked = new Map<string, UnpackedImage>();

  beforeAll(() => {
    binary('broker-tools');
    execFileSync(
      process.execPath,
      [
        join(ROOT, 'scripts/images.mjs'),
        '--out',
        out,
        '--cache',
        join(ROOT, 'dist', 'image-cache'),
        '--image',
        'kbs',
        '--platform',
        'linux/amd64',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const index = JSON.parse(readFileSync(join(out, 'kbs', 'index.json'), 'utf8')) as {
      manifests: { annotations: Record<string, string> }[];
    };
    const tag = index.manifests[0]?.annotations['org.opencontainers.image.ref.name'] ?? '';
    known.set(`${DEFAULT_REPOSITORY_PREFIX}/kbs:${tag}`, { layout: join(out, 'kbs'), tag });
  }, 600_000);

  afterAll(() => {
    rmSync(work, { recursive: true, force: true });
  });

  /** The node pulling an image: the reference must be one of the layouts built here. */
  function pull(reference: string): UnpackedImage {
    const ref = known.get(reference);
    if (ref === undefined) throw new Error(`the node has no image ${reference}`);
    let image = unpacked.get(reference);
    if (image === undefined) {
      image = unpackImage(ref.layout, ref.tag, join(work, 'unpacked', String(unpacked.size)));
      unpacked.set(reference, image);
    }
    return image;
  }

  /**
   * `brokerctl render` of a BrokerConfig with `spec` (TLS Secrets from `brokerctl certs --out certs`
   * when it names them); the objects as `kubectl apply` would send them, checked against the API's
   * schemas (kubernetes-models).
   */
  async function render(dir: string, spec: Record<string, unknown>): Promise<KubeObject[]> {
    const config = join(dir, 'broker.yaml');
    writeFileSync(
      config,
      stringify({
        apiVersion: 'broker.confidentialcontainers.org/v1alpha1',
        kind: 'BrokerConfig',
        metadata: { name: 'broker', namespace: NAMESPACE },
        spec,
      }),
    );
    const tls = spec.httpsSpec !== undefined || spec.attestationTokenVerificationSpec !== undefined;
    if (tls)
      await brokerctl('certs', config, '--cluster-domain', CLUSTER_DOMAIN, '--out', join(dir, 'certs'));
    const rendered = await brokerctl(
      'render',
      config,
      '--cluster-domain',
      CLUSTER_DOMAIN,
      ...(tls ? ['--secrets', join(dir, 'certs', 'secrets.yaml')] : []),
    );
    const objects = parseAllDocuments(rendered).map((d) => d.toJS() as KubeObject);
    console.log(
      `rendered ${spec.profileType}: ${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', ')}`,
    );
    const models = { Deployment, ConfigMap, Secret, Service } as const;
    for (const o of objects) {
      const Model = models[o.kind as keyof typeof models];
      if (Model !== undefined)
        expect(() => new Model(o as never).validate(), `${o.kind}/${o.metadata.name}`).not.toThrow();
    }
    return objects;
  }

  function deploymentOf(objects: readonly KubeObject[]): KubeObject {
    const deployments = objects.filter((o) => o.kind === 'Deployment');
    expect(deployments).toHaveLength(1);
    return deployments[0] as KubeObject;
  }

  it('Restricted: ready on the rendered HTTPS probe as 65532 on a read-only root; a guest gets the resource Secrets, and an update of one; SIGTERM ends it', async () => {
    const dir = join(work, 'restricted');
    mkdirSync(dir, { recursive: true });
    const certs = join(dir, 'certs');
    // The README's BrokerConfig, with two resource Secrets.
    const objects = await render(dir, {
      profileType: 'Restricted',
      kbsServiceType: 'ClusterIP',
      httpsSpec: { tlsSecretName: 'kbs-https-tls' },
      attestationTokenVerificationSpec: { tlsSecretName: 'kbs-token-tls' },
      kbsSecretResources: ['attestation-status', 'kbsres1'],
    });
    // What the operator creates besides what render prints: the resource Secrets.
    const key1 = Buffer.from(Array.from({ length: 32 }, (_, i) => i));
    const cluster: KubeObject[] = [
      ...objects,
      userSecret('attestation-status', { status: Buffer.from('success') }),
      userSecret('kbsres1', { key1 }),
    ];
    const deployment = deploymentOf(objects);
    const p = translatePod(deployment, cluster);
    // The Deployment names the image `make images` built, by default.
    expect(p.image).toBe(`${DEFAULT_REPOSITORY_PREFIX}/kbs:${IMAGES_VERSION}`);
    const image = pull(p.image);
    expect(image.config.User).toBe('65532:65532');

    const netns = new NetworkNamespace(`broker-rd-${process.pid}`, [ROUTE_HOST, 'kbs-service']);
    const pod = new Pod(dir, netns, p.volumes);
    try {
      const kbs = pod.start({ ...p.container, image, hosts: [ROUTE_HOST, 'kbs-service'] });
      expect(p.readinessUrl).toBe('https://127.0.0.1:8080/healthz');
      const readyMs = await waitForProbe(() => netns.probe(p.readinessUrl), kbs);
      console.log(
        `rendered Restricted Deployment: readiness probe ${p.readinessUrl} answered ${readyMs.toFixed(0)} ms after the container started`,
      );
      expect(netns.probe(p.livenessUrl)).toBe(200);

      const client = (...args: string[]) =>
        netns.exec(binary('kbs-client'), [
          '--url',
          `https://${ROUTE_HOST}:8080`,
          '--cert-file',
          join(certs, 'https.crt'),
          ...args,
        ]);
      // The guest attests with the sample TEE (no TEE device here); the token is signed with the token
      // key, its header JWK endorsed by the token certificate (Restricted: insecure_header_jwk = false).
      const attested = client('attest');
      expect(attested.code, attested.stderr).toBe(0);
      const [header = '', payload = '', signature = ''] = attested.stdout.trim().split('.');
      const jwtHeader = JSON.parse(Buffer.from(header, 'base64url').toString()) as {
        alg: string;
        jwk?: { x5c?: string[] };
      };
      expect(jwtHeader.alg).toBe('ES256');
      expect(jwtHeader.jwk?.x5c?.[0]).toBe(
        readFileSync(join(certs, 'token.crt'), 'utf8').replace(/-----(BEGIN|END) CERTIFICATE-----|\s/g, ''),
      );
      expect(
        verify(
          'sha256',
          Buffer.from(`${header}.${payload}`),
          { key: createPublicKey(readFileSync(join(certs, 'token.crt'))), dsaEncoding: 'ieee-p1363' },
          Buffer.from(signature, 'base64url'),
        ),
      ).toBe(true);

      // The rendered Restricted resource policy releases only to a real TEE whose PCRs matched.
      const refused = client('get-resource', '--path', 'default/attestation-status/status');
      console.log(
        `sample TEE under the Restricted resource policy: ${refused.stderr.trim().split('\n').at(-1)}`,
      );
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('PolicyDeny');
      expect(refused.stdout).toBe('');

      // An admin token signed by another key (the HTTPS key) is refused; the token key's is accepted.
      const samplePolicy = join(dir, 'sample-allowed.rego');
      writeFileSync(
        samplePolicy,
        [
          'package policy',
          'import rego.v1',
          'default allow := false',
          '# This test stands the sample TEE in for a real one.',
          'allow if {',
          '\tdata.plugin == "resource"',
          '\tinput.submods.cpu0["ear.veraison.annotated-evidence"].sample',
          '}',
          '',
        ].join('\n'),
      );
      const admin = (key: string, ...args: string[]) => client('config', '--auth-private-key', key, ...args);
      const wrongKey = admin(join(certs, 'https.key'), 'set-resource-policy', '--policy-file', samplePolicy);
      expect(wrongKey.code).toBe(1);
      expect(wrongKey.stderr).toMatch(/401|Unauthorized|unauthori[sz]ed/i);
      const policy = admin(join(certs, 'token.key'), 'set-resource-policy', '--policy-file', samplePolicy);
      expect(policy.code, policy.stderr).toBe(0);

      // The operator's resource Secrets, mounted at /etc/kbs/resources/default/<secret>/.
      const resource = (path: string) => {
        const r = client('get-resource', '--path', path);
        expect(r.code, r.stderr).toBe(0);
        return Buffer.from(r.stdout.trim(), 'base64');
      };
      expect(resource('default/attestation-status/status').toString()).toBe('success');
      expect(resource('default/kbsres1/key1')).toEqual(key1);

      // A resource the admin stores through the API.
      writeFileSync(join(dir, 'added'), 'added by the admin');
      const set = admin(
        join(certs, 'token.key'),
        'set-resource',
        '--path',
        'default/admin/added',
        '--resource-file',
        join(dir, 'added'),
      );
      expect(set.code, set.stderr).toBe(0);
      expect(resource('default/admin/added').toString()).toBe('added by the admin');

      // `kubectl apply` of a changed resource Secret: the kubelet swaps the volume's `..data`, and the
      // KBS serves the new value without a restart.
      const changed = cluster.map((o) =>
        o.kind === 'Secret' && o.metadata.name === 'attestation-status'
          ? userSecret('attestation-status', { status: Buffer.from('updated') })
          : o,
      );
      const volume = deployment.spec.template.spec.volumes.find(
        (v: Any) => v.secret?.secretName === 'attestation-status',
      ).name as string;
      const updated = translatePod(deployment, changed).volumes[volume];
      if (updated === undefined || !('secret' in updated)) throw new Error(`no Secret volume ${volume}`);
      pod.update(volume, updated.secret);
      const reloadMs = await eventually(
        () => resource('default/attestation-status/status').toString() === 'updated',
        'the updated Secret reaching the guest',
      );
      console.log(
        `rendered Restricted Deployment: the updated Secret was served ${reloadMs.toFixed(0)} ms after the swap`,
      );

      expect(kbs.memoryPeakBytes()).toBeGreaterThan(0);
      console.log(
        `rendered Restricted Deployment: memory peak ${((kbs.memoryPeakBytes() ?? 0) / 2 ** 20).toFixed(0)} MiB (requests ${deployment.spec.template.spec.containers[0].resources.requests.memory}, limit ${deployment.spec.template.spec.containers[0].resources.limits.memory})`,
      );
      const stopped = await kbs.stop('TERM');
      console.log(`rendered Restricted Deployment: SIGTERM ended PID 1 in ${stopped.ms.toFixed(0)} ms`);
      expect(stopped.code, kbs.output()).toBe(0);
      // The writable places the pod gives it stay empty.
      expect(readdirSync(pod.volume('tmp'))).toEqual([]);
      expect(readdirSync(pod.volume('resources'))).toEqual(['default']);
    } finally {
      await pod.remove();
    }
  }, 300_000);

  it('Permissive without TLS Secrets: ready on the rendered HTTP probe; the guest attests, resources and admin stay closed to it; SIGTERM ends it', async () => {
    const dir = join(work, 'permissive');
    mkdirSync(dir, { recursive: true });
    const objects = await render(dir, {
      profileType: 'Permissive',
      kbsServiceType: 'ClusterIP',
      kbsSecretResources: ['attestation-status'],
    });
    const cluster = [...objects, userSecret('attestation-status', { status: Buffer.from('success') })];
    const p = translatePod(deploymentOf(objects), cluster);
    const image = pull(p.image);
    const netns = new NetworkNamespace(`broker-rp-${process.pid}`, [ROUTE_HOST, 'kbs-service']);
    const pod = new Pod(dir, netns, p.volumes);
    try {
      const kbs = pod.start({ ...p.container, image, hosts: [ROUTE_HOST, 'kbs-service'] });
      expect(p.readinessUrl).toBe('http://127.0.0.1:8080/healthz');
      const readyMs = await waitForProbe(() => netns.probe(p.readinessUrl), kbs);
      console.log(
        `rendered Permissive Deployment: readiness probe ${p.readinessUrl} answered ${readyMs.toFixed(0)} ms after the container started`,
      );
      const client = (...args: string[]) =>
        netns.exec(binary('kbs-client'), ['--url', `http://${ROUTE_HOST}:8080`, ...args]);
      const attested = client('attest');
      expect(attested.code, attested.stderr).toBe(0);
      // Its resource policy refuses the sample attester whatever the appraisal.
      const refused = client('get-resource', '--path', 'default/attestation-status/status');
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('PolicyDeny');
      // No admin credential exists: authorization_mode = "DenyAll", whatever key signs the token.
      const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      writeFileSync(join(dir, 'some.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }));
      writeFileSync(join(dir, 'open.rego'), 'package policy\n\ndefault allow := true\n');
      const denied = client(
        'config',
        '--auth-private-key',
        join(dir, 'some.key'),
        'set-resource-policy',
        '--policy-file',
        join(dir, 'open.rego'),
      );
      expect(denied.code).toBe(1);
      expect(denied.stderr).toMatch(/401|403|Unauthorized|denied/i);
      const stopped = await kbs.stop('TERM');
      console.log(`rendered Permissive Deployment: SIGTERM ended PID 1 in ${stopped.ms.toFixed(0)} ms`);
      expect(stopped.code, kbs.output()).toBe(0);
    } finally {
      await pod.remove();
    }
  }, 300_000);
  it('brokerctl add-secret: the Deployment patched as it prints starts, and the guest gets the new Secret', async () => {
    const dir = join(work, 'add-secret');
    mkdirSync(dir, { recursive: true });
    const certs = join(dir, 'certs');
    const objects = await render(dir, {
      profileType: 'Restricted',
      kbsServiceType: 'ClusterIP',
      httpsSpec: { tlsSecretName: 'kbs-https-tls' },
      attestationTokenVerificationSpec: { tlsSecretName: 'kbs-token-tls' },
    });
    const printed = await brokerctl(
      'add-secret',
      'security-policy',
      '--config',
      'broker',
      '--namespace',
      NAMESPACE,
    );
    const patchCommand = printed
      .split('\n')
      .find((l) => l.startsWith('kubectl patch deployment kbs-deployment '));
    const patch = JSON.parse(/ -p '(.*)'$/.exec(patchCommand ?? '')?.[1] ?? 'null') as {
      op: string;
      path: string;
      value: unknown;
    }[];
    expect(patch).toHaveLength(2);
    const deployment = applyJsonPatch(deploymentOf(objects), patch);
    expect(() => new Deployment(deployment as never).validate()).not.toThrow();
    const policyJson = '{"default":[{"type":"reject"}]}';
    const cluster = [...objects, userSecret('security-policy', { 'policy.json': Buffer.from(policyJson) })];
    const p = translatePod(deployment, cluster);
    const image = pull(p.image);
    const netns = new NetworkNamespace(`broker-ra-${process.pid}`, [ROUTE_HOST]);
    const pod = new Pod(dir, netns, p.volumes);
    try {
      // `kubectl rollout restart`: a new pod of the patched template.
      const kbs = pod.start({ ...p.container, image, hosts: [ROUTE_HOST] });
      const readyMs = await waitForProbe(() => netns.probe(p.readinessUrl), kbs);
      console.log(
        `add-secret's patched Deployment: ready ${readyMs.toFixed(0)} ms after the container started`,
      );
      const client = (...args: string[]) =>
        netns.exec(binary('kbs-client'), [
          '--url',
          `https://${ROUTE_HOST}:8080`,
          '--cert-file',
          join(certs, 'https.crt'),
          ...args,
        ]);
      writeFileSync(
        join(dir, 'sample-allowed.rego'),
        'package policy\n\nimport rego.v1\n\n# This test stands the sample TEE in for a real one.\nallow if input.submods.cpu0["ear.veraison.annotated-evidence"].sample\n',
      );
      const policy = client(
        'config',
        '--auth-private-key',
        join(certs, 'token.key'),
        'set-resource-policy',
        '--policy-file',
        join(dir, 'sample-allowed.rego'),
      );
      expect(policy.code, policy.stderr).toBe(0);
      const got = client('get-resource', '--path', 'default/security-policy/policy.json');
      expect(got.code, got.stderr).toBe(0);
      expect(Buffer.from(got.stdout.trim(), 'base64').toString()).toBe(policyJson);
      expect((await kbs.stop('TERM')).code, kbs.output()).toBe(0);
    } finally {
      await pod.remove();
    }
  }, 300_000);
});
