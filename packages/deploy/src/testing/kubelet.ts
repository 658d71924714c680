// Test-only: a rendered Deployment's volumes and environment made the way kubelet makes them, so that
// tests run our KBS on exactly what `render` produced.
import { createPrivateKey, sign } from 'node:crypto';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { KubeObject } from '../render.js';

// biome-ignore lint/suspicious/noExplicitAny: plain JSON of rendered objects
type Any = any;

/** A directory as kubelet mounts a Secret or ConfigMap: `..data` → a timestamped directory, one symlink per key. */
export function kubeMount(dir: string, files: Record<string, Buffer>): void {
  const stamp = '..2026_01_01_00_00_00.000000001';
  mkdirSync(join(dir, stamp), { recursive: true });
  for (const [k, v] of Object.entries(files)) writeFileSync(join(dir, stamp, k), v);
  symlinkSync(stamp, join(dir, '..data'));
  for (const k of Object.keys(files)) symlinkSync(join('..data', k), join(dir, k));
}

function dataOf(o: Any): Record<string, Buffer> {
  const out: Record<string, Buffer> = {};
  for (const [k, v] of Object.entries(o.data ?? {})) {
    out[k] = o.kind === 'Secret' ? Buffer.from(v as string, 'base64') : Buffer.from(v as string, 'utf8');
  }
  return out;
}

function container(objects: readonly KubeObject[]): Any {
  const d = objects.find((o) => o.kind === 'Deployment') as Any;
  return d.spec.template.spec.containers[0];
}

/**
 * Lays out the Deployment's volumes under `root` as kubelet would, with `extra` Secrets and ConfigMaps
 * that exist in the cluster (the resources, an offline VCEK cache, a GPU policy).
 */
export function materialize(
  root: string,
  objects: readonly KubeObject[],
  extra: Record<string, Record<string, Buffer>>,
): void {
  const d = objects.find((o) => o.kind === 'Deployment') as Any;
  const pod = d.spec.template.spec;
  const byName = (kind: string, name: string) =>
    objects.find((o) => o.kind === kind && o.metadata.name === name);
  // Parents first, so that nested mounts land inside their emptyDir.
  const mounts = [...pod.containers[0].volumeMounts].sort(
    (a: Any, b: Any) => a.mountPath.length - b.mountPath.length,
  );
  for (const m of mounts) {
    const v = pod.volumes.find((x: Any) => x.name === m.name);
    const at = join(root, m.mountPath);
    if (v.emptyDir) {
      mkdirSync(at, { recursive: true });
      continue;
    }
    // A projected volume: the chosen keys of each source ConfigMap, in one directory.
    const projected = (sources: Any[]): Record<string, Buffer> => {
      const out: Record<string, Buffer> = {};
      for (const src of sources) {
        const data = extra[src.configMap.name] ?? dataOf(byName('ConfigMap', src.configMap.name));
        const items: Any[] = src.configMap.items ?? Object.keys(data).map((key) => ({ key, path: key }));
        for (const it of items) out[it.path] = data[it.key] as Buffer;
      }
      return out;
    };
    const files = v.secret
      ? (extra[v.secret.secretName] ?? dataOf(byName('Secret', v.secret.secretName)))
      : v.projected
        ? projected(v.projected.sources)
        : (extra[v.configMap.name] ?? dataOf(byName('ConfigMap', v.configMap.name)));
    if (m.subPath !== undefined) {
      mkdirSync(dirname(at), { recursive: true });
      writeFileSync(at, files[m.subPath] as Buffer);
    } else {
      kubeMount(at, files);
    }
  }
}

/**
 * The container's environment as kubelet resolves it: plain values, and `valueFrom.secretKeyRef` read from
 * `secrets` (Secrets that exist in the cluster, not among the rendered objects). A reference to a missing
 * Secret or key throws, as the pod would not start.
 */
export function containerEnv(
  objects: readonly KubeObject[],
  secrets: Record<string, Record<string, string>>,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of container(objects).env ?? []) {
    if (e.value !== undefined) {
      env[e.name] = e.value;
      continue;
    }
    const ref = e.valueFrom?.secretKeyRef;
    if (ref === undefined) throw new Error(`env ${e.name}: neither value nor secretKeyRef`);
    const value = secrets[ref.name]?.[ref.key];
    if (value === undefined) throw new Error(`env ${e.name}: Secret ${ref.name} has no key ${ref.key}`);
    env[e.name] = value;
  }
  return env;
}

/** An admin bearer JWT (ES256) signed with `keyPem`. */
export function adminToken(keyPem: string, role = 'admin'): string {
  const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const input = `${b64({ alg: 'ES256', typ: 'JWT' })}.${b64({ role, exp: Math.floor(Date.now() / 1000) + 300 })}`;
  const sig = sign('sha256', Buffer.from(input), {
    key: createPrivateKey(keyPem),
    dsaEncoding: 'ieee-p1363',
  });
  return `${input}.${sig.toString('base64url')}`;
}

/** The rendered kbs-config.toml with its paths under `root` and its listeners on free loopback ports. */
export function localKbsConfig(toml: string, root: string): string {
  return toml
    .replaceAll('"/etc/', `"${root}/etc/`)
    .replaceAll('"/opt/', `"${root}/opt/`)
    .replace('"0.0.0.0:8080"', '"127.0.0.1:0"')
    .replace('"0.0.0.0:9090"', '"127.0.0.1:0"');
}
