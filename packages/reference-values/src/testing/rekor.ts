// Rekor SETs for tests, made the way Rekor makes them: a hashedrekord v0.0.1 body and an ECDSA P-256
// signature over the RFC 8785 form of {body, integratedTime, logID, logIndex}.
import { createHash, type KeyObject, sign } from 'node:crypto';
import { canonicalJson } from '@broker/protocol';
import { rekorLogId } from '../rekor.js';

export interface SetParts {
  body?: Record<string, unknown>;
  payload?: Record<string, unknown>;
  /** Signs these bytes instead of the canonical payload. */
  signOver?: Buffer;
}

export function hashedRekord(signer: KeyObject, base64Signature: string, payload: Uint8Array) {
  const pem = signer.export({ type: 'spki', format: 'pem' }).toString();
  return {
    apiVersion: '0.0.1',
    kind: 'hashedrekord',
    spec: {
      data: { hash: { algorithm: 'sha256', value: createHash('sha256').update(payload).digest('hex') } },
      signature: { content: base64Signature, publicKey: { content: Buffer.from(pem).toString('base64') } },
    },
  };
}

export function makeRekorBundle(
  rekorPrivate: KeyObject,
  rekorPublic: KeyObject,
  signer: KeyObject,
  base64Signature: string,
  payload: Uint8Array,
  parts: SetParts = {},
): string {
  const body = parts.body ?? hashedRekord(signer, base64Signature, payload);
  const setPayload = parts.payload ?? {
    body: Buffer.from(JSON.stringify(body)).toString('base64'),
    integratedTime: 1_760_000_000,
    logIndex: 4242,
    logID: rekorLogId(rekorPublic),
  };
  const signed = parts.signOver ?? Buffer.from(canonicalJson(setPayload));
  const set = sign('sha256', signed, { key: rekorPrivate, dsaEncoding: 'der' }).toString('base64');
  return JSON.stringify({ SignedEntryTimestamp: set, Payload: setPayload });
}
