// The sample pod: valid against Kubernetes' published Pod schema (kubernetes-models), no field the
// schema does not define, and the fields the spec's "Workload pod fields used" table requires.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Pod } from 'kubernetes-models/v1/Pod';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const HERE = import.meta.dirname;
const text = readFileSync(join(HERE, 'workload-pod.yaml'), 'utf8');

type Errors = { instancePath: string; message?: string }[];

function schemaErrors(obj: unknown): Errors {
  try {
    new Pod(obj as never).validate();
    return [];
  } catch (e) {
    const errors = (e as { errors?: Errors }).errors;
    if (!Array.isArray(errors)) throw e;
    return errors;
  }
}

/**
 * Kubernetes' schemas are open (unknown fields pass), so each field is probed: replaced by a value no JSON
 * type matches, a field the schema defines fails validation, an unknown one does not.
 */
function unknownFields(obj: unknown): string[] {
  const found: string[] = [];
  const walk = (node: unknown, path: (string | number)[]) => {
    if (Array.isArray(node)) {
      for (const [i, x] of node.entries()) walk(x, [...path, i]);
      return;
    }
    if (typeof node !== 'object' || node === null) return;
    for (const key of Object.keys(node)) {
      const copy = structuredClone(obj) as Record<string, unknown>;
      let at: Record<string | number, unknown> = copy;
      for (const p of path) at = at[p] as Record<string | number, unknown>;
      at[key] = Symbol('probe');
      if (schemaErrors(copy).length === 0) found.push([...path, key].join('.'));
      // Values of free-form maps (labels, annotations) are typed strings, so they are probed too.
      walk((node as Record<string, unknown>)[key], [...path, key]);
    }
  };
  walk(obj, []);
  return found;
}

type Container = {
  name: string;
  env?: { name: string; value: string }[];
  securityContext: Record<string, unknown>;
  volumeMounts?: { name: string; mountPath: string }[];
  command?: string[];
};
const pod = parse(text) as {
  metadata: { annotations?: Record<string, string> };
  spec: {
    runtimeClassName: string;
    initContainers: Container[];
    containers: Container[];
    volumes: { name: string; emptyDir?: object; secret?: { secretName: string } }[];
  };
};

describe('examples/workload-pod.yaml', () => {
  it('is a valid Pod with no unknown field', () => {
    expect(schemaErrors(pod)).toEqual([]);
    expect(unknownFields(pod)).toEqual([]);
    // The probe does find a misspelt field.
    const typo = structuredClone(pod) as unknown as { spec: Record<string, unknown> };
    typo.spec.runtimeClass = 'sandbox-remote';
    expect(unknownFields(typo)).toEqual(['spec.runtimeClass']);
  });

  it('runs in the confidential runtime with the restricted security context everywhere', () => {
    expect(pod.spec.runtimeClassName).toBe('sandbox-remote');
    for (const c of [...pod.spec.initContainers, ...pod.spec.containers]) {
      expect(c.securityContext, c.name).toEqual({
        privileged: false,
        allowPrivilegeEscalation: false,
        runAsNonRoot: true,
        runAsUser: expect.any(Number),
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'RuntimeDefault' },
      });
    }
  });

  it('fetches the key in an init container into an emptyDir that the app reads from DECRYPTION_KEY_PATH', () => {
    const [init] = pod.spec.initContainers;
    const app = pod.spec.containers.find((c) => c.name === 'app') as Container;
    const keyMount = init?.volumeMounts?.[0];
    expect(pod.spec.volumes.find((v) => v.name === keyMount?.name)?.emptyDir).toBeDefined();
    const keyPath = app.env?.find((e) => e.name === 'DECRYPTION_KEY_PATH')?.value ?? '';
    const appMount = app.volumeMounts?.find((m) => m.name === keyMount?.name);
    expect(keyPath.startsWith(`${appMount?.mountPath}/`)).toBe(true);
    const fetch = init?.command?.join(' ') ?? '';
    expect(fetch).toContain('http://127.0.0.1:8006/cdh/resource/default/');
    expect(fetch).toContain(`-o ${keyPath.replace(appMount?.mountPath ?? '', keyMount?.mountPath ?? '')}`);
    expect(app.env?.find((e) => e.name === 'DATASET_URL')?.value).toMatch(/^https?:\/\//);
  });

  it('mounts the sealed secret under /sealed', () => {
    const app = pod.spec.containers.find((c) => c.name === 'app') as Container;
    const secretVolumes = pod.spec.volumes.filter((v) => v.secret !== undefined).map((v) => v.name);
    const mounts = app.volumeMounts?.filter((m) => secretVolumes.includes(m.name)) ?? [];
    expect(mounts.length).toBeGreaterThan(0);
    for (const m of mounts) expect(m.mountPath.startsWith('/sealed/')).toBe(true);
  });

  it('has a lazy-attestation sidecar polling the status resource every 30 s and failing otherwise', () => {
    const watch = pod.spec.containers.find((c) => c.name === 'attestation-watch') as Container;
    const script = watch.command?.join(' ') ?? '';
    expect(script).toContain('http://127.0.0.1:8006/cdh/resource/default/attestation-status/status');
    expect(script).toMatch(/"\$answer" != "success"/);
    expect(script).toMatch(/exit 1/);
    expect(script).toMatch(/sleep 30\b/);
  });
});
