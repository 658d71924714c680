import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { decodeInitDataAnnotation, parseInitData } from '@broker/protocol';
import { parse as parseToml } from 'smol-toml';
import { describe, expect, it } from 'vitest';
import { InitDataInputError } from '../errors.js';
import { HOST, sourceSecrets } from '../testing/fixtures.js';
import { memoryIO } from '../testing/memory-io.js';
import { schemaProblems } from '../testing/schemas.js';
import { parseYamlDocuments } from '../yaml-io.js';
import { buildInitData } from './build.js';
import { initdataMain } from './cli.js';
import {
  annotateWorkloads,
  DEFAULT_INITDATA_ANNOTATION,
  initDataAnnotationOf,
  KATA_INITDATA_ANNOTATION,
  PEER_PODS_PROVIDER_KEYS,
  PEER_PODS_PROVIDERS,
  type PeerPodsProvider,
  peerPodsConfigMap,
  SPEC_INITDATA_ANNOTATION,
} from './deliver.js';
import { parseInstanceSize } from './instance-size.js';
import { checkServiceUrl, validateAaToml, validateCdhToml } from './validate.js';

const URL_ = `https://${HOST}`;

async function configs() {
  const { certs } = await sourceSecrets();
  const cert = certs.https.certPem;
  const aa = `[token_configs]
[token_configs.coco_as]
url = "${URL_}"

[token_configs.kbs]
url = "${URL_}"
cert = '''
${cert}'''
`;
  const cdh = `socket = 'unix:///run/confidential-containers/cdh.sock'
credentials = []

[kbc]
name = 'cc_kbc'
url = '${URL_}'
kbs_cert = """
${cert}"""

[image]
image_security_policy_uri = 'kbs:///default/security-policy/policy'
`;
  const policy = `package agent_policy

import rego.v1

default AllowRequestsFailingPolicy := false
default ExecProcessRequest := false
default ReadStreamRequest := true
`;
  return { aa, cdh, policy, cert };
}

describe('buildInitData', () => {
  it('gives sha256 / 0.1.0 TOML whose data are the files, byte for byte, as literal strings', async () => {
    const { aa, cdh, policy } = await configs();
    const { toml, warnings } = buildInitData({ aa, cdh, policy });
    expect(warnings).toEqual([]);
    expect(toml.startsWith('algorithm = "sha256"\nversion = "0.1.0"\n\n[data]\n"aa.toml" = ')).toBe(true);
    // cdh.toml and policy.rego are literal strings; aa.toml holds ''' itself, so it is escaped instead.
    expect(toml).toContain(`"cdh.toml" = '''\n${cdh}'''`);
    expect(toml).toContain(`"policy.rego" = '''\n${policy}'''`);
    expect(toml).toContain('"aa.toml" = """\n');
    const parsed = parseInitData(toml);
    expect(parsed.algorithm).toBe('sha256');
    expect(parsed.data).toEqual({ 'aa.toml': aa, 'cdh.toml': cdh, 'policy.rego': policy });
    // An independent TOML reading agrees.
    expect((parseToml(toml) as { data: Record<string, string> }).data['cdh.toml']).toBe(cdh);
  });

  it('falls back to escaped strings for text a literal string cannot hold', async () => {
    const { aa, cdh } = await configs();
    for (const policy of [
      "package agent_policy\n# '''quoted'''\n",
      "package agent_policy\n# ends with a quote'",
      'package agent_policy\r\n# windows line ends\r\n',
      'package agent_policy\n# bell \u0007 and backslash \\ and """ \n',
    ]) {
      const { toml } = buildInitData({ aa, cdh, policy });
      expect(parseInitData(toml).data['policy.rego'], JSON.stringify(policy)).toBe(policy);
    }
  });

  it('the policy is optional; other algorithms are allowed with a warning', async () => {
    const { aa, cdh } = await configs();
    const { toml, warnings } = buildInitData({ aa, cdh }, { algorithm: 'sha384' });
    expect(Object.keys(parseInitData(toml).data)).toEqual(['aa.toml', 'cdh.toml']);
    expect(warnings.join()).toContain('needs sha256');
  });

  it('refuses what would keep the pod from starting or attesting', async () => {
    const { aa, cdh, policy, cert } = await configs();
    const cases: [Partial<{ aa: string; cdh: string; policy: string }>, RegExp][] = [
      [{ aa: aa.replace(`url = "${URL_}"\ncert`, 'url = ""\ncert') }, /token_configs.kbs.url is empty.*404/],
      [{ aa: '[token_configs]\n' }, /token_configs.kbs.url is missing/],
      [{ aa: aa.replace(`url = "${URL_}"\ncert`, `url = "${URL_}/kbs"\ncert`) }, /has a path/],
      [{ aa: aa.replace(`url = "${URL_}"\ncert`, 'url = "ftp://x"\ncert') }, /not an http\(s\) URL/],
      [{ aa: aa.replace(`url = "${URL_}"\ncert`, 'url = "not a url"\ncert') }, /is not a URL/],
      [
        { aa: aa.replace(`[token_configs.coco_as]\nurl = "${URL_}"`, '[token_configs.coco_as]\nurl = ""') },
        /coco_as.url is empty/,
      ],
      [
        { aa: aa.replace(HOST, 'other.example.test').replace(HOST, 'other.example.test') },
        /do not cover other.example.test/,
      ],
      [
        { aa: aa.replace(cert, '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n') },
        /does not parse/,
      ],
      [{ aa: aa.replace(cert, 'garbage\n') }, /no PEM CERTIFICATE/],
      [{ aa: 'this is = = not toml' }, /aa.toml is not valid TOML/],
      [{ cdh: cdh.replace("name = 'cc_kbc'", "name = 'offline_fs_kbc'") }, /kbc.name must be "cc_kbc"/],
      [{ cdh: cdh.replace(`url = '${URL_}'`, "url = ''") }, /kbc.url is empty/],
      [{ cdh: cdh.replace(`url = '${URL_}'`, `url = '${URL_}?x=1'`) }, /has a path, query or fragment/],
      [
        { cdh: cdh.replace('kbs:///default/security-policy/policy', 'https://x/policy') },
        /image_security_policy_uri/,
      ],
      [
        { cdh: cdh.replace('kbs:///default/security-policy/policy', 'kbs:///default/../x') },
        /image_security_policy_uri/,
      ],
      [{ cdh: `socket = 'tcp://1.2.3.4:1'\n${cdh.slice(cdh.indexOf('\n') + 1)}` }, /socket must be a unix/],
      [{ cdh: 'credentials = []\n' }, /\[kbc\] is missing/],
      [{ policy: 'package other\n' }, /package agent_policy/],
    ];
    for (const [change, message] of cases) {
      const files = { aa, cdh, policy, ...change };
      expect(() => buildInitData(files), String(message)).toThrow(InitDataInputError);
      expect(() => buildInitData(files), String(message)).toThrow(message);
    }
  });

  it('refuses an expired or not yet valid certificate', async () => {
    const { aa } = await configs();
    expect(() => validateAaToml(aa, new Date('2000-01-01T00:00:00Z'))).toThrow(/not valid before/);
    expect(() => validateAaToml(aa, new Date(Date.now() + 9000 * 3600 * 1000))).toThrow(/expired/);
  });

  it('warns about a plain-http URL with a certificate, a missing certificate, cc_as and different services', async () => {
    const { aa, cdh } = await configs();
    const http = validateAaToml(aa.replaceAll(URL_, `http://${HOST}`));
    expect(http.warnings.join()).toContain('plain http');
    const noCert = validateCdhToml(cdh.replace(/kbs_cert = """[\s\S]*?"""\n/, ''));
    expect(noCert.warnings.join()).toContain('built-in root certificates');
    const ccAs = validateAaToml(aa.replace('coco_as', 'cc_as'));
    expect(ccAs.warnings.join()).toContain('reads the attestation-service URL from token_configs.coco_as');
    const other = buildInitData({
      aa,
      cdh: cdh
        .replace(`url = '${URL_}'`, "url = 'https://127.0.0.1:8080'")
        .replace(/kbs_cert = """[\s\S]*?"""\n/, ''),
    });
    expect(other.warnings.join()).toContain('name different services');
  });

  it('checkServiceUrl accepts a root URL, with or without a slash and port', () => {
    for (const u of [
      'https://kbs.example',
      'https://kbs.example/',
      'http://10.0.0.1:8080',
      'https://[::1]:8080',
    ]) {
      expect(checkServiceUrl(u, 'x').hostname.length).toBeGreaterThan(0);
    }
    for (const u of [
      undefined,
      null,
      1,
      '',
      'https://user:pw@kbs.example',
      `https://${'a'.repeat(3000)}.example`,
    ]) {
      expect(() => checkServiceUrl(u, 'x'), String(u)).toThrow(InitDataInputError);
    }
  });
});

describe('instance sizes', () => {
  it('knows the SNP and TDX families', () => {
    expect(parseInstanceSize('Standard_DC4as_v5')).toEqual({
      name: 'Standard_DC4as_v5',
      tee: 'snp',
      vcpus: 4,
    });
    expect(parseInstanceSize('Standard_DC2es_v5')).toEqual({
      name: 'Standard_DC2es_v5',
      tee: 'tdx',
      vcpus: 2,
    });
    expect(parseInstanceSize('standard_dc8ads_v5')).toEqual({
      name: 'Standard_DC8ads_v5',
      tee: 'snp',
      vcpus: 8,
    });
    expect(parseInstanceSize('Standard_DC96eds_v5')?.tee).toBe('tdx');
    for (const s of [
      'Standard_D4as_v5',
      'Standard_DC4as_v4',
      'Standard_DC3as_v5',
      'Standard_DC04as_v5',
      'Standard_DC4s_v3',
      'Standard_DC4as_v5 ',
      '',
      'Standard_DC4bs_v5',
    ]) {
      expect(parseInstanceSize(s), s).toBeUndefined();
    }
  });
});

describe('delivery', () => {
  it('annotates a Pod and a Deployment template, keeping comments and other fields', () => {
    const yaml = `# the sample workload
apiVersion: v1
kind: Pod
metadata:
  name: app # inline comment
  annotations:
    keep: me
spec:
  runtimeClassName: sandbox-remote
  containers: [{ name: c, image: i }]
---
apiVersion: apps/v1
kind: Deployment
metadata: { name: web }
spec:
  template:
    spec: { containers: [{ name: c, image: i }] }
---
apiVersion: v1
kind: Service
metadata: { name: svc }
`;
    const r = annotateWorkloads(yaml, 'H4sIAAAA', 'pod.yaml');
    expect(r.annotated).toEqual(['Pod/app', 'Deployment/web']);
    expect(r.yaml).toContain('# the sample workload');
    expect(r.yaml).toContain('# inline comment');
    const docs = parseYamlDocuments(r.yaml, 'out') as Record<string, unknown>[];
    expect(docs).toHaveLength(3);
    expect((docs[0] as { metadata: { annotations: unknown } }).metadata.annotations).toEqual({
      keep: 'me',
      [KATA_INITDATA_ANNOTATION]: 'H4sIAAAA',
    });
    expect(JSON.stringify(docs[1])).toContain(KATA_INITDATA_ANNOTATION);
    expect(docs[2]).toEqual({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'svc' } });
    const again = annotateWorkloads(r.yaml, 'H4sIBBBB', 'pod.yaml');
    expect(again.replaced).toEqual(['Pod/app', 'Deployment/web']);
  });

  it("writes kata's annotation by default, the spec's when asked, and either name replaces the other", () => {
    expect(DEFAULT_INITDATA_ANNOTATION).toBe(KATA_INITDATA_ANNOTATION);
    const pod = `kind: Pod\nmetadata:\n  name: p\n  annotations:\n    ${KATA_INITDATA_ANNOTATION}: old\n`;
    const r = annotateWorkloads(pod, 'H4sInew', 'pod.yaml', SPEC_INITDATA_ANNOTATION);
    expect(r.replaced).toEqual(['Pod/p']);
    const doc = parseYamlDocuments(r.yaml, 'out')[0] as { metadata: { annotations: Record<string, string> } };
    expect(doc.metadata.annotations).toEqual({ [SPEC_INITDATA_ANNOTATION]: 'H4sInew' });
    const back = annotateWorkloads(r.yaml, 'H4sIback', 'pod.yaml');
    expect(back.replaced).toEqual(['Pod/p']);
    expect(
      (parseYamlDocuments(back.yaml, 'out')[0] as { metadata: { annotations: unknown } }).metadata
        .annotations,
    ).toEqual({ [KATA_INITDATA_ANNOTATION]: 'H4sIback' });
    expect(() => annotateWorkloads(pod, 'x', 'pod.yaml', 'io.example/other')).toThrow(
      /not an initdata annotation/,
    );
  });

  it("the default annotation is one kata's remote hypervisor configuration lets through", () => {
    // kata's runtime takes an `io.katacontainers.config.hypervisor.<name>` annotation only when <name> is in
    // the hypervisor's enable_annotations; the remote (peer-pods) configuration shipped by kata lists them.
    const text = readFileSync(
      join(
        import.meta.dirname,
        '..',
        '..',
        '..',
        '..',
        'test',
        'vectors',
        'kata',
        'configs',
        'configuration-remote.toml.in',
      ),
      'utf8',
    );
    const line = /^enable_annotations\s*=\s*\[(.*)\]\s*$/m.exec(text)?.[1];
    expect(line).toBeDefined();
    const enabled = [...(line as string).matchAll(/"([^"]+)"/g)].map((m) => m[1]);
    const prefix = 'io.katacontainers.config.hypervisor.';
    expect(DEFAULT_INITDATA_ANNOTATION.startsWith(prefix)).toBe(true);
    expect(enabled).toContain(DEFAULT_INITDATA_ANNOTATION.slice(prefix.length));
    // The spec's spelling is not a kata annotation at all: kata would drop it.
    expect(SPEC_INITDATA_ANNOTATION.startsWith(prefix)).toBe(false);
  });

  it('reads the initdata annotation under either name', () => {
    expect(initDataAnnotationOf({ [KATA_INITDATA_ANNOTATION]: 'a' }, 'p')).toBe('a');
    expect(initDataAnnotationOf({ [SPEC_INITDATA_ANNOTATION]: 'b' }, 'p')).toBe('b');
    expect(
      initDataAnnotationOf({ [SPEC_INITDATA_ANNOTATION]: 'c', [KATA_INITDATA_ANNOTATION]: 'c' }, 'p'),
    ).toBe('c');
    expect(initDataAnnotationOf({ other: 'x' }, 'p')).toBeUndefined();
    expect(() =>
      initDataAnnotationOf({ [SPEC_INITDATA_ANNOTATION]: 'c', [KATA_INITDATA_ANNOTATION]: 'd' }, 'p'),
    ).toThrow(/differ/);
    expect(() => initDataAnnotationOf({ [KATA_INITDATA_ANNOTATION]: 5 }, 'p')).toThrow(/not a string/);
  });

  it('refuses a file without workloads, bad annotations and oversize values', () => {
    expect(() => annotateWorkloads('apiVersion: v1\nkind: Service\nmetadata: {name: s}\n', 'x', 'f')).toThrow(
      /no workload/,
    );
    expect(() => annotateWorkloads('kind: Pod\nmetadata:\n  annotations: [1]\n', 'x', 'f')).toThrow(
      /not a mapping/,
    );
    expect(() => annotateWorkloads('kind: Pod\nmetadata: {name: p}\n', 'x'.repeat(300 * 1024), 'f')).toThrow(
      /exceed/,
    );
    expect(() => annotateWorkloads('kind: Pod\n  bad: [', 'x', 'f')).toThrow(/not valid YAML/);
  });

  it("peer-pods-cm for azure (the default): the adaptor's keys, a valid ConfigMap", () => {
    const { configMap, size } = peerPodsConfigMap({
      encodedInitData: 'H4sI',
      rootVolumeSizeGiB: 20,
      instanceSize: 'standard_dc4as_v5',
      instanceSizes: ['Standard_DC4as_v5', 'Standard_DC8es_v5'],
      namespace: 'confidential-containers-system',
    });
    expect(configMap.metadata).toEqual({ name: 'peer-pods-cm', namespace: 'confidential-containers-system' });
    expect(configMap.data).toEqual({
      CLOUD_PROVIDER: 'azure',
      INITDATA: 'H4sI',
      ROOT_VOLUME_SIZE: '20',
      AZURE_INSTANCE_SIZE: 'Standard_DC4as_v5',
      AZURE_INSTANCE_SIZES: 'Standard_DC4as_v5,Standard_DC8es_v5',
    });
    expect(size?.tee).toBe('snp');
    expect(schemaProblems(configMap)).toEqual([]);
    // Only INITDATA is needed; the rest is left to the adaptor's defaults.
    expect(peerPodsConfigMap({ encodedInitData: 'H4sI' }).configMap.data).toEqual({
      CLOUD_PROVIDER: 'azure',
      INITDATA: 'H4sI',
    });
    // The spec's key only on request, next to the adaptor's.
    expect(
      peerPodsConfigMap({ encodedInitData: 'x', instanceSize: 'Standard_DC2es_v5', specInstanceSize: true })
        .configMap.data,
    ).toEqual({
      CLOUD_PROVIDER: 'azure',
      INITDATA: 'x',
      AZURE_INSTANCE_SIZE: 'Standard_DC2es_v5',
      CLOUD_INSTANCE_SIZE: 'Standard_DC2es_v5',
    });
    expect(() => peerPodsConfigMap({ encodedInitData: 'x', specInstanceSize: true })).toThrow(
      /needs --instance-size/,
    );
    expect(() =>
      peerPodsConfigMap({ encodedInitData: 'x', rootVolumeSizeGiB: 0, instanceSize: 'Standard_DC4as_v5' }),
    ).toThrow(/root-volume-size/);
    expect(() => peerPodsConfigMap({ encodedInitData: 'x', rootVolumeSizeGiB: 4096 })).toThrow(/4095/);
    expect(() =>
      peerPodsConfigMap({ encodedInitData: 'x', rootVolumeSizeGiB: 20, instanceSize: 'Standard_D4s_v5' }),
    ).toThrow(/not a confidential VM size/);
    expect(() =>
      peerPodsConfigMap({ encodedInitData: 'x', instanceSizes: ['Standard_DC4as_v5', 'Standard_B2s'] }),
    ).toThrow(/--instance-sizes "Standard_B2s" is not a confidential VM size/);
  });

  it('peer-pods-cm for aws, gcp, libvirt, alibabacloud and ibmcloud uses their own keys', () => {
    expect(
      peerPodsConfigMap({
        encodedInitData: 'x',
        provider: 'aws',
        rootVolumeSizeGiB: 30,
        instanceSize: 'm6a.large',
        instanceSizes: ['m6a.large', 'c6a.2xlarge'],
      }).configMap.data,
    ).toEqual({
      CLOUD_PROVIDER: 'aws',
      INITDATA: 'x',
      ROOT_VOLUME_SIZE: '30',
      PODVM_INSTANCE_TYPE: 'm6a.large',
      PODVM_INSTANCE_TYPES: 'm6a.large,c6a.2xlarge',
    });
    expect(
      peerPodsConfigMap({
        encodedInitData: 'x',
        provider: 'gcp',
        rootVolumeSizeGiB: 10,
        instanceSize: 'n2d-standard-2',
        instanceSizes: ['n2d-standard-2', 'c3-standard-4'],
      }).configMap.data,
    ).toEqual({
      CLOUD_PROVIDER: 'gcp',
      INITDATA: 'x',
      ROOT_VOLUME_SIZE: '10',
      GCP_MACHINE_TYPE: 'n2d-standard-2',
      GCP_INSTANCE_TYPES: 'n2d-standard-2,c3-standard-4',
    });
    expect(
      peerPodsConfigMap({ encodedInitData: 'x', provider: 'libvirt', rootVolumeSizeGiB: 12 }).configMap.data,
    ).toEqual({ CLOUD_PROVIDER: 'libvirt', INITDATA: 'x', LIBVIRT_ROOT_DISK_SIZE: '12' });
    expect(
      peerPodsConfigMap({
        encodedInitData: 'x',
        provider: 'alibabacloud',
        rootVolumeSizeGiB: 40,
        instanceSize: 'ecs.g8i.xlarge',
      }).configMap.data,
    ).toEqual({
      CLOUD_PROVIDER: 'alibabacloud',
      INITDATA: 'x',
      SYSTEM_DISK_SIZE: '40',
      PODVM_INSTANCE_TYPE: 'ecs.g8i.xlarge',
    });
    expect(() =>
      peerPodsConfigMap({
        encodedInitData: 'x',
        provider: 'alibabacloud',
        instanceSizes: ['ecs.g8i.xlarge'],
      }),
    ).toThrow(/one instance size, no list/);
    expect(
      peerPodsConfigMap({
        encodedInitData: 'x',
        provider: 'ibmcloud',
        instanceSize: 'bx2-2x8',
        instanceSizes: ['bx2-2x8', 'bx3dc-4x20'],
      }).configMap.data,
    ).toEqual({
      CLOUD_PROVIDER: 'ibmcloud',
      INITDATA: 'x',
      IBMCLOUD_PODVM_INSTANCE_PROFILE_NAME: 'bx2-2x8',
      IBMCLOUD_PODVM_INSTANCE_PROFILE_LIST: 'bx2-2x8,bx3dc-4x20',
    });
    expect(() =>
      peerPodsConfigMap({ encodedInitData: 'x', provider: 'ibmcloud', rootVolumeSizeGiB: 10 }),
    ).toThrow(/image sets it/);
    expect(() =>
      peerPodsConfigMap({ encodedInitData: 'x', provider: 'libvirt', instanceSize: 'small' }),
    ).toThrow(/CPU and memory/);
    expect(() =>
      peerPodsConfigMap({ encodedInitData: 'x', provider: 'aws', instanceSize: 'Standard_DC2as_v5' }),
    ).toThrow(/not a aws instance type/);
    expect(() =>
      peerPodsConfigMap({ encodedInitData: 'x', provider: 'gcp', instanceSize: 'm6a.large' }),
    ).toThrow(/not a gcp instance type/);
    expect(() =>
      peerPodsConfigMap({ encodedInitData: 'x', provider: 'vsphere' as unknown as 'aws' }),
    ).toThrow(/use one of azure, aws, gcp, libvirt, alibabacloud, ibmcloud/);
  });

  const SAMPLE_SIZES: Record<PeerPodsProvider, string> = {
    azure: 'Standard_DC2as_v5',
    aws: 'm6a.large',
    gcp: 'n2d-standard-2',
    libvirt: '',
    alibabacloud: 'ecs.g8i.xlarge',
    ibmcloud: 'bx2-2x8',
  };

  it("every key written is one the cloud-api-adaptor's Helm chart sets for that provider", () => {
    // The adaptor's chart: providers/<provider>.yaml lists each environment variable the provider reads
    // (commented out when the adaptor's default applies); templates/configmap.yaml adds CLOUD_PROVIDER.
    const chart = (...path: string[]) =>
      readFileSync(
        join(
          import.meta.dirname,
          '..',
          '..',
          '..',
          '..',
          'test',
          'vectors',
          'cloud-api-adaptor',
          'peerpods',
          ...path,
        ),
        'utf8',
      );
    const template = chart('templates', 'configmap.yaml');
    const templateKeys = [...template.matchAll(/^ {2}([A-Z][A-Z0-9_]*): "/gm)].map((m) => m[1]);
    expect(templateKeys).toContain('CLOUD_PROVIDER');
    for (const provider of PEER_PODS_PROVIDERS) {
      const values = chart('providers', `${provider}.yaml`);
      expect(values).toMatch(new RegExp(`^provider: ${provider}$`, 'm'));
      const read = new Set([
        ...templateKeys,
        ...[...values.matchAll(/^ {4}(?:# )?([A-Z][A-Z0-9_]*): /gm)].map((m) => m[1]),
      ]);
      expect(read.has('INITDATA'), provider).toBe(true);
      expect(read.has('CLOUD_INSTANCE_SIZE'), provider).toBe(false);
      const keys = PEER_PODS_PROVIDER_KEYS[provider];
      const sample = SAMPLE_SIZES[provider];
      const { data } = peerPodsConfigMap({
        encodedInitData: 'x',
        provider,
        ...(keys.rootVolume !== undefined && { rootVolumeSizeGiB: 20 }),
        ...(keys.instanceSize !== undefined && { instanceSize: sample }),
        ...(keys.instanceSizes !== undefined && { instanceSizes: [sample] }),
      }).configMap;
      const written = Object.keys(data ?? {});
      const expected = [keys.rootVolume, keys.instanceSize, keys.instanceSizes].filter(
        (k) => k !== undefined,
      );
      expect(written.sort(), provider).toEqual(['CLOUD_PROVIDER', 'INITDATA', ...expected].sort());
      for (const key of written) expect(read.has(key), `${provider} ${key}`).toBe(true);
    }
  });
});

describe('initdata CLI', () => {
  async function files() {
    const { aa, cdh, policy } = await configs();
    return { 'aa.toml': aa, 'cdh.toml': cdh, 'policy.rego': policy };
  }

  it('build → digest, pcr8, encode, check, annotate, configmap', async () => {
    const io = memoryIO(await files());
    expect(
      await initdataMain(
        [
          'build',
          '--aa',
          'aa.toml',
          '--cdh',
          'cdh.toml',
          '--policy',
          'policy.rego',
          '--out',
          'initdata.toml',
        ],
        io,
      ),
    ).toBe(0);
    const toml = io.files.get('initdata.toml') as Buffer;
    expect(io.stderr).toBe('');

    await initdataMain(['digest', 'initdata.toml'], io);
    const digest = createHash('sha256').update(toml).digest();
    expect(io.stdout).toBe(`${digest.toString('hex')}\n`);

    io.stdout = '';
    await initdataMain(['pcr8', 'initdata.toml'], io);
    const pcr8 = createHash('sha256')
      .update(Buffer.concat([Buffer.alloc(32), digest]))
      .digest('hex');
    expect(io.stdout).toBe(`${pcr8}\n`);

    io.stdout = '';
    await initdataMain(['encode', 'initdata.toml'], io);
    const encoded = io.stdout.trim();
    expect(gunzipSync(Buffer.from(encoded, 'base64')).equals(toml)).toBe(true);
    expect(decodeInitDataAnnotation(encoded).equals(toml)).toBe(true);

    io.stdout = '';
    expect(await initdataMain(['check', 'initdata.toml'], io)).toBe(0);
    expect(io.stdout).toBe('initdata.toml: ok\n');

    io.files.set(
      'pod.yaml',
      Buffer.from('apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers: []\n'),
    );
    io.stdout = '';
    expect(await initdataMain(['annotate', 'pod.yaml', '--initdata', 'initdata.toml'], io)).toBe(0);
    const pod = parseYamlDocuments(io.stdout, 'pod')[0] as {
      metadata: { annotations: Record<string, string> };
    };
    expect(
      decodeInitDataAnnotation(pod.metadata.annotations[KATA_INITDATA_ANNOTATION] as string).equals(toml),
    ).toBe(true);

    io.stdout = '';
    expect(
      await initdataMain(
        [
          'configmap',
          '--initdata',
          'initdata.toml',
          '--root-volume-size',
          '30',
          '--instance-size',
          'Standard_DC2es_v5',
        ],
        io,
      ),
    ).toBe(0);
    const cm = parseYamlDocuments(io.stdout, 'cm')[0] as { data: Record<string, string> };
    expect(Object.keys(cm.data).sort()).toEqual([
      'AZURE_INSTANCE_SIZE',
      'CLOUD_PROVIDER',
      'INITDATA',
      'ROOT_VOLUME_SIZE',
    ]);
    expect(cm.data.ROOT_VOLUME_SIZE).toBe('30');
    expect(cm.data.AZURE_INSTANCE_SIZE).toBe('Standard_DC2es_v5');
    expect(decodeInitDataAnnotation(cm.data.INITDATA as string).equals(toml)).toBe(true);
    expect(io.stderr).toContain('Intel TDX');

    io.stdout = '';
    const gcp = [
      'configmap',
      '--initdata',
      'initdata.toml',
      '--provider',
      'gcp',
      '--instance-size',
      'c3-standard-4',
      '--instance-sizes',
      'c3-standard-4, n2d-standard-2',
      '--spec-instance-size',
    ];
    expect(await initdataMain(gcp, io)).toBe(0);
    expect((parseYamlDocuments(io.stdout, 'cm')[0] as { data: Record<string, string> }).data).toMatchObject({
      CLOUD_PROVIDER: 'gcp',
      GCP_MACHINE_TYPE: 'c3-standard-4',
      GCP_INSTANCE_TYPES: 'c3-standard-4,n2d-standard-2',
      CLOUD_INSTANCE_SIZE: 'c3-standard-4',
    });
    expect(
      await initdataMain(['configmap', '--initdata', 'initdata.toml', '--provider', 'vsphere'], io),
    ).toBe(2);
    expect(
      await initdataMain(['configmap', '--initdata', 'initdata.toml', '--instance-sizes', 'a,,b'], io),
    ).toBe(2);
  });

  it('check accepts a policy-only initdata, as kata does, and says what the guest then gets', async () => {
    const { policy } = await configs();
    const io = memoryIO({
      'p.toml': `algorithm = "sha256"\nversion = "0.1.0"\n\n[data]\n"policy.rego" = '''\n${policy}'''\n`,
    });
    expect(await initdataMain(['check', 'p.toml'], io)).toBe(0);
    expect(io.stdout).toBe('p.toml: ok\n');
    expect(io.stderr).toContain('data has no aa.toml or cdh.toml: the guest gets the no-KBS defaults');
  });

  it("annotate writes kata's annotation, --annotation spec the spec's; an unknown name is a usage error", async () => {
    const { aa, cdh } = await configs();
    const io = memoryIO({
      'i.toml': buildInitData({ aa, cdh }).toml,
      'pod.yaml': 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n',
    });
    const keys = async (...extra: string[]) => {
      io.stdout = '';
      expect(await initdataMain(['annotate', 'pod.yaml', '--initdata', 'i.toml', ...extra], io)).toBe(0);
      const pod = parseYamlDocuments(io.stdout, 'pod')[0] as {
        metadata: { annotations: Record<string, string> };
      };
      return Object.keys(pod.metadata.annotations);
    };
    expect(await keys()).toEqual([KATA_INITDATA_ANNOTATION]);
    expect(await keys('--annotation', 'kata')).toEqual([KATA_INITDATA_ANNOTATION]);
    expect(await keys('--annotation', 'spec')).toEqual([SPEC_INITDATA_ANNOTATION]);
    expect(await keys('--annotation', 'sandbox')).toEqual([SPEC_INITDATA_ANNOTATION]);
    expect(await keys('--annotation', SPEC_INITDATA_ANNOTATION)).toEqual([SPEC_INITDATA_ANNOTATION]);
    expect(
      await initdataMain(['annotate', 'pod.yaml', '--initdata', 'i.toml', '--annotation', 'io.x/y'], io),
    ).toBe(2);
  });

  it('digest is over the exact bytes (a BOM or CRLF changes it)', async () => {
    const text = 'algorithm = "sha256"\r\nversion = "0.1.0"\r\n[data]\r\n';
    const bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]);
    const io = memoryIO({ 'i.toml': bytes });
    expect(await initdataMain(['digest', 'i.toml'], io)).toBe(0);
    expect(io.stdout.trim()).toBe(createHash('sha256').update(bytes).digest('hex'));
  });

  it('pcr8 needs sha256 unless --truncate', async () => {
    const io = memoryIO({ 'i.toml': 'algorithm = "sha384"\nversion = "0.1.0"\n[data]\n' });
    expect(await initdataMain(['pcr8', 'i.toml'], io)).toBe(1);
    expect(io.stderr).toContain('sha384');
    expect(await initdataMain(['pcr8', 'i.toml', '--truncate'], io)).toBe(0);
    expect(io.stdout.trim()).toMatch(/^[0-9a-f]{64}$/);
  });

  it('refuses bad initdata files and arguments', async () => {
    const io = memoryIO({
      'v.toml': 'algorithm = "sha256"\nversion = "0.2.0"\n[data]\n',
      'a.toml': 'algorithm = "sha-256"\nversion = "0.1.0"\n[data]\n',
      'g.toml': Buffer.from([0x80, 0x81]),
      'n.toml': 'not toml at all = = =',
      'nodata.toml': 'algorithm = "sha256"\nversion = "0.1.0"\n[data]\n',
    });
    for (const [argv, message] of [
      [['digest', 'v.toml'], /unsupported version/],
      [['digest', 'a.toml'], /unsupported algorithm/],
      [['encode', 'g.toml'], /not valid UTF-8/],
      [['pcr8', 'n.toml'], /not valid TOML/],
      [['check', 'nodata.toml'], /data has none of aa.toml, cdh.toml, policy.rego/],
      [['digest', 'missing.toml'], /cannot read/],
    ] as [string[], RegExp][]) {
      io.stderr = '';
      expect(await initdataMain(argv, io), argv.join(' ')).toBe(1);
      expect(io.stderr, argv.join(' ')).toMatch(message);
    }
    for (const argv of [
      [],
      ['nope'],
      ['digest'],
      ['digest', 'a', 'b'],
      ['build', '--aa', 'x'],
      ['configmap', '--initdata', 'v.toml', '--root-volume-size', '1e3', '--instance-size', 'x'],
      ['pcr8', '--truncate=yes', 'x'],
    ]) {
      expect(await initdataMain(argv, memoryIO()), argv.join(' ')).toBe(2);
    }
  });

  it('an initdata file over the size limit is refused', async () => {
    const io = memoryIO({ 'big.toml': Buffer.alloc(1024 * 1024 + 1, 0x20) });
    expect(await initdataMain(['digest', 'big.toml'], io)).toBe(1);
    expect(io.stderr).toContain('larger than');
  });
});
