// Test-only schema checks of rendered objects. Kubernetes and cert-manager objects go through the
// kubernetes-models classes (their published OpenAPI schemas compiled with ajv); those schemas leave
// objects open, so an extra probe finds fields no schema defines. The CRD-defined kinds and the Route are
// checked with ajv against closed schemas.

import { Certificate } from '@kubernetes-models/cert-manager/cert-manager.io/v1/Certificate';
import { Issuer } from '@kubernetes-models/cert-manager/cert-manager.io/v1/Issuer';
import { Ajv, type ValidateFunction } from 'ajv';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { renderCrds } from '../crds.js';
import { ROUTE_SCHEMA } from './route-schema.js';

type AjvError = { instancePath: string; message?: string };
type ModelClass = new (data: never) => { validate(): void };

const MODELS: Record<string, ModelClass> = {
  'v1/Secret': Secret as unknown as ModelClass,
  'v1/ConfigMap': ConfigMap as unknown as ModelClass,
  'v1/Service': Service as unknown as ModelClass,
  'apps/v1/Deployment': Deployment as unknown as ModelClass,
  'apiextensions.k8s.io/v1/CustomResourceDefinition': CustomResourceDefinition as unknown as ModelClass,
  'cert-manager.io/v1/Issuer': Issuer as unknown as ModelClass,
  'cert-manager.io/v1/Certificate': Certificate as unknown as ModelClass,
};

/**
 * JSONSchemaProps fields that the compiled CustomResourceDefinition schema does not check (any JSON, or
 * left out by the generator): the probe cannot tell them from unknown ones, so they are trusted by name
 * inside an `openAPIV3Schema`.
 */
function untypedSchemaField(path: readonly (string | number)[], key: string): boolean {
  if (!path.includes('openAPIV3Schema')) return false;
  return key === 'description' || key === 'default' || key === 'example' || key.startsWith('x-kubernetes-');
}

/**
 * Fields whose content the published schemas do not describe: JSONSchemaProps `items` is
 * JSONSchemaPropsOrArray and `additionalProperties` JSONSchemaPropsOrBool, typed but not expanded; their
 * content is checked where the CRD is used.
 */
const SCHEMALESS_CHILDREN = new Set(['items', 'additionalProperties']);

function modelErrors(cls: ModelClass, obj: unknown): AjvError[] {
  try {
    new cls(obj as never).validate();
    return [];
  } catch (e) {
    const errors = (e as { errors?: AjvError[] }).errors;
    if (!Array.isArray(errors)) throw e;
    return errors;
  }
}

function pointer(path: readonly (string | number)[]): string {
  return path.map((p) => `/${String(p).replaceAll('~', '~0').replaceAll('/', '~1')}`).join('');
}

function getAt(root: unknown, path: readonly (string | number)[]): unknown {
  let v = root;
  for (const p of path) v = (v as Record<string | number, unknown>)[p];
  return v;
}

/**
 * Fields no schema defines. A known property with a type fails validation when its value is replaced by a
 * Symbol (no JSON type matches one); an unknown property is ignored by the open schemas. One property is
 * replaced at a time, since a validator may stop at the first error of a branch.
 */
function unknownFields(cls: ModelClass, obj: unknown): string[] {
  const found: string[] = [];
  const walk = (node: unknown, path: (string | number)[]) => {
    if (Array.isArray(node)) {
      for (const [i, x] of node.entries()) walk(x, [...path, i]);
      return;
    }
    if (typeof node !== 'object' || node === null) return;
    for (const k of Object.keys(node)) {
      if (untypedSchemaField(path, k)) continue;
      const clone = structuredClone(obj);
      (getAt(clone, path) as Record<string, unknown>)[k] = Symbol(k);
      const at = pointer([...path, k]);
      const known = modelErrors(cls, clone).some(
        (e) => e.instancePath === at || e.instancePath.startsWith(`${at}/`),
      );
      if (!known) found.push(at);
      else if (!SCHEMALESS_CHILDREN.has(k)) walk((node as Record<string, unknown>)[k], [...path, k]);
    }
  };
  walk(obj, []);
  return found;
}

/** Closes every object schema that lists properties, so unknown fields fail (what `kubectl --validate=strict` does). */
function closeSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closeSchema);
  if (typeof schema !== 'object' || schema === null) return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) {
    if (k.startsWith('x-kubernetes-')) continue;
    out[k] =
      k === 'properties'
        ? Object.fromEntries(Object.entries(v as object).map(([pk, pv]) => [pk, closeSchema(pv)]))
        : closeSchema(v);
  }
  const s = schema as Record<string, unknown>;
  if (
    s.properties !== undefined &&
    s.additionalProperties === undefined &&
    s['x-kubernetes-preserve-unknown-fields'] !== true
  ) {
    out.additionalProperties = false;
  }
  return out;
}

const ajv = new Ajv({ allErrors: true, strict: false, validateFormats: false });
const routeValidator = ajv.compile(ROUTE_SCHEMA);
const crdValidators = new Map<string, ValidateFunction>();

function crdValidator(apiVersion: string, kind: string): ValidateFunction | undefined {
  const key = `${apiVersion}/${kind}`;
  const have = crdValidators.get(key);
  if (have !== undefined) return have;
  const group = apiVersion.split('/')[0] as string;
  for (const crd of renderCrds(group)) {
    const v = crd.spec.versions[0];
    if (crd.spec.names.kind !== kind || `${group}/${v?.name}` !== apiVersion) continue;
    const fn = ajv.compile(closeSchema(v?.schema?.openAPIV3Schema) as object);
    crdValidators.set(key, fn);
    return fn;
  }
  return undefined;
}

function ajvMessages(fn: ValidateFunction): string[] {
  return (fn.errors ?? []).map(
    (e) =>
      `${e.instancePath || '/'} ${e.message ?? 'invalid'}${e.params && 'additionalProperty' in e.params ? ` (${String(e.params.additionalProperty)})` : ''}`,
  );
}

/** Problems of one rendered object; empty when it is valid. */
export function schemaProblems(obj: unknown): string[] {
  if (typeof obj !== 'object' || obj === null) return ['not an object'];
  const { apiVersion, kind } = obj as { apiVersion?: string; kind?: string };
  const key = `${apiVersion}/${kind}`;
  const cls = MODELS[key];
  if (cls !== undefined) {
    const errors = modelErrors(cls, obj).map((e) => `${e.instancePath || '/'} ${e.message ?? 'invalid'}`);
    if (errors.length > 0) return errors;
    return unknownFields(cls, obj).map((p) => `${p} is not a field of ${kind}`);
  }
  if (key === 'route.openshift.io/v1/Route') {
    return routeValidator(obj) ? [] : ajvMessages(routeValidator);
  }
  if (typeof apiVersion === 'string' && typeof kind === 'string') {
    const fn = crdValidator(apiVersion, kind);
    if (fn !== undefined) return fn(obj) ? [] : ajvMessages(fn);
  }
  return [`no schema for ${key}`];
}
