// @peculiar/x509 resolves its algorithm providers through tsyringe, which refuses to load unless
// the Reflect metadata API (the `reflect-metadata` proposal) exists. No polyfill package is
// installed, so this module supplies the five functions tsyringe and tslib's decorator helpers
// call. It must be imported before @peculiar/x509; it leaves an existing implementation alone.

type Key = unknown;
type Prop = string | symbol | undefined;

const store = new WeakMap<object, Map<Prop, Map<Key, unknown>>>();

function table(target: object, prop: Prop, create: boolean): Map<Key, unknown> | undefined {
  let byProp = store.get(target);
  if (byProp === undefined) {
    if (!create) return undefined;
    byProp = new Map();
    store.set(target, byProp);
  }
  let entries = byProp.get(prop);
  if (entries === undefined) {
    if (!create) return undefined;
    entries = new Map();
    byProp.set(prop, entries);
  }
  return entries;
}

function getOwnMetadata(key: Key, target: object, prop?: string | symbol): unknown {
  return table(target, prop, false)?.get(key);
}

function getMetadata(key: Key, target: object, prop?: string | symbol): unknown {
  // Metadata is inherited along the prototype chain, as the proposal specifies.
  for (let o: object | null = target; o !== null; o = Object.getPrototypeOf(o) as object | null) {
    const entries = table(o, prop, false);
    if (entries?.has(key)) return entries.get(key);
  }
  return undefined;
}

function defineMetadata(key: Key, value: unknown, target: object, prop?: string | symbol): void {
  table(target, prop, true)?.set(key, value);
}

function hasMetadata(key: Key, target: object, prop?: string | symbol): boolean {
  for (let o: object | null = target; o !== null; o = Object.getPrototypeOf(o) as object | null) {
    if (table(o, prop, false)?.has(key)) return true;
  }
  return false;
}

function metadata(key: Key, value: unknown) {
  return (target: object, prop?: string | symbol): void => defineMetadata(key, value, target, prop);
}

const R = Reflect as unknown as Record<string, unknown>;
if (typeof R.getMetadata !== 'function') {
  Object.assign(R, { getMetadata, getOwnMetadata, defineMetadata, hasMetadata, metadata });
}
