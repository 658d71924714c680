// The KBS keeps all of its state behind this key-value interface, as trustee does, so that the
// embedded backends (Memory, LocalFs) and distributed ones (Redis, PostgreSQL) are interchangeable.

/** trustee's namespaces. */
export type Namespace =
  | 'kbs' // resource policy (`resource-policy.rego`)
  | 'repository' // resources, key `repo/type/tag`
  | 'kbs_protocol_session' // RCAR sessions, key = session id
  | 'attestation_service_policy' // attestation policies, key `<id>.rego`
  | 'reference_value' // RVPS reference values, key = name
  | 'provisioner' // the provisioner plugin's per-VM LUKS keys, key `default/<uuid>/root`
  | 'kbs_policy_versions'; // this KBS's own: policy texts that decided verdicts, key = SHA-256 hex

export interface SetOptions {
  /** When false, an existing key is left untouched and `set` returns false. Default true. */
  readonly overwrite?: boolean;
  /** Lifetime in milliseconds; the backend forgets the key afterwards. */
  readonly ttlMs?: number;
}

export interface KvStorage {
  get(ns: Namespace, key: string): Promise<Uint8Array | undefined>;
  /** Atomic: a reader sees the old or the new value, never a partial one. Returns whether it wrote. */
  set(ns: Namespace, key: string, value: Uint8Array, options?: SetOptions): Promise<boolean>;
  /** Returns whether the key existed. */
  delete(ns: Namespace, key: string): Promise<boolean>;
  list(ns: Namespace): Promise<string[]>;
  close(): Promise<void>;
  /**
   * Whether another process may change this namespace (another replica, a worker, a mounted file). A
   * cache in front of a shared namespace must check the store on every use. Absent: false.
   */
  isShared?(ns: Namespace): boolean;
  /** Whether the backend itself forgets keys whose lifetime has passed, so nobody has to sweep them. */
  expiresKeys?(ns: Namespace): boolean;
}

/** `storage.isShared(ns)`, false when the backend does not say. */
export function isSharedNamespace(storage: KvStorage, ns: Namespace): boolean {
  return storage.isShared?.(ns) ?? false;
}
