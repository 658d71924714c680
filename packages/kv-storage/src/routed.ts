// One KvStorage over several backends, chosen per namespace: trustee's `session_storage_type` keeps the
// sessions in one store while resources, policies and reference values live in another.
import type { KvStorage, Namespace, SetOptions } from './types.js';

export class RoutedStorage implements KvStorage {
  private readonly fallback: KvStorage;
  private readonly routes: Partial<Record<Namespace, KvStorage>>;

  constructor(fallback: KvStorage, routes: Partial<Record<Namespace, KvStorage>> = {}) {
    this.fallback = fallback;
    this.routes = routes;
  }

  /** The backend that holds a namespace. */
  backendOf(ns: Namespace): KvStorage {
    return this.routes[ns] ?? this.fallback;
  }

  get(ns: Namespace, key: string): Promise<Uint8Array | undefined> {
    return this.backendOf(ns).get(ns, key);
  }
  set(ns: Namespace, key: string, value: Uint8Array, options?: SetOptions): Promise<boolean> {
    return this.backendOf(ns).set(ns, key, value, options);
  }
  delete(ns: Namespace, key: string): Promise<boolean> {
    return this.backendOf(ns).delete(ns, key);
  }
  list(ns: Namespace): Promise<string[]> {
    return this.backendOf(ns).list(ns);
  }
  isShared(ns: Namespace): boolean {
    return this.backendOf(ns).isShared?.(ns) ?? false;
  }

  expiresKeys(ns: Namespace): boolean {
    return this.backendOf(ns).expiresKeys?.(ns) ?? false;
  }

  async close(): Promise<void> {
    const all = new Set<KvStorage>([
      this.fallback,
      ...Object.values(this.routes).filter((s) => s !== undefined),
    ]);
    await Promise.all([...all].map((s) => s.close()));
  }
}
