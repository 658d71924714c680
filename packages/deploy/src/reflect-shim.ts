// @peculiar/x509 loads tsyringe, which throws at import time unless `Reflect.getMetadata` and friends
// exist (the decorator-metadata proposal). No polyfill package is a dependency, so this supplies a
// minimal metadata store. Import it before @peculiar/x509; an existing implementation is kept.

type Target = object;
type Property = string | symbol | undefined;

const metadataStore = new WeakMap<Target, Map<Property, Map<unknown, unknown>>>();

function entries(target: Target, property: Property, create: boolean): Map<unknown, unknown> | undefined {
  let perTarget = metadataStore.get(target);
  if (perTarget === undefined && create) {
    perTarget = new Map();
    metadataStore.set(target, perTarget);
  }
  let perProperty = perTarget?.get(property);
  if (perProperty === undefined && create && perTarget !== undefined) {
    perProperty = new Map();
    perTarget.set(property, perProperty);
  }
  return perProperty;
}

function* prototypeChain(target: Target): Generator<Target> {
  for (let t: Target | null = target; t !== null; t = Object.getPrototypeOf(t) as Target | null) yield t;
}

const shim = {
  defineMetadata(key: unknown, value: unknown, target: Target, property?: string | symbol): void {
    entries(target, property, true)?.set(key, value);
  },
  getOwnMetadata(key: unknown, target: Target, property?: string | symbol): unknown {
    return entries(target, property, false)?.get(key);
  },
  getMetadata(key: unknown, target: Target, property?: string | symbol): unknown {
    for (const t of prototypeChain(target)) {
      const e = entries(t, property, false);
      if (e?.has(key)) return e.get(key);
    }
    return undefined;
  },
  hasMetadata(key: unknown, target: Target, property?: string | symbol): boolean {
    for (const t of prototypeChain(target)) if (entries(t, property, false)?.has(key)) return true;
    return false;
  },
  metadata(key: unknown, value: unknown) {
    return (target: Target, property?: string | symbol): void =>
      shim.defineMetadata(key, value, target, property);
  },
};

const reflect = Reflect as unknown as Record<string, unknown>;
if (typeof reflect.getMetadata !== 'function') Object.assign(reflect, shim);
