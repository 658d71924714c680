import { generateKeyPairSync, sign } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ArtifactError } from './errors.js';
import { parseRekorPublicKey, rekorLogId, verifyRekorSet } from './rekor.js';
import { hashedRekord, makeRekorBundle } from './testing/rekor.js';

const rekor = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const otherRekor = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const signer = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const otherSigner = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const payload = Buffer.from('{"critical":{}}');
const b64 = sign('sha256', payload, { key: signer.privateKey, dsaEncoding: 'der' }).toString('base64');

function check(bundle: string, over: Partial<Parameters<typeof verifyRekorSet>[0]> = {}) {
  return verifyRekorSet({
    rekorKey: rekor.publicKey,
    bundle,
    signerKey: signer.publicKey,
    base64Signature: b64,
    payload,
    ...over,
  });
}

const good = () => makeRekorBundle(rekor.privateKey, rekor.publicKey, signer.publicKey, b64, payload);

describe('verifyRekorSet', () => {
  it('accepts a SET over the same key, signature and payload and returns the integration time', () => {
    expect(check(good()).toISOString()).toBe(new Date(1_760_000_000_000).toISOString());
  });

  it('refuses a SET signed by another log key', () => {
    const bundle = makeRekorBundle(otherRekor.privateKey, rekor.publicKey, signer.publicKey, b64, payload);
    expect(() => check(bundle)).toThrow(/Rekor key does not verify/);
  });

  it('refuses a SET whose payload was changed after signing', () => {
    const doc = JSON.parse(good());
    doc.Payload.integratedTime += 1;
    expect(() => check(JSON.stringify(doc))).toThrow(/does not verify/);
  });

  it('refuses a logID that is not the configured key', () => {
    const bundle = makeRekorBundle(rekor.privateKey, rekor.publicKey, signer.publicKey, b64, payload, {
      payload: {
        body: Buffer.from(JSON.stringify(hashedRekord(signer.publicKey, b64, payload))).toString('base64'),
        integratedTime: 1,
        logIndex: 1,
        logID: rekorLogId(otherRekor.publicKey),
      },
    });
    expect(() => check(bundle)).toThrow(/logID/);
  });

  it('refuses an entry for another key, another signature or another payload', () => {
    expect(() => check(good(), { signerKey: otherSigner.publicKey })).toThrow(/logged public key/);
    const otherSig = sign('sha256', payload, { key: signer.privateKey, dsaEncoding: 'der' }).toString(
      'base64',
    );
    expect(() => check(good(), { base64Signature: otherSig })).toThrow(/logged signature/);
    expect(() => check(good(), { payload: Buffer.from('{}') })).toThrow(/payload hash/);
  });

  it('refuses other entry kinds, versions and hash algorithms', () => {
    const variants: [Record<string, unknown>, RegExp][] = [
      [{ ...hashedRekord(signer.publicKey, b64, payload), kind: 'rekord' }, /kind/],
      [{ ...hashedRekord(signer.publicKey, b64, payload), apiVersion: '0.0.2' }, /version/],
      [
        (() => {
          const b = hashedRekord(signer.publicKey, b64, payload);
          b.spec.data.hash.algorithm = 'sha512';
          return b;
        })(),
        /algorithm/,
      ],
      [
        (() => {
          const b = hashedRekord(signer.publicKey, b64, payload);
          b.spec.signature.publicKey.content = Buffer.from('not pem').toString('base64');
          return b;
        })(),
        /PEM/,
      ],
    ];
    for (const [body, msg] of variants) {
      const bundle = makeRekorBundle(rekor.privateKey, rekor.publicKey, signer.publicKey, b64, payload, {
        body,
      });
      expect(() => check(bundle)).toThrow(msg);
    }
  });

  it('refuses malformed bundles: garbage, truncation, extra or missing members, oversize', () => {
    const text = good();
    for (let i = 0; i < text.length; i += 7) expect(() => check(text.slice(0, i))).toThrow(ArtifactError);
    const doc = JSON.parse(text);
    expect(() => check(JSON.stringify({ ...doc, Extra: 1 }))).toThrow(/unknown member/);
    expect(() => check(JSON.stringify({ Payload: doc.Payload }))).toThrow(/no member SignedEntryTimestamp/);
    expect(() => check(JSON.stringify({ ...doc, Payload: { ...doc.Payload, x: 1 } }))).toThrow(
      /unknown member/,
    );
    expect(() => check(JSON.stringify({ ...doc, SignedEntryTimestamp: '***' }))).toThrow(/base64/);
    expect(() => check(JSON.stringify([doc]))).toThrow(/not a JSON object/);
    expect(() => check(' '.repeat(64 * 1024 + 1))).toThrow(/larger than/);
  });
});

describe('parseRekorPublicKey', () => {
  it('reads an ECDSA PEM key and refuses others', () => {
    const pem = rekor.publicKey.export({ type: 'spki', format: 'pem' }).toString();
    expect(rekorLogId(parseRekorPublicKey(pem))).toBe(rekorLogId(rekor.publicKey));
    const ed = generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString();
    expect(() => parseRekorPublicKey(ed)).toThrow(/expected ECDSA/);
    expect(() => parseRekorPublicKey('garbage')).toThrow(/not a PEM public key/);
  });
});
