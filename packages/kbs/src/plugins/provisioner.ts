// `[[plugins]] name = "provisioner"` (trustee kbs/src/plugins/implementations/provisioner/): per-VM LUKS
// keys for encrypted guest disks. Three calls under `/kbs/v0/provisioner/`:
//
// - `POST provision` (admin credentials), body `{"vm_name": "...", "namespace": "..."}` (`namespace`
//   defaults to `default`): derives the VM's UUID as a version-5 UUID of `<namespace>/<vm_name>` in the
//   plugin's own UUID namespace, and stores, once, a confdata TOML document holding a random key under
//   `default/<uuid>/root` in the storage namespace `provisioner` of the KBS's storage backend. Answers
//   `{"uuid": ..., "resource_path": "default/<uuid>/root"}`; a VM already provisioned keeps its key.
// - `GET default/<uuid>/root` (attestation token and the resource policy): the stored document,
//   JWE-encrypted to the TEE key, only to a guest whose initdata says
//   `"trustee.kbs.resource" = "kbs+provisioner:///default/<uuid>/root"`.
// - `DELETE provision/<uuid>` (admin credentials): removes the key; answers `{"status":"deleted"}`.
import { createHash, randomInt } from 'node:crypto';
import type { KvStorage } from '@broker/kv-storage';
import { KbsServiceError } from '../errors.js';
import { type BuiltinPlugin, type PluginCall, PluginRequestError } from './builtin.js';
import { PROVISIONER_PLUGIN_NAME, type ProvisionerPluginConfig } from './provisioner-config.js';

/** The storage namespace the keys live in. */
export const PROVISIONER_STORAGE_NAMESPACE = 'provisioner';
/** trustee's UUID namespace: the version-5 UUID of `provisioner_plugin` in the URL namespace. */
export const PROVISIONER_UUID_NAMESPACE = 'feab5599-6854-52bc-95f0-0241c03e620a';
/** The initdata `[data]` key that binds a guest to the one resource it may fetch. */
export const PROVISIONER_INITDATA_KEY = 'trustee.kbs.resource';
/** The confdata key of the LUKS passphrase. */
export const CONFDATA_ROOT_KEY = 'io.cryptsetup.key.text.root';

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** A VM name and namespace longer than this cannot be a Kubernetes name; refused rather than hashed. */
const MAX_IDENTITY_LENGTH = 1024;

function uuidBytes(uuid: string): Buffer {
  return Buffer.from(uuid.replaceAll('-', ''), 'hex');
}

function uuidText(b: Uint8Array): string {
  const h = Buffer.from(b).toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** RFC 9562 version-5 UUID: SHA-1 of the namespace's 16 bytes and the name, version and variant set. */
export function uuidV5(namespace: string, name: string | Uint8Array): string {
  const digest = createHash('sha1').update(uuidBytes(namespace)).update(name).digest().subarray(0, 16);
  digest[6] = ((digest[6] as number) & 0x0f) | 0x50;
  digest[8] = ((digest[8] as number) & 0x3f) | 0x80;
  return uuidText(digest);
}

/** The UUID trustee's provisioner gives the VM `vmName` in `namespace`. */
export function provisionerUuid(namespace: string, vmName: string): string {
  return uuidV5(PROVISIONER_UUID_NAMESPACE, `${namespace}/${vmName}`);
}

export function provisionerResourcePath(uuid: string): string {
  return `default/${uuid}/root`;
}

/** trustee's confdata document: the key is alphanumeric, so it needs no TOML escaping. */
export function confdataToml(key: string): string {
  if (!/^[A-Za-z0-9]*$/.test(key))
    throw new KbsServiceError('PLUGIN_INTERNAL', 'a confdata key must be alphanumeric');
  return `version = "0.1.0"\n\n[data]\n"${CONFDATA_ROOT_KEY}" = "${key}"\n`;
}

/** `length` characters drawn uniformly from [A-Za-z0-9]. */
export function randomAlphanumeric(length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += ALPHANUMERIC[randomInt(ALPHANUMERIC.length)];
  return out;
}

export interface ProvisionRequest {
  readonly vmName: string;
  readonly namespace: string;
}

/** The POST body as trustee's serde reads it: an object, `vm_name` a string, `namespace` a string if present. */
export function parseProvisionRequest(body: Uint8Array): ProvisionRequest {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(body);
  } catch {
    throw new PluginRequestError('invalid JSON body: not UTF-8');
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new PluginRequestError('invalid JSON body');
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
    throw new PluginRequestError('invalid JSON body: expected an object');
  }
  const o = doc as Record<string, unknown>;
  const vmName = Object.hasOwn(o, 'vm_name') ? o.vm_name : undefined;
  if (typeof vmName !== 'string') throw new PluginRequestError('invalid JSON body: vm_name must be a string');
  const namespace = Object.hasOwn(o, 'namespace') ? o.namespace : 'default';
  if (typeof namespace !== 'string') {
    throw new PluginRequestError('invalid JSON body: namespace must be a string');
  }
  if (vmName.length + namespace.length > MAX_IDENTITY_LENGTH) {
    throw new PluginRequestError(
      `invalid JSON body: vm_name and namespace exceed ${MAX_IDENTITY_LENGTH} characters`,
    );
  }
  return { vmName, namespace };
}

/** trustee's `init_data_claims` in the token's claims (EAR), undefined when the guest sent no initdata. */
export function initDataClaimsOf(claims: Record<string, unknown> | undefined): unknown {
  const pick = (v: unknown, k: string): unknown =>
    typeof v === 'object' && v !== null && !Array.isArray(v) && Object.hasOwn(v, k)
      ? (v as Record<string, unknown>)[k]
      : undefined;
  return pick(
    pick(pick(pick(claims, 'submods'), 'cpu0'), 'ear.veraison.annotated-evidence'),
    'init_data_claims',
  );
}

const encoder = new TextEncoder();

export class ProvisionerPlugin implements BuiltinPlugin {
  readonly name = PROVISIONER_PLUGIN_NAME;

  constructor(
    readonly config: ProvisionerPluginConfig,
    private readonly storage: KvStorage,
  ) {}

  async handle(call: PluginCall): Promise<Uint8Array> {
    const first = call.path[0];
    if (call.method === 'POST' && first === 'provision' && call.path.length === 1) {
      return this.provision(call.body);
    }
    if (call.method === 'DELETE' && first === 'provision') return this.deprovision(call.path.slice(1));
    if (call.method === 'GET') return this.fetch(call.path, call.claims);
    throw new PluginRequestError(
      `unsupported: ${call.method.slice(0, 16)} /kbs/v0/provisioner/${call.path.join('/').slice(0, 256)}`,
    );
  }

  /** GET is the guest's (token and resource policy); POST and DELETE are the operator's (admin). */
  validateAuth(call: PluginCall): boolean {
    return call.method !== 'GET';
  }

  encrypted(call: PluginCall): boolean {
    return call.method === 'GET';
  }

  private async provision(body: Uint8Array): Promise<Uint8Array> {
    const { vmName, namespace } = parseProvisionRequest(body);
    const uuid = provisionerUuid(namespace, vmName);
    const resourcePath = provisionerResourcePath(uuid);
    const reply = encoder.encode(JSON.stringify({ uuid, resource_path: resourcePath }));
    if ((await this.storage.get(PROVISIONER_STORAGE_NAMESPACE, resourcePath)) !== undefined) return reply;
    const document = encoder.encode(confdataToml(randomAlphanumeric(this.config.keyLength)));
    // Not overwriting: when two operators provision the same VM at once, the first key stays.
    await this.storage.set(PROVISIONER_STORAGE_NAMESPACE, resourcePath, document, { overwrite: false });
    return reply;
  }

  private async deprovision(rest: readonly string[]): Promise<Uint8Array> {
    const uuid = rest[0];
    if (uuid === undefined || uuid === '') throw new PluginRequestError('missing uuid in path');
    if (rest.length !== 1 || !UUID_RE.test(uuid)) {
      throw new PluginRequestError('the path after provision/ must be one lowercase UUID');
    }
    await this.storage.delete(PROVISIONER_STORAGE_NAMESPACE, provisionerResourcePath(uuid));
    return encoder.encode(JSON.stringify({ status: 'deleted' }));
  }

  private async fetch(
    path: readonly string[],
    claims: Record<string, unknown> | undefined,
  ): Promise<Uint8Array> {
    const resourceKey = path.join('/');
    const initData = initDataClaimsOf(claims);
    if (initData === undefined || initData === null) {
      throw new PluginRequestError('provisioner requires init_data for resource access');
    }
    const bound =
      typeof initData === 'object' && Object.hasOwn(initData, PROVISIONER_INITDATA_KEY)
        ? (initData as Record<string, unknown>)[PROVISIONER_INITDATA_KEY]
        : undefined;
    if (typeof bound !== 'string')
      throw new PluginRequestError(`init_data missing ${PROVISIONER_INITDATA_KEY}`);
    const expected = `kbs+provisioner:///${resourceKey}`;
    if (bound !== expected) {
      throw new PluginRequestError(
        `init_data resource mismatch: expected ${expected.slice(0, 300)}, got ${bound.slice(0, 300)}`,
      );
    }
    if (
      path.length !== 3 ||
      path[0] !== 'default' ||
      !UUID_RE.test(path[1] as string) ||
      path[2] !== 'root'
    ) {
      throw new PluginRequestError(`provisioner resource not found: ${resourceKey.slice(0, 300)}`);
    }
    const data = await this.storage.get(PROVISIONER_STORAGE_NAMESPACE, resourceKey);
    if (data === undefined) throw new PluginRequestError(`provisioner resource not found: ${resourceKey}`);
    return data;
  }
}
