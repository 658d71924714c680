/**
 * The confidential data hub's ttrpc API (package `api`): message definitions
 * with guest-components' field names and numbers, a typed client for kata-like
 * callers and api-server-rest, and a helper that registers a hub's services on
 * a server.
 *
 * Field names are kept verbatim: upstream mixes `ResourcePath` (PascalCase)
 * with `image_url` (snake_case), and unmodified upstream clients send exactly
 * those fields.
 */

import {
  type CallContext,
  type CallOptions,
  Code,
  type ConnectOptions,
  defineProto,
  type MessageCodec,
  messageCodec,
  serverMethod,
  type TtrpcAddress,
  type TtrpcClient,
  TtrpcError,
  type TtrpcServer,
} from '@broker/ttrpc';
import { connectTtrpc, TypedTtrpcClient } from './typed-client.js';

/** The CDH's socket when built with ttrpc (upstream `DEFAULT_CDH_SOCKET_ADDR`). */
export const DEFAULT_CDH_SOCKET = 'unix:///run/confidential-containers/cdh.sock';

export const SEALED_SECRET_SERVICE = 'api.SealedSecretService';
export const GET_RESOURCE_SERVICE = 'api.GetResourceService';
export const SECURE_MOUNT_SERVICE = 'api.SecureMountService';
export const SECURE_VOLUME_SERVICE = 'api.SecureVolumeService';
export const IMAGE_PULL_SERVICE = 'api.ImagePullService';

/** Prefix of every hub failure's status message; the code is INTERNAL (upstream `ttrpc_server`). */
export const CDH_ERROR_PREFIX = '[CDH] [ERROR]: ';

/** Our own proto text; names and numbers follow upstream `confidential-data-hub/api.proto`. */
export const DATA_HUB_PROTO = `
syntax = "proto3";
package api;

message UnsealSecretInput { bytes secret = 1; }
message UnsealSecretOutput { bytes plaintext = 1; }

message GetResourceRequest { string ResourcePath = 1; }
message GetResourceResponse { bytes Resource = 1; }

message SecureMountRequest {
  string volume_type = 1;
  map<string, string> options = 2;
  repeated string flags = 3;
  string mount_point = 4;
}
message SecureMountResponse {}

enum VolumeAccess {
  VOLUME_ACCESS_UNSPECIFIED = 0;
  VOLUME_ACCESS_READ_ONLY = 1;
  VOLUME_ACCESS_READ_WRITE = 2;
}
message ActivateVolumeRequest {
  string device_id = 1;
  string manifest_uri = 2;
  VolumeAccess requested_access = 3;
}
message ActivateVolumeResponse {
  string activation_id = 1;
  string device_path = 2;
  VolumeAccess effective_access = 3;
}
message DeactivateVolumeRequest { string activation_id = 1; }
message DeactivateVolumeResponse {}

message ImagePullRequest {
  string image_url = 1;
  string bundle_path = 2;
}
message ImagePullResponse { string manifest_digest = 1; }

service SealedSecretService { rpc UnsealSecret(UnsealSecretInput) returns (UnsealSecretOutput); }
service GetResourceService { rpc GetResource(GetResourceRequest) returns (GetResourceResponse); }
service SecureMountService { rpc SecureMount(SecureMountRequest) returns (SecureMountResponse); }
service SecureVolumeService {
  rpc ActivateVolume(ActivateVolumeRequest) returns (ActivateVolumeResponse);
  rpc DeactivateVolume(DeactivateVolumeRequest) returns (DeactivateVolumeResponse);
}
service ImagePullService { rpc PullImage(ImagePullRequest) returns (ImagePullResponse); }
`;

export interface UnsealSecretInput {
  /** `sealed.<JWS header>.<payload>.<signature>`, as bytes. */
  secret: Uint8Array;
}
export interface UnsealSecretOutput {
  plaintext: Uint8Array;
}
export interface GetResourceRequest {
  /** `kbs:///repository/type/tag` (a host part is ignored by the hub). */
  ResourcePath: string;
}
export interface GetResourceResponse {
  Resource: Uint8Array;
}
export interface SecureMountRequest {
  volume_type: string;
  options: Record<string, string>;
  flags: string[];
  mount_point: string;
}
export type SecureMountResponse = Record<string, never>;
/** `VolumeAccess` enum values. */
export const VolumeAccess = Object.freeze({
  VOLUME_ACCESS_UNSPECIFIED: 0,
  VOLUME_ACCESS_READ_ONLY: 1,
  VOLUME_ACCESS_READ_WRITE: 2,
} as const);
export interface ActivateVolumeRequest {
  device_id: string;
  manifest_uri: string;
  requested_access: number;
}
export interface ActivateVolumeResponse {
  activation_id: string;
  device_path: string;
  effective_access: number;
}
export interface DeactivateVolumeRequest {
  activation_id: string;
}
export type DeactivateVolumeResponse = Record<string, never>;
export interface ImagePullRequest {
  image_url: string;
  bundle_path: string;
}
export interface ImagePullResponse {
  manifest_digest: string;
}

const root = defineProto(DATA_HUB_PROTO);

export const UnsealSecretInputCodec: MessageCodec<UnsealSecretInput> = messageCodec(
  root,
  'api.UnsealSecretInput',
);
export const UnsealSecretOutputCodec: MessageCodec<UnsealSecretOutput> = messageCodec(
  root,
  'api.UnsealSecretOutput',
);
export const GetResourceRequestCodec: MessageCodec<GetResourceRequest> = messageCodec(
  root,
  'api.GetResourceRequest',
);
export const GetResourceResponseCodec: MessageCodec<GetResourceResponse> = messageCodec(
  root,
  'api.GetResourceResponse',
);
export const SecureMountRequestCodec: MessageCodec<SecureMountRequest> = messageCodec(
  root,
  'api.SecureMountRequest',
);
export const SecureMountResponseCodec: MessageCodec<SecureMountResponse> = messageCodec(
  root,
  'api.SecureMountResponse',
);
export const ActivateVolumeRequestCodec: MessageCodec<ActivateVolumeRequest> = messageCodec(
  root,
  'api.ActivateVolumeRequest',
);
export const ActivateVolumeResponseCodec: MessageCodec<ActivateVolumeResponse> = messageCodec(
  root,
  'api.ActivateVolumeResponse',
);
export const DeactivateVolumeRequestCodec: MessageCodec<DeactivateVolumeRequest> = messageCodec(
  root,
  'api.DeactivateVolumeRequest',
);
export const DeactivateVolumeResponseCodec: MessageCodec<DeactivateVolumeResponse> = messageCodec(
  root,
  'api.DeactivateVolumeResponse',
);
export const ImagePullRequestCodec: MessageCodec<ImagePullRequest> = messageCodec(
  root,
  'api.ImagePullRequest',
);
export const ImagePullResponseCodec: MessageCodec<ImagePullResponse> = messageCodec(
  root,
  'api.ImagePullResponse',
);

/**
 * A failure of the hub as upstream reports it: INTERNAL with
 * `[CDH] [ERROR]: <message>`.
 */
export function dataHubError(message: string, options?: { cause?: unknown }): TtrpcError {
  return new TtrpcError(Code.INTERNAL, `${CDH_ERROR_PREFIX}${message}`, options);
}

export interface DataHubClientOptions extends ConnectOptions {
  /**
   * Deadline of each call unless the call gives its own; default 50 s, the
   * timeout api-server-rest uses. 0 means none.
   */
  timeoutMs?: number;
}

/** api-server-rest's ttrpc timeout towards the CDH and the AA. */
export const DEFAULT_DATA_HUB_CALL_TIMEOUT_MS = 50_000;

/**
 * A typed client of the hub. Failures reject with `TtrpcError`: the hub's own
 * errors are INTERNAL `[CDH] [ERROR]: …`; a service the hub does not serve is
 * UNIMPLEMENTED; a lost connection is `TtrpcClosedError` (make a new client).
 */
export class DataHubClient extends TypedTtrpcClient {
  /** Connects to `address` (`unix:///…`, `tcp://host:port` or an absolute path), default the CDH socket. */
  static async connect(
    address: string | TtrpcAddress = DEFAULT_CDH_SOCKET,
    options: DataHubClientOptions = {},
  ): Promise<DataHubClient> {
    return new DataHubClient(await connectTtrpc(address, options), options);
  }

  /** Wraps a connected ttrpc client; `close()` closes it. */
  constructor(client: TtrpcClient, options: { timeoutMs?: number } = {}) {
    super(client, options.timeoutMs ?? DEFAULT_DATA_HUB_CALL_TIMEOUT_MS);
  }

  /** The resource behind a `kbs:///repo/type/tag` URI. */
  async getResource(uri: string, options?: CallOptions): Promise<Uint8Array> {
    const res = await this.call(
      GET_RESOURCE_SERVICE,
      'GetResource',
      GetResourceRequestCodec,
      GetResourceResponseCodec,
      {
        ResourcePath: uri,
      },
      options,
    );
    return res.Resource;
  }

  /** The plaintext of a sealed secret (`sealed.…`, text or bytes). */
  async unsealSecret(secret: string | Uint8Array, options?: CallOptions): Promise<Uint8Array> {
    const bytes = typeof secret === 'string' ? new TextEncoder().encode(secret) : secret;
    const res = await this.call(
      SEALED_SECRET_SERVICE,
      'UnsealSecret',
      UnsealSecretInputCodec,
      UnsealSecretOutputCodec,
      { secret: bytes },
      options,
    );
    return res.plaintext;
  }

  /** Mounts a secure volume (kata's trusted storage). */
  async secureMount(request: SecureMountRequest, options?: CallOptions): Promise<void> {
    await this.call(
      SECURE_MOUNT_SERVICE,
      'SecureMount',
      SecureMountRequestCodec,
      SecureMountResponseCodec,
      request,
      options,
    );
  }

  /** Pulls `imageUrl` into `bundlePath`; resolves with the manifest digest. */
  async pullImage(imageUrl: string, bundlePath: string, options?: CallOptions): Promise<string> {
    const res = await this.call(
      IMAGE_PULL_SERVICE,
      'PullImage',
      ImagePullRequestCodec,
      ImagePullResponseCodec,
      { image_url: imageUrl, bundle_path: bundlePath },
      options,
    );
    return res.manifest_digest;
  }
}

/**
 * What a hub serves. Each member is optional: a service whose member is
 * absent is not registered, so callers get UNIMPLEMENTED as from any ttrpc
 * server. A member that throws a `TtrpcError` sends it as it is; any other
 * error becomes INTERNAL `[CDH] [ERROR]: <message>`, so the message must be
 * safe to show (no secrets).
 */
export interface DataHubServices {
  getResource?(uri: string, ctx: CallContext): Promise<Uint8Array>;
  unsealSecret?(secret: Uint8Array, ctx: CallContext): Promise<Uint8Array>;
  secureMount?(request: SecureMountRequest, ctx: CallContext): Promise<void>;
  pullImage?(imageUrl: string, bundlePath: string, ctx: CallContext): Promise<string>;
}

async function asHubError<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof TtrpcError) throw err;
    throw dataHubError(err instanceof Error ? err.message : String(err), { cause: err });
  }
}

/** Registers the services `impl` implements; returns their names. */
export function registerDataHubServices(server: TtrpcServer, impl: DataHubServices): string[] {
  const registered: string[] = [];
  const { getResource, unsealSecret, secureMount, pullImage } = impl;
  if (getResource !== undefined) {
    server.register(GET_RESOURCE_SERVICE, {
      GetResource: serverMethod(GetResourceRequestCodec, GetResourceResponseCodec, async (req, ctx) => ({
        Resource: await asHubError(() => getResource.call(impl, req.ResourcePath, ctx)),
      })),
    });
    registered.push(GET_RESOURCE_SERVICE);
  }
  if (unsealSecret !== undefined) {
    server.register(SEALED_SECRET_SERVICE, {
      UnsealSecret: serverMethod(UnsealSecretInputCodec, UnsealSecretOutputCodec, async (req, ctx) => ({
        plaintext: await asHubError(() => unsealSecret.call(impl, req.secret, ctx)),
      })),
    });
    registered.push(SEALED_SECRET_SERVICE);
  }
  if (secureMount !== undefined) {
    server.register(SECURE_MOUNT_SERVICE, {
      SecureMount: serverMethod(SecureMountRequestCodec, SecureMountResponseCodec, async (req, ctx) => {
        await asHubError(() => secureMount.call(impl, req, ctx));
        return {};
      }),
    });
    registered.push(SECURE_MOUNT_SERVICE);
  }
  if (pullImage !== undefined) {
    server.register(IMAGE_PULL_SERVICE, {
      PullImage: serverMethod(ImagePullRequestCodec, ImagePullResponseCodec, async (req, ctx) => ({
        manifest_digest: await asHubError(() => pullImage.call(impl, req.image_url, req.bundle_path, ctx)),
      })),
    });
    registered.push(IMAGE_PULL_SERVICE);
  }
  return registered;
}
