import { describe, expect, it } from 'vitest';
import { addSecretPlan } from './add-secret.js';
import { parseBrokerConfig } from './broker-config.js';
import { renderCrds } from './crds.js';
import { BrokerConfigError } from './errors.js';
import { brokerConfigDoc } from './testing/fixtures.js';
import { schemaProblems } from './testing/schemas.js';

// biome-ignore lint/suspicious/noExplicitAny: test access to nested plain JSON
type Any = any;

describe('renderCrds', () => {
  it('BrokerConfig and KbsConfig CRDs in the group, valid CustomResourceDefinitions', () => {
    const crds = renderCrds('example.org');
    expect(crds.map((c) => c.metadata?.name)).toEqual([
      'brokerconfigs.example.org',
      'kbsconfigs.example.org',
    ]);
    for (const c of crds) {
      expect(c.spec.group).toBe('example.org');
      expect(c.spec.versions[0]?.name).toBe('v1alpha1');
      expect(c.spec.versions[0]?.schema?.openAPIV3Schema?.type).toBe('object');
      expect(schemaProblems(c), c.metadata?.name).toEqual([]);
    }
    const broken = structuredClone(crds[0]) as Any;
    broken.spec.versions[0].schema.openAPIV3Schema.properties.spec.propertes = {};
    expect(schemaProblems(broken).length).toBeGreaterThan(0);
  });

  it('the BrokerConfig schema accepts what parseBrokerConfig accepts and refuses unknown fields', () => {
    const good = [
      brokerConfigDoc(),
      brokerConfigDoc({ replicas: 2, redisSpec: { urlSecretName: 'r' }, kbsImage: 'registry/kbs:1' }),
      brokerConfigDoc({ replicas: 3, postgresSpec: { urlSecretName: 'p', urlSecretKey: 'uri' } }),
      brokerConfigDoc({
        replicas: 2,
        redisSpec: { urlSecretName: 'r' },
        postgresSpec: { urlSecretName: 'p' },
      }),
      brokerConfigDoc({ profileType: 'Permissive', httpsSpec: {}, attestationTokenVerificationSpec: {} }),
    ];
    for (const d of good) {
      parseBrokerConfig(d);
      expect(schemaProblems(d)).toEqual([]);
    }
    const bad = brokerConfigDoc({ kbsSecretResource: ['x'] });
    expect(() => parseBrokerConfig(bad)).toThrow(BrokerConfigError);
    expect(schemaProblems(bad).join()).toContain('kbsSecretResource');
    const badEnum = brokerConfigDoc({ profileType: 'Strict' });
    expect(() => parseBrokerConfig(badEnum)).toThrow(
      /profileType: "Strict" is not one of Restricted, Permissive/,
    );
    expect(schemaProblems(badEnum).length).toBeGreaterThan(0);
    for (const badPg of [
      brokerConfigDoc({ postgresSpec: {} }),
      brokerConfigDoc({ postgresSpec: { urlSecretName: 'p', password: 'x' } }),
      brokerConfigDoc({ postgresSpec: { urlSecretName: 'p', urlSecretKey: 'a b' } }),
    ]) {
      expect(() => parseBrokerConfig(badPg)).toThrow(BrokerConfigError);
      expect(schemaProblems(badPg).length, JSON.stringify(badPg.spec)).toBeGreaterThan(0);
    }
    // The API server's side of the replicas check (CEL, which ajv does not run): Redis or PostgreSQL.
    const bcRules = (renderCrds('example.org')[0] as Any).spec.versions[0].schema.openAPIV3Schema.properties
      .spec['x-kubernetes-validations'] as { rule: string; message: string }[];
    expect(bcRules.find((x) => x.rule.includes('self.replicas'))).toEqual({
      rule: '!has(self.replicas) || self.replicas <= 1 || has(self.redisSpec) || has(self.postgresSpec)',
      message: 'more than one replica needs redisSpec or postgresSpec (shared handshake sessions)',
    });
    const badName = brokerConfigDoc({ kbsSecretResources: ['Not_A_Name'] });
    expect(() => parseBrokerConfig(badName)).toThrow(BrokerConfigError);
    expect(schemaProblems(badName).length).toBeGreaterThan(0);
  });
});

describe('KbsConfig CRD and trustee-operator', () => {
  // The JSON names of trustee-operator's KbsConfigSpec (api/v1alpha1/kbsconfig_types.go), with its casing.
  const UPSTREAM_FIELDS = [
    'kbsConfigMapName',
    'kbsAsConfigMapName',
    'kbsRvpsConfigMapName',
    'kbsRvpsRefValuesConfigMapName',
    'kbsAuthSecretName',
    'kbsServiceType',
    'kbsDeploymentType',
    'kbsHttpsKeySecretName',
    'kbsHttpsCertSecretName',
    'kbsAttestationKeySecretName',
    'kbsAttestationCertSecretName',
    'kbsSecretResources',
    'kbsAttestationPolicyConfigMapName',
    'kbsGpuAttestationPolicyConfigMapName',
    'kbsResourcePolicyConfigMapName',
    'ibmSEConfigSpec',
    'KbsEnvVars',
    'kbsLocalCertCacheSpec',
    'KbsDeploymentSpec',
  ];
  const spec = () =>
    (renderCrds('example.org')[1] as Any).spec.versions[0].schema.openAPIV3Schema.properties.spec;

  it('declares every trustee-operator field with its casing, and no tdxConfigSpec (removed upstream)', () => {
    const names = Object.keys(spec().properties);
    for (const f of UPSTREAM_FIELDS) expect(names, f).toContain(f);
    expect(names).not.toContain('tdxConfigSpec');
    expect(names).not.toContain('kbsDeploymentSpec');
    // Ours only: the Redis and PostgreSQL of the replicas.
    expect(names.filter((n) => !UPSTREAM_FIELDS.includes(n))).toEqual(['kbsRedisSpec', 'kbsPostgresSpec']);
  });

  it('refuses by name, with the reason, the fields that mean nothing here', () => {
    const rules = spec()['x-kubernetes-validations'] as { rule: string; message: string }[];
    for (const f of ['kbsAsConfigMapName', 'kbsRvpsConfigMapName', 'ibmSEConfigSpec']) {
      const r = rules.find((x) => x.rule === `!has(self.${f})`);
      expect(r?.message, f).toMatch(new RegExp(`^${f} is not supported here: .+`));
    }
    // Rendered as trustee-operator does (operator-fields.test.ts): declared, not refused.
    for (const f of ['kbsGpuAttestationPolicyConfigMapName', 'kbsLocalCertCacheSpec']) {
      expect(rules.find((x) => x.rule === `!has(self.${f})`)).toBeUndefined();
      expect(spec().properties).toHaveProperty(f);
    }
    expect(rules.find((x) => x.rule.includes('kbsDeploymentType'))?.message).toMatch(
      /MicroservicesDeployment is not supported here/,
    );
  });
});

describe('addSecretPlan', () => {
  it('gives the spec patch, the Deployment mount and the restart', () => {
    const plan = addSecretPlan('kbsres2', { config: 'broker', namespace: 'trustee-ns' });
    expect(plan.kbsConfigPatch).toEqual([
      { op: 'add', path: '/spec/kbsSecretResources/-', value: 'kbsres2' },
    ]);
    expect(plan.deploymentPatch).toEqual([
      {
        op: 'add',
        path: '/spec/template/spec/volumes/-',
        value: { name: 'res-kbsres2', secret: { secretName: 'kbsres2' } },
      },
      {
        op: 'add',
        path: '/spec/template/spec/containers/0/volumeMounts/-',
        value: {
          name: 'res-kbsres2',
          mountPath: '/etc/kbs/resources/default/kbsres2',
          readOnly: true,
        },
      },
    ]);
    expect(plan.commands).toEqual([
      `kubectl patch kbsconfig broker-kbs-config -n 'trustee-ns' --type=json -p '[{"op":"add","path":"/spec/kbsSecretResources/-","value":"kbsres2"}]'`,
      `kubectl patch deployment kbs-deployment -n 'trustee-ns' --type=json -p '${JSON.stringify(plan.deploymentPatch)}'`,
      `kubectl rollout restart deployment/kbs-deployment -n 'trustee-ns'`,
    ]);
  });

  it('uses a digest volume name for Secret names that are not DNS labels', () => {
    const plan = addSecretPlan('a.b.c', { config: 'broker', namespace: 'ns' });
    expect((plan.deploymentPatch[0] as Any).value.name).toMatch(/^res-[0-9a-f]{16}$/);
  });

  it('refuses names that could break the commands or the patch', () => {
    for (const name of ["x'; rm -rf /", 'UPPER', '', 'a/b', '../x']) {
      expect(() => addSecretPlan(name, { config: 'broker', namespace: 'ns' }), name).toThrow(
        BrokerConfigError,
      );
    }
    expect(() => addSecretPlan('ok', { config: 'Bad', namespace: 'ns' })).toThrow(BrokerConfigError);
    expect(() => addSecretPlan('ok', { config: 'broker', namespace: 'ns x' })).toThrow(BrokerConfigError);
  });
});
