/**
 * The hub's `keyprovider.KeyProviderService` (guest-components'
 * `keyprovider.proto`), through which ocicrypt-rs in image-rs, kata or any
 * other caller asks the hub to unwrap an encrypted layer's key. The
 * messages carry ocicrypt's key-provider JSON in one bytes field:
 *
 * - `UnWrapKey` in: `{"op":"keyunwrap","keywrapparams":{…},"keyunwrapparams":{"dc":…,"annotation":<packet>}}`
 *   (all three keys present, as the CDH requires; only `annotation` is
 *   used: the `attestation-agent` packet, bytes as a number array or base64);
 *   out: `{"keyunwrapresults":{"optsdata":[…]}}` with a number array, which
 *   ocicrypt-rs requires (Go's ocicrypt reads it too).
 * - `WrapKey` answers as upstream's ttrpc server does for a method it does
 *   not implement: NOT_FOUND, `/keyprovider.KeyProviderService/WrapKey is not supported`.
 *
 * The KEK comes from the KBS by the packet's kid (so the caller must be an
 * attested guest the resource policy allows) and is never stored.
 */
import type { KeyUnwrapper } from '@broker/image';
import {
  Code,
  defineProto,
  type MessageCodec,
  messageCodec,
  serverMethod,
  TtrpcError,
  type TtrpcServer,
} from '@broker/ttrpc';
import { DataHubError, GetResourceFailed } from '../errors.js';

export const KEY_PROVIDER_SERVICE = 'keyprovider.KeyProviderService';

/** Names and numbers as upstream `keyprovider.proto`. */
export const KEY_PROVIDER_PROTO = `
syntax = "proto3";
package keyprovider;
message KeyProviderKeyWrapProtocolInput { bytes KeyProviderKeyWrapProtocolInput = 1; }
message KeyProviderKeyWrapProtocolOutput { bytes KeyProviderKeyWrapProtocolOutput = 1; }
`;

export interface KeyWrapProtocolInput {
  KeyProviderKeyWrapProtocolInput: Uint8Array;
}
export interface KeyWrapProtocolOutput {
  KeyProviderKeyWrapProtocolOutput: Uint8Array;
}

const root = defineProto(KEY_PROVIDER_PROTO);
export const KeyWrapProtocolInputCodec: MessageCodec<KeyWrapProtocolInput> = messageCodec(
  root,
  'keyprovider.KeyProviderKeyWrapProtocolInput',
);
export const KeyWrapProtocolOutputCodec: MessageCodec<KeyWrapProtocolOutput> = messageCodec(
  root,
  'keyprovider.KeyProviderKeyWrapProtocolOutput',
);

/** Upstream's texts (`[ERROR] …` from the service, `[CDH] [ERROR]: …` from the hub). */
export const PARSE_FAILED = '[ERROR] UnwrapKey Parse request failed';
export const UNWRAP_FAILED = '[CDH] [ERROR]: Decrypt Image (UnwrapKey) failed';
/** ocicrypt's JSON for one key is a few KiB; a packet is at most 64 KiB. */
const MAX_REQUEST_BYTES = 256 * 1024;

/** `keyunwrapparams.annotation` of an UnWrapKey request; throws a message for the caller. */
export function annotationOf(request: Uint8Array): Uint8Array {
  if (request.byteLength > MAX_REQUEST_BYTES)
    throw new DataHubError(`request larger than ${MAX_REQUEST_BYTES} bytes`, {
      code: 'UNWRAP_REQUEST_INVALID',
    });
  const v = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(request)) as unknown;
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new DataHubError('not a JSON object', { code: 'UNWRAP_REQUEST_INVALID' });
  const o = v as Record<string, unknown>;
  for (const key of ['op', 'keywrapparams', 'keyunwrapparams']) {
    if (!(key in o)) throw new DataHubError(`missing field \`${key}\``, { code: 'UNWRAP_REQUEST_INVALID' });
  }
  const params = o.keyunwrapparams;
  if (typeof params !== 'object' || params === null)
    throw new DataHubError('`keyunwrapparams` is not an object', { code: 'UNWRAP_REQUEST_INVALID' });
  const annotation = (params as Record<string, unknown>).annotation;
  if (typeof annotation === 'string') return Buffer.from(annotation, 'base64');
  if (Array.isArray(annotation) && annotation.every((n) => Number.isInteger(n) && n >= 0 && n <= 255)) {
    return Uint8Array.from(annotation as number[]);
  }
  throw new DataHubError('`keyunwrapparams.annotation` is not bytes', { code: 'UNWRAP_REQUEST_INVALID' });
}

/**
 * Registers the service; `getKek(kid)` fetches a KEK through the KBS.
 * `onError` receives the full reason of a failed unwrap (the caller only
 * gets upstream's text and the reason, never key material).
 */
export function registerKeyProviderService(
  server: TtrpcServer,
  getKek: (kid: string) => Promise<Uint8Array>,
  onError?: (reason: string) => void,
): string {
  // The image library is loaded on the first call, as for PullImage.
  let unwrapper: Promise<KeyUnwrapper> | undefined;
  const kek = async (kid: string) => {
    try {
      return await getKek(kid);
    } catch (e) {
      throw new DataHubError(
        `Get resource failed: ${e instanceof GetResourceFailed ? e.reason : (e as Error).message}`,
        { code: 'RESOURCE_UNAVAILABLE' },
      );
    }
  };
  server.register(KEY_PROVIDER_SERVICE, {
    UnWrapKey: serverMethod(KeyWrapProtocolInputCodec, KeyWrapProtocolOutputCodec, async (req) => {
      let annotation: Uint8Array;
      try {
        annotation = annotationOf(req.KeyProviderKeyWrapProtocolInput);
      } catch (e) {
        onError?.(`UnwrapKey request: ${(e as Error).message}`);
        throw new TtrpcError(Code.INTERNAL, `${PARSE_FAILED}: ${(e as Error).message}`);
      }
      let result: Awaited<ReturnType<KeyUnwrapper['unwrap']>>;
      try {
        unwrapper ??= import('@broker/image').then((m) => m.attestationAgentUnwrapper(kek));
        result = await (await unwrapper).unwrap(annotation);
      } catch (e) {
        result = { failed: (e as Error).message };
      }
      if (!(result instanceof Uint8Array)) {
        onError?.(result.failed);
        throw new TtrpcError(Code.INTERNAL, `${UNWRAP_FAILED}: ${result.failed}`);
      }
      const out = JSON.stringify({ keyunwrapresults: { optsdata: [...result] } });
      return { KeyProviderKeyWrapProtocolOutput: Buffer.from(out) };
    }),
    WrapKey: async () => {
      throw new TtrpcError(Code.NOT_FOUND, `/${KEY_PROVIDER_SERVICE}/WrapKey is not supported`);
    },
  });
  return KEY_PROVIDER_SERVICE;
}
