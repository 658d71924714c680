/**
 * ocicrypt's key-provider protocol for a `cmd` provider
 * (`OCICRYPT_KEYPROVIDER_CONFIG`: `{"key-providers":{"attestation-agent":{"cmd":{"path":…,"args":["keyprovider"]}}}}`):
 * one JSON request on stdin, one answer on stdout.
 *
 * - `keywrap`: `keywrapparams.ec.Parameters["attestation-agent"]` holds
 *   skopeo's `keyid=kbs:///r/t/g::keypath=KEK` (base64, as Go sends
 *   `[]byte`); the private options (`optsdata`) are wrapped into
 *   coco-keyprovider's packet under that kid. Answer
 *   `{"keywrapresults":{"annotation":[…]}}`.
 * - `keyunwrap`: the packet in `keyunwrapparams.annotation` is opened with
 *   the KEK named by `keypath=` in `keyunwrapparams.dc.Parameters["attestation-agent"]`.
 *   Answer `{"keyunwrapresults":{"optsdata":[…]}}`.
 *
 * Byte fields are read as base64 strings or number arrays and written as
 * number arrays (which ocicrypt-rs requires and Go reads).
 */

import { readFile } from 'node:fs/promises';
import { ImageError, type ImageErrorCode } from '../errors.js';
import {
  attestationAgentWrapper,
  parseAnnotationPacket,
  unwrapAnnotationPacket,
} from './keyprovider-packet.js';

export const KEY_PROVIDER_NAME = 'attestation-agent';
export const MAX_KEY_PROVIDER_REQUEST_BYTES = 1024 * 1024;

export class KeyProviderRequestError extends ImageError {
  override readonly code: ImageErrorCode = 'KEY_PROVIDER_REQUEST_INVALID';
  override readonly name: string = 'KeyProviderRequestError';
}

function object(v: unknown, what: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new KeyProviderRequestError(`${what} is not an object`);
  return v as Record<string, unknown>;
}

function bytes(v: unknown, what: string): Uint8Array {
  if (typeof v === 'string') return Buffer.from(v, 'base64');
  if (Array.isArray(v) && v.every((n) => Number.isInteger(n) && n >= 0 && n <= 255))
    return Uint8Array.from(v as number[]);
  throw new KeyProviderRequestError(`${what} is not bytes`);
}

/** `k=v::k=v` parameters given to this provider in `ec`/`dc` `Parameters`. */
function providerParams(config: unknown, what: string): Map<string, string> {
  const parameters = object(object(config, what).Parameters, `${what}.Parameters`);
  const list = parameters[KEY_PROVIDER_NAME];
  if (!Array.isArray(list) || list.length === 0) {
    throw new KeyProviderRequestError(`${what}.Parameters has no "${KEY_PROVIDER_NAME}" entry`);
  }
  const text = Buffer.from(bytes(list[0], `${what}.Parameters.${KEY_PROVIDER_NAME}[0]`)).toString('utf8');
  const params = new Map<string, string>();
  for (const pair of text.split('::')) {
    const eq = pair.indexOf('=');
    if (eq > 0) params.set(pair.slice(0, eq), pair.slice(eq + 1));
  }
  return params;
}

async function kekFrom(params: Map<string, string>): Promise<Uint8Array> {
  const path = params.get('keypath');
  if (path === undefined) throw new KeyProviderRequestError('the parameters name no keypath=KEK file');
  const kek = await readFile(path);
  if (kek.byteLength !== 32)
    throw new KeyProviderRequestError(`the KEK ${path} has ${kek.byteLength} bytes, expected 32`);
  return kek;
}

/** Answers one key-provider request. Throws `KeyProviderRequestError` (or a packet error). */
export async function answerKeyProviderRequest(request: Uint8Array): Promise<Uint8Array> {
  if (request.byteLength > MAX_KEY_PROVIDER_REQUEST_BYTES) {
    throw new KeyProviderRequestError(`the request exceeds ${MAX_KEY_PROVIDER_REQUEST_BYTES} bytes`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(request));
  } catch (e) {
    throw new KeyProviderRequestError(`the request is not JSON: ${(e as Error).message}`);
  }
  const o = object(doc, 'the request');
  if (o.op === 'keywrap') {
    const wrapParams = object(o.keywrapparams, 'keywrapparams');
    const params = providerParams(wrapParams.ec, 'keywrapparams.ec');
    const kid = params.get('keyid');
    if (kid === undefined) throw new KeyProviderRequestError('the parameters name no keyid=kbs:///… kid');
    const packet = await attestationAgentWrapper(kid, await kekFrom(params)).wrap(
      bytes(wrapParams.optsdata, 'keywrapparams.optsdata'),
    );
    parseAnnotationPacket(packet); // a kid the data hub would refuse is refused here
    return Buffer.from(JSON.stringify({ keywrapresults: { annotation: [...packet] } }));
  }
  if (o.op === 'keyunwrap') {
    const unwrapParams = object(o.keyunwrapparams, 'keyunwrapparams');
    const packet = parseAnnotationPacket(bytes(unwrapParams.annotation, 'keyunwrapparams.annotation'));
    const optsdata = unwrapAnnotationPacket(
      packet,
      await kekFrom(providerParams(unwrapParams.dc, 'keyunwrapparams.dc')),
    );
    return Buffer.from(JSON.stringify({ keyunwrapresults: { optsdata: [...optsdata] } }));
  }
  throw new KeyProviderRequestError(`unknown op ${JSON.stringify(o.op)} (keywrap or keyunwrap)`);
}
