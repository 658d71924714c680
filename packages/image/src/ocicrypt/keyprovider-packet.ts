/**
 * The CoCo key provider's layer-key packet (the `attestation-agent` key
 * provider of image-rs and coco-keyprovider): the private options encrypted
 * with a key-encryption key (KEK) that the KBS releases, by `kid`, only to an
 * attested guest whose policy allows it.
 *
 * `{"kid":"kbs:///repo/type/tag","wrapped_data":…,"iv":…,"wrap_type":"A256GCM"}`
 * where `wrapped_data` is AES-256-GCM(KEK, iv, no AAD) over the private
 * options as ciphertext‖tag (`A256CTR` is accepted too, as the CDH does).
 * Byte fields are JSON arrays of numbers as the CoCo peers write them, or
 * standard base64 strings as Go's ocicrypt writes them. The v2 form's extra
 * fields (`version`, `provider`, `provider_settings`, `annotations`) are
 * allowed and not used.
 */

import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { ImageError, type ImageErrorCode } from '../errors.js';
import { decodeStdBase64 } from '../json.js';
import type { KeyWrapper } from './encrypt.js';
import type { KeyUnwrapper } from './unwrap.js';

export const ATTESTATION_AGENT_PROTOCOL = 'provider.attestation-agent';
const MAX_PACKET_BYTES = 64 * 1024;
const GCM_TAG_BYTES = 16;

export class AnnotationPacketError extends ImageError {
  override readonly code: ImageErrorCode = 'ANNOTATION_PACKET_INVALID';
  override readonly name: string = 'AnnotationPacketError';
}

export interface AnnotationPacket {
  readonly kid: string;
  readonly wrappedData: Uint8Array;
  readonly iv: Uint8Array;
  readonly wrapType: 'A256GCM' | 'A256CTR';
}

function bytesField(o: Record<string, unknown>, key: string): Uint8Array {
  const v = o[key];
  if (typeof v === 'string') {
    try {
      return decodeStdBase64(v);
    } catch (e) {
      throw new AnnotationPacketError(`AnnotationPacket "${key}" is not base64: ${(e as Error).message}`);
    }
  }
  if (Array.isArray(v) && v.every((n) => Number.isInteger(n) && n >= 0 && n <= 255)) {
    return Uint8Array.from(v as number[]);
  }
  throw new AnnotationPacketError(`AnnotationPacket "${key}" is not bytes (an array of numbers or base64)`);
}

/** Parses and checks a packet (shape, kid scheme, IV length). */
export function parseAnnotationPacket(bytes: Uint8Array): AnnotationPacket {
  if (bytes.byteLength > MAX_PACKET_BYTES)
    throw new AnnotationPacketError(`AnnotationPacket exceeds ${MAX_PACKET_BYTES} bytes`);
  let o: unknown;
  try {
    o = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (e) {
    throw new AnnotationPacketError(`malwared AnnotationPacket format: ${(e as Error).message}`);
  }
  if (typeof o !== 'object' || o === null || Array.isArray(o)) {
    throw new AnnotationPacketError('malwared AnnotationPacket format: not a JSON object');
  }
  const packet = o as Record<string, unknown>;
  const kid = packet.kid;
  if (typeof kid !== 'string') throw new AnnotationPacketError('malwared AnnotationPacket format: no "kid"');
  // The CDH fetches the KEK through the KBS: only kbs:// (or kbs+<plugin>://) resource URIs name one.
  const path = /^kbs(\+[a-z0-9-]+)?:\/\/[^/]*\/([^/]+\/[^/]+\/[^/]+)$/.exec(kid)?.[2];
  if (path === undefined || path.split('/').some((segment) => segment === '.' || segment === '..')) {
    throw new AnnotationPacketError(
      `malwared AnnotationPacket format: kid ${JSON.stringify(kid.slice(0, 200))} is not a kbs:///<repository>/<type>/<tag> resource URI`,
    );
  }
  const wrapType = packet.wrap_type;
  if (wrapType !== 'A256GCM' && wrapType !== 'A256CTR') {
    throw new AnnotationPacketError(
      `unsupported AnnotationPacket wrap_type ${JSON.stringify(wrapType)} (A256GCM or A256CTR)`,
    );
  }
  const iv = bytesField(packet, 'iv');
  const ivBytes = wrapType === 'A256GCM' ? 12 : 16;
  if (iv.byteLength !== ivBytes) {
    throw new AnnotationPacketError(
      `AnnotationPacket iv has ${iv.byteLength} bytes, ${wrapType} needs ${ivBytes}`,
    );
  }
  const wrappedData = bytesField(packet, 'wrapped_data');
  if (wrapType === 'A256GCM' && wrappedData.byteLength <= GCM_TAG_BYTES) {
    throw new AnnotationPacketError('AnnotationPacket wrapped_data is shorter than a GCM tag');
  }
  return { kid, wrappedData, iv, wrapType };
}

/** Decrypts the packet's private options with `kek` (32 bytes). */
export function unwrapAnnotationPacket(packet: AnnotationPacket, kek: Uint8Array): Uint8Array {
  if (kek.byteLength !== 32)
    throw new AnnotationPacketError(`the KEK ${packet.kid} has ${kek.byteLength} bytes, expected 32`);
  if (packet.wrapType === 'A256CTR') {
    const d = createDecipheriv('aes-256-ctr', kek, packet.iv);
    return Buffer.concat([d.update(packet.wrappedData), d.final()]);
  }
  const data = packet.wrappedData;
  const d = createDecipheriv('aes-256-gcm', kek, packet.iv);
  d.setAuthTag(data.subarray(data.byteLength - GCM_TAG_BYTES));
  try {
    return Buffer.concat([d.update(data.subarray(0, data.byteLength - GCM_TAG_BYTES)), d.final()]);
  } catch {
    throw new AnnotationPacketError(
      `the KEK ${packet.kid} does not open the AnnotationPacket (GCM tag mismatch)`,
    );
  }
}

/**
 * The `attestation-agent` key provider: each packet's KEK is fetched by its
 * `kid` (through the KBS, which attests the guest first) and opens the packet.
 */
export function attestationAgentUnwrapper(getKek: (kid: string) => Promise<Uint8Array>): KeyUnwrapper {
  return {
    protocol: ATTESTATION_AGENT_PROTOCOL,
    async unwrap(blob) {
      const packet = parseAnnotationPacket(blob);
      return unwrapAnnotationPacket(packet, await getKek(packet.kid));
    },
  };
}

/** Wraps with `kek` under `kid` as coco-keyprovider does (number arrays, A256GCM). */
export function attestationAgentWrapper(kid: string, kek: Uint8Array): KeyWrapper {
  return {
    protocol: ATTESTATION_AGENT_PROTOCOL,
    async wrap(privateOptions) {
      const iv = randomBytes(12);
      const c = createCipheriv('aes-256-gcm', kek, iv);
      const wrapped = Buffer.concat([c.update(privateOptions), c.final(), c.getAuthTag()]);
      return Buffer.from(
        JSON.stringify({ kid, wrapped_data: [...wrapped], iv: [...iv], wrap_type: 'A256GCM' }),
      );
    },
  };
}
