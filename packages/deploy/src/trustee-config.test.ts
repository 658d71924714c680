import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseKbsConfigText } from '@broker/kbs';
import { referenceValueMessages } from '@broker/rvps-core';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { brokerctlMain } from './brokerctl.js';
import { InputError } from './errors.js';
import { memoryIO } from './testing/memory-io.js';
import { schemaProblems } from './testing/schemas.js';
import { parseTrusteeConfig } from './trustee-config.js';
import { parseYamlDocuments } from './yaml-io.js';

// biome-ignore lint/suspicious/noExplicitAny: rendered objects are read loosely in assertions
type Any = any;

/** trustee-operator's own files, unmodified (test/vectors/trustee-operator). */
const operatorFile = (...path: string[]) =>
  readFileSync(
    join(import.meta.dirname, '..', '..', '..', 'test', 'vectors', 'trustee-operator', ...path),
    'utf8',
  );
const SAMPLE = operatorFile('config', 'samples', 'trusteeconfig_sample.yaml');

const doc = (spec: Record<string, unknown>, metadata: Record<string, unknown> = { name: 't' }) => ({
  apiVersion: 'confidentialcontainers.org/v1alpha1',
  kind: 'TrusteeConfig',
  metadata,
  spec,
});

describe('parseTrusteeConfig', () => {
  it("reads trustee-operator's sample: Permissive, no TLS Secrets, its namespace", () => {
    const { config, warnings } = parseTrusteeConfig(parseYamlDocuments(SAMPLE, 's')[0]);
    expect(config).toMatchObject({
      name: 'trusteeconfig-sample',
      namespace: 'trustee-operator-system',
      profileType: 'Permissive',
      kbsServiceType: 'ClusterIP',
      kbsSecretResources: [],
      replicas: 1,
    });
    expect(config.httpsTlsSecretName).toBeUndefined();
    expect(config.tokenTlsSecretName).toBeUndefined();
    expect(config.labels['app.kubernetes.io/name']).toBe('trusteeconfig');
    expect(warnings).toEqual([
      'TrusteeConfig has no metadata.namespace: rendering into trustee-operator-system, where trustee-operator applies its samples (--namespace chooses another)',
      'TrusteeConfig spec.attestationTokenVerificationSpec.certificate is not a TrusteeConfig field: ignored, as the API server prunes it',
    ]);
  });

  it('reads Restricted with both TLS Secrets, and takes --namespace when the document names none', () => {
    const { config, warnings } = parseTrusteeConfig(
      doc({
        profileType: 'Restricted',
        kbsServiceType: 'NodePort',
        httpsSpec: { tlsSecretName: 'kbs-https' },
        attestationTokenVerificationSpec: { tlsSecretName: 'kbs-token' },
        tlsConfig: { profile: 'intermediate' },
      }),
      { namespace: 'trustee' },
    );
    expect(config).toMatchObject({
      namespace: 'trustee',
      profileType: 'Restricted',
      kbsServiceType: 'NodePort',
      httpsTlsSecretName: 'kbs-https',
      tokenTlsSecretName: 'kbs-token',
    });
    expect(warnings).toEqual([]);
  });

  it.each([
    [doc({ ibmSE: { pvName: 'x' } }), 'TrusteeConfig spec.ibmSE: IBM Secure Execution is not supported'],
    [
      doc({ tlsConfig: { profile: 'custom', minVersion: '1.0' } }),
      'TrusteeConfig spec.tlsConfig.minVersion: TLS 1.0: this KBS speaks TLS 1.2 and 1.3 only',
    ],
    [
      doc({ tlsConfig: { profile: 'strict' } }),
      'TrusteeConfig spec.tlsConfig.profile: "strict" is not one of',
    ],
    [doc({ profileType: 'Restricted' }), 'TrusteeConfig spec.httpsSpec.tlsSecretName: is required'],
    [doc({ profileType: 'Strict' }), 'TrusteeConfig spec.profileType: "Strict" is not one of'],
    [
      { ...doc({}), apiVersion: 'other.io/v1' },
      'TrusteeConfig apiVersion: must be confidentialcontainers.org/v1alpha1',
    ],
    [doc({}, { name: 'Bad_Name' }), 'TrusteeConfig metadata.name'],
    [doc({ httpsSpec: { tlsSecretName: 'UPPER' } }), 'is not a valid Secret name'],
  ])('refuses by name: %#', (input, message) => {
    expect(() => parseTrusteeConfig(input)).toThrow(InputError);
    expect(() => parseTrusteeConfig(input)).toThrow(message);
  });
});

describe('brokerctl render on a TrusteeConfig', () => {
  it("renders trustee-operator's sample as a Permissive BrokerConfig: valid objects, a KBS config our KBS loads", async () => {
    const io = memoryIO({ 'trusteeconfig_sample.yaml': SAMPLE });
    const code = await brokerctlMain(
      ['render', 'trusteeconfig_sample.yaml', '--cluster-domain', 'apps.example.com'],
      io,
    );
    expect(code, io.stderr).toBe(0);
    expect(io.stderr).toContain('brokerctl: warning: TrusteeConfig has no metadata.namespace');
    const objects = parseYamlDocuments(io.stdout, 'rendered') as Any[];
    for (const o of objects) expect(schemaProblems(o), `${o.kind}/${o.metadata.name}`).toEqual([]);
    expect(objects.every((o) => o.metadata.namespace === 'trustee-operator-system')).toBe(true);
    const cm = objects.find(
      (o) => o.kind === 'ConfigMap' && o.metadata.name === 'trusteeconfig-sample-kbs-config',
    );
    const kbs = parseKbsConfigText(cm.data['kbs-config.toml']);
    expect(kbs.httpServer.insecureHttp).toBe(true);
    expect(kbs.admin.mode).toBe('DenyAll');
  });

  it('--namespace places a TrusteeConfig without one; two config documents are refused', async () => {
    const io = memoryIO({ 't.yaml': SAMPLE });
    expect(
      await brokerctlMain(
        ['render', 't.yaml', '--cluster-domain', 'a.example', '--namespace', 'trustee'],
        io,
      ),
    ).toBe(0);
    expect((parseYamlDocuments(io.stdout, 'r') as Any[])[0].metadata.namespace).toBe('trustee');
    const two = memoryIO({ 't.yaml': `${SAMPLE}\n---\n${stringify(doc({}))}` });
    expect(await brokerctlMain(['render', 't.yaml', '--cluster-domain', 'a.example'], two)).toBe(1);
    expect(two.stderr).toContain('expected one BrokerConfig or TrusteeConfig document, found 2');
  });
});

describe("trustee-operator's reference-values ConfigMaps", () => {
  it('the sample ConfigMap and the empty template read as reference values (RVPS sample messages)', () => {
    const cm = parseYamlDocuments(
      operatorFile('config', 'samples', 'all-in-one', 'rvps-reference-values.yaml'),
      'cm',
    )[0] as Any;
    const messages = referenceValueMessages(JSON.parse(cm.data.reference_value)) as Any[];
    expect(messages).toHaveLength(1);
    expect(JSON.parse(Buffer.from(messages[0].payload, 'base64').toString())).toEqual({ svn: 1 });
    expect(
      referenceValueMessages(JSON.parse(operatorFile('config', 'templates', 'rvps-reference-values.json'))),
    ).toEqual([]);
  });
});

describe("trustee-operator's KbsConfig sample", () => {
  it('is valid against our KbsConfig CRD (same field names), in our group', () => {
    const sample = parseYamlDocuments(
      operatorFile('config', 'samples', 'all-in-one', 'kbsconfig_sample.yaml'),
      'kbsconfig',
    )[0] as Any;
    expect(sample.spec.kbsDeploymentType).toBe('AllInOneDeployment');
    expect(schemaProblems({ ...sample, apiVersion: 'broker.confidentialcontainers.org/v1alpha1' })).toEqual(
      [],
    );
  });
});
