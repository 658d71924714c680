import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { configMapYaml, REFERENCE_VALUES_KEY, referenceValuesConfigMap } from './configmap.js';
import { UsageError } from './errors.js';
import { rvpsSampleMessage, sampleProvenance } from './rvps.js';

const values = { snp_pcr11: ['bb'], snp_pcr03: ['aa'] };

describe('rvpsSampleMessage', () => {
  it('is a version 0.1.0 sample message whose payload is std base64 of the JSON provenance', () => {
    const m = rvpsSampleMessage(values);
    expect(m.version).toBe('0.1.0');
    expect(m.type).toBe('sample');
    expect(m.payload).toMatch(/^[A-Za-z0-9+/]+={0,2}$/);
    expect(Buffer.from(m.payload, 'base64').toString()).toBe('{"snp_pcr03":["aa"],"snp_pcr11":["bb"]}');
    expect(sampleProvenance(values)).toBe('{"snp_pcr03":["aa"],"snp_pcr11":["bb"]}');
  });
});

describe('referenceValuesConfigMap', () => {
  it('carries the message as reference-values.json, with names, labels and annotations', () => {
    const cm = referenceValuesConfigMap(values, {
      config: 'broker',
      namespace: 'kbs-ns',
      annotations: { 'broker.confidentialcontainers.org/pod-vm-image-tag': '1.0' },
    });
    const doc = parse(configMapYaml(cm)) as typeof cm;
    expect(doc.apiVersion).toBe('v1');
    expect(doc.kind).toBe('ConfigMap');
    expect(doc.metadata.name).toBe('broker-rvps-reference-values');
    expect(doc.metadata.namespace).toBe('kbs-ns');
    expect(doc.metadata.labels['app.kubernetes.io/instance']).toBe('broker');
    expect(doc.metadata.annotations).toEqual({ 'broker.confidentialcontainers.org/pod-vm-image-tag': '1.0' });
    expect(Object.keys(doc.data)).toEqual([REFERENCE_VALUES_KEY]);
    const messages = JSON.parse(doc.data[REFERENCE_VALUES_KEY] as string);
    expect(messages).toEqual([rvpsSampleMessage(values)]);
  });

  it('refuses names Kubernetes would refuse', () => {
    expect(() => referenceValuesConfigMap(values, { config: 'Broker', namespace: 'ns' })).toThrow(UsageError);
    expect(() => referenceValuesConfigMap(values, { config: 'b', namespace: 'n_s' })).toThrow(/namespace/);
    expect(() => referenceValuesConfigMap(values, { config: 'b', namespace: 'x'.repeat(64) })).toThrow(
      /namespace/,
    );
  });
});
