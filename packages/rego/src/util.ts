// Small shared helpers.

/** The value for `key`, inserting `make()` first when absent. */
export function getOrCreate<K, V>(m: Map<K, V>, key: K, make: () => V): V {
  let v = m.get(key);
  if (v === undefined) {
    v = make();
    m.set(key, v);
  }
  return v;
}
