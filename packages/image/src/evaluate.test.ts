import { generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import { digestOf } from './digest.js';
import { openDirImage } from './dir-image.js';
import { evaluatePolicy, type PolicyImage } from './evaluate.js';
import { type PolicySemantics, parsePolicy } from './policy.js';
import { parseImageReference, policyIdentity, policyNamespaces } from './reference.js';
import {
  createSigstorePayload,
  createSigstoreSignature,
  parseSigstorePayload,
  SIGSTORE_SIGNATURE_ANNOTATION,
  SIGSTORE_SIGNATURE_MIME_TYPE,
  signatureFromBlob,
  signatureToBlob,
  signPayload,
  type UntrustedSignature,
} from './sigstore.js';

const CI = vector('containers-image');
const GC = vector('guest-components/image-policy');
const SAMPLE = '192.168.64.2:5000/cosign-signed-single-sample';

function sigstorePolicy(
  req: Record<string, unknown>,
  semantics: PolicySemantics = 'containers-image',
): ReturnType<typeof parsePolicy> {
  return parsePolicy(JSON.stringify({ default: [{ type: 'sigstoreSigned', ...req }] }), { semantics });
}

/** containers/image's semantics unless told: these are its fixtures and verdicts. */
async function decide(
  dir: string,
  req: Record<string, unknown>,
  reference: string | null = SAMPLE,
  semantics: PolicySemantics = 'containers-image',
) {
  const image = await openDirImage(join(CI, dir), reference !== null ? { reference } : {});
  return evaluatePolicy(sigstorePolicy(req, semantics), image);
}

const KEY = join(CI, 'cosign.pub');
const WRONG_KEY = join(CI, 'cosign2.pub');
const matchRepository = { type: 'matchRepository' };

describe("containers/image's signature fixtures give its verdicts", () => {
  it('a cosign signature with the right key and matchRepository is accepted', async () => {
    const d = await decide('dir-img-cosign-valid', { keyPath: KEY, signedIdentity: matchRepository });
    expect(d.allowed).toBe(true);
    expect(d.verdicts[0]?.signature).toEqual({
      dockerReference: SAMPLE,
      dockerManifestDigest: 'sha256:634a8f35b5f16dcf4aaa0822adc0b1964bb786fca12f6831de8ddc45e5986a00',
    });
  });

  it('the wrong key rejects', async () => {
    const d = await decide('dir-img-cosign-valid', { keyPath: WRONG_KEY, signedIdentity: matchRepository });
    expect(d.allowed).toBe(false);
    expect(d.reason).toBe(
      'cryptographic signature verification failed: invalid signature when validating ASN.1 encoded signature',
    );
  });

  it('one invalid then one valid signature is accepted', async () => {
    const d = await decide('dir-img-cosign-mixed', { keyPath: KEY, signedIdentity: matchRepository });
    expect(d.allowed).toBe(true);
  });

  it('two invalid signatures list both reasons', async () => {
    const d = await decide('dir-img-cosign-mixed', { keyPath: WRONG_KEY, signedIdentity: matchRepository });
    expect(d.reason).toMatch(
      /^None of the signatures were accepted, reasons: cryptographic .*; cryptographic /,
    );
  });

  it('a modified manifest is rejected', async () => {
    const d = await decide('dir-img-cosign-modified-manifest', {
      keyPath: KEY,
      signedIdentity: matchRepository,
    });
    expect(d.reason).toBe(
      'Signature for digest sha256:634a8f35b5f16dcf4aaa0822adc0b1964bb786fca12f6831de8ddc45e5986a00 does not match',
    );
  });

  it('a missing manifest is rejected', async () => {
    const d = await decide('dir-img-cosign-no-manifest', { keyPath: KEY, signedIdentity: matchRepository });
    expect(d.allowed).toBe(false);
    expect(d.reason).toMatch(/^open .*manifest\.json: no such file or directory$/);
  });

  it('a non-matching reference is rejected', async () => {
    const d = await decide(
      'dir-img-cosign-valid',
      { keyPath: KEY, signedIdentity: matchRepository },
      'testing/manifest:notlatest',
    );
    expect(d.reason).toBe(`Signature for identity "${SAMPLE}" is not accepted`);
  });

  it("cosign's repository-only identity fails matchExact and the default matchRepoDigestOrExact", async () => {
    for (const identity of [{ signedIdentity: { type: 'matchExact' } }, {}]) {
      const d = await decide('dir-img-cosign-valid', { keyPath: KEY, ...identity }, `${SAMPLE}:latest`);
      expect(d.reason).toBe(`Signature for identity "${SAMPLE}" is not accepted`);
    }
  });

  it('image-rs semantics: no signedIdentity checks no identity, but still the key and the digest', async () => {
    const d = await decide('dir-img-cosign-valid', { keyPath: KEY }, `${SAMPLE}:latest`, 'image-rs');
    expect(d.allowed).toBe(true);
    expect(sigstorePolicy({ keyPath: KEY }, 'image-rs').default[0]).toMatchObject({
      signedIdentity: { type: 'unchecked' },
    });
    // Signed for another repository altogether: accepted as image-rs does (matchRepository would refuse).
    const elsewhere = await decide('dir-img-cosign-valid', { keyPath: KEY }, 'other.example/x:1', 'image-rs');
    expect(elsewhere.allowed).toBe(true);
    const wrongKey = await decide(
      'dir-img-cosign-valid',
      { keyPath: WRONG_KEY },
      `${SAMPLE}:latest`,
      'image-rs',
    );
    expect(wrongKey.allowed).toBe(false);
    const modified = await decide('dir-img-cosign-modified-manifest', { keyPath: KEY }, SAMPLE, 'image-rs');
    expect(modified.reason).toMatch(/^Signature for digest sha256:[0-9a-f]{64} does not match$/);
  });

  it('image-rs semantics: keyData as the PEM text, as base64 of it; containers/image takes base64 only', async () => {
    const pem = (await readFile(KEY)).toString('utf8');
    for (const keyData of [pem, Buffer.from(pem).toString('base64')]) {
      const d = await decide('dir-img-cosign-valid', { keyData }, `${SAMPLE}:latest`, 'image-rs');
      expect(d.allowed, keyData.slice(0, 16)).toBe(true);
    }
    const both = await decide(
      'dir-img-cosign-valid',
      { keyDatas: [(await readFile(WRONG_KEY)).toString('utf8'), pem] },
      `${SAMPLE}:latest`,
      'image-rs',
    );
    expect(both.allowed).toBe(true);
    expect(() => sigstorePolicy({ keyData: pem }, 'containers-image')).toThrow(
      /^illegal base64 data at input byte \d+$/,
    );
  });

  it('exactRepository, remapIdentity, keyPaths and keyData', async () => {
    const pem = await readFile(KEY);
    const ok = [
      { keyPath: KEY, signedIdentity: { type: 'exactRepository', dockerRepository: SAMPLE } },
      { keyPaths: [WRONG_KEY, KEY], signedIdentity: matchRepository },
      { keyPaths: [KEY, WRONG_KEY], signedIdentity: matchRepository },
      { keyData: pem.toString('base64'), signedIdentity: matchRepository },
      {
        keyDatas: [(await readFile(WRONG_KEY)).toString('base64'), pem.toString('base64')],
        signedIdentity: matchRepository,
      },
    ];
    for (const req of ok)
      expect((await decide('dir-img-cosign-valid', req)).allowed, JSON.stringify(req)).toBe(true);
    // The image's digest reference is remapped onto the signed repository name.
    const remap = { type: 'remapIdentity', prefix: 'mirror.example.com/sample', signedPrefix: SAMPLE };
    const digestRef = `mirror.example.com/sample@sha256:634a8f35b5f16dcf4aaa0822adc0b1964bb786fca12f6831de8ddc45e5986a00`;
    // The signature's identity has no tag, so matchRepoDigestOrExact (after remapping) still refuses it.
    expect(
      (await decide('dir-img-cosign-valid', { keyPath: KEY, signedIdentity: remap }, digestRef)).allowed,
    ).toBe(false);
  });

  it('an unusable key is a reason, not a crash', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'keys-'));
    await writeFile(join(dir, 'bad.pub'), 'not a pem');
    const d = await decide('dir-img-cosign-valid', {
      keyPath: join(dir, 'bad.pub'),
      signedIdentity: matchRepository,
    });
    expect(d.reason).toBe('parsing public key 1: PEM decoding failed');
    const missing = await decide('dir-img-cosign-valid', {
      keyPath: join(dir, 'none.pub'),
      signedIdentity: matchRepository,
    });
    expect(missing.reason).toBe(`open ${join(dir, 'none.pub')}: no such file or directory`);
  });

  it('without --reference a dir: image has no identity for image-relative matchers', async () => {
    const d = await decide('dir-img-cosign-valid', { keyPath: KEY, signedIdentity: matchRepository }, null);
    expect(d.transport).toBe('dir');
    expect(d.reason).toBe(`Signature for identity "${SAMPLE}" is not accepted`);
    const exact = await decide(
      'dir-img-cosign-valid',
      { keyPath: KEY, signedIdentity: { type: 'exactRepository', dockerRepository: SAMPLE } },
      null,
    );
    expect(exact.allowed).toBe(true);
  });

  it('our payload writer reproduces cosign bytes exactly', async () => {
    const blob = signatureFromBlob(await readFile(join(CI, 'dir-img-cosign-valid/signature-1')));
    if (blob.format !== 'sigstore') throw new Error('fixture is sigstore');
    const ours = createSigstorePayload({
      manifestDigest: 'sha256:634a8f35b5f16dcf4aaa0822adc0b1964bb786fca12f6831de8ddc45e5986a00',
      dockerReference: SAMPLE,
    });
    expect(Buffer.from(ours).toString()).toBe(Buffer.from(blob.payload).toString());
    expect(signatureFromBlob(signatureToBlob(blob))).toEqual(blob);
  });

  it('the image-rs cosign public keys parse', async () => {
    for (const f of ['cosign1.pub', 'cosign2.pub', 'cosign3.pub', 'nv.pub', 'sample_kbc-cosign.pub']) {
      const image = await openDirImage(join(CI, 'dir-img-cosign-valid'), { reference: SAMPLE });
      const d = await evaluatePolicy(
        sigstorePolicy({ keyPath: join(GC, f), signedIdentity: matchRepository }),
        image,
      );
      // None of them made the fixture signature, but each must load as a key.
      expect(d.reason, f).toMatch(/^cryptographic signature verification failed/);
    }
  });
});

/** An in-memory image for crafted signatures. */
function memoryImage(
  manifest: Uint8Array,
  signatures: UntrustedSignature[],
  reference = 'registry.example/ns/app:v1',
): PolicyImage {
  const ref = parseImageReference(reference);
  return {
    transport: 'docker',
    policyIdentity: policyIdentity(ref),
    policyNamespaces: policyNamespaces(ref),
    imageName: `docker://${reference}`,
    dockerReference: ref,
    manifest: async () => manifest,
    signatures: async () => signatures,
  };
}

function pem(key: KeyObject): string {
  return key.export({ format: 'pem', type: 'spki' }).toString();
}

describe('signature algorithms and payload checks', () => {
  const manifest = new TextEncoder().encode('{"schemaVersion":2}');
  const digest = digestOf(manifest);
  const keys: Record<string, { publicKey: KeyObject; privateKey: KeyObject }> = {};
  beforeAll(() => {
    keys.p256 = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    keys.p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' });
    keys.rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    keys.ed25519 = generateKeyPairSync('ed25519');
    keys.rsa1024 = generateKeyPairSync('rsa', { modulusLength: 1024 });
  });
  const policyFor = (key: KeyObject, identity: unknown = { type: 'matchRepository' }) =>
    sigstorePolicy({ keyData: Buffer.from(pem(key)).toString('base64'), signedIdentity: identity });

  it('P-384 and P-521 signatures over SHA-384 / SHA-512 (image-rs) verify as well as over SHA-256 (cosign)', async () => {
    for (const [curve, hash] of [
      ['P-384', 'sha384'],
      ['P-521', 'sha512'],
    ] as const) {
      const k = generateKeyPairSync('ec', { namedCurve: curve });
      const claims = { manifestDigest: digest, dockerReference: 'registry.example/ns/app' };
      const cosignStyle = createSigstoreSignature(k.privateKey, claims);
      const payload = cosignStyle.payload;
      const imageRsStyle = {
        ...cosignStyle,
        annotations: {
          ...cosignStyle.annotations,
          [SIGSTORE_SIGNATURE_ANNOTATION]: sign(hash, payload, {
            key: k.privateKey,
            dsaEncoding: 'der',
          }).toString('base64'),
        },
      };
      for (const sig of [cosignStyle, imageRsStyle]) {
        expect(
          (await evaluatePolicy(policyFor(k.publicKey), memoryImage(manifest, [sig]))).allowed,
          curve,
        ).toBe(true);
      }
      // Another hash than those two is still refused.
      const sha1 = {
        ...cosignStyle,
        annotations: {
          ...cosignStyle.annotations,
          [SIGSTORE_SIGNATURE_ANNOTATION]: sign('sha1', payload, {
            key: k.privateKey,
            dsaEncoding: 'der',
          }).toString('base64'),
        },
      };
      expect((await evaluatePolicy(policyFor(k.publicKey), memoryImage(manifest, [sha1]))).reason).toBe(
        'cryptographic signature verification failed: invalid signature when validating ASN.1 encoded signature',
      );
    }
  });

  for (const alg of ['p256', 'p384', 'rsa', 'ed25519']) {
    it(`${alg}: valid, then tampered payload, then wrong key`, async () => {
      const k = keys[alg];
      if (k === undefined) throw new Error('key');
      const sig = createSigstoreSignature(k.privateKey, {
        manifestDigest: digest,
        dockerReference: 'registry.example/ns/app',
      });
      expect((await evaluatePolicy(policyFor(k.publicKey), memoryImage(manifest, [sig]))).allowed).toBe(true);
      const tampered = {
        ...sig,
        payload: new TextEncoder().encode(Buffer.from(sig.payload).toString().replace('ns/app', 'ns/apq')),
      };
      expect(
        (await evaluatePolicy(policyFor(k.publicKey), memoryImage(manifest, [tampered]))).reason,
      ).toMatch(/^cryptographic signature verification failed/);
      const other = keys.p256 === k ? keys.ed25519 : keys.p256;
      if (other === undefined) throw new Error('key');
      expect((await evaluatePolicy(policyFor(other.publicKey), memoryImage(manifest, [sig]))).allowed).toBe(
        false,
      );
    });
  }

  it('RSA keys under 2048 bits are refused', async () => {
    const k = keys.rsa1024;
    if (k === undefined) throw new Error('key');
    const sig = createSigstoreSignature(k.privateKey, {
      manifestDigest: digest,
      dockerReference: 'registry.example/ns/app',
    });
    expect((await evaluatePolicy(policyFor(k.publicKey), memoryImage(manifest, [sig]))).reason).toBe(
      'parsing public key 1: RSA key of 1024 bits, at least 2048 needed',
    );
  });

  it('counts other signatures and attachments when none is usable', async () => {
    const k = keys.p256;
    if (k === undefined) throw new Error('key');
    const none = await evaluatePolicy(policyFor(k.publicKey), memoryImage(manifest, []));
    expect(none.reason).toBe('A signature was required, but no signature exists');
    const other: UntrustedSignature = {
      format: 'sigstore',
      mimeType: 'text/plain',
      payload: new Uint8Array(1),
      annotations: {},
    };
    const gpg: UntrustedSignature = { format: 'simple-signing', blob: new Uint8Array([0xa3]) };
    const d = await evaluatePolicy(policyFor(k.publicKey), memoryImage(manifest, [other, gpg]));
    expect(d.reason).toBe(
      'A signature was required, but no signature exists (1 non-sigstore signatures, 1 sigstore non-signature attachments)',
    );
  });

  it('reads keys only when a signature needs them', async () => {
    let reads = 0;
    const p = sigstorePolicy({
      keyPath: 'kbs:///default/k/pub-key',
      signedIdentity: { type: 'matchRepository' },
    });
    const readKey = async () => {
      reads++;
      return new TextEncoder().encode(pem(keys.p256?.publicKey as KeyObject));
    };
    await evaluatePolicy(p, memoryImage(manifest, []), { readKey });
    expect(reads).toBe(0);
    const sig = createSigstoreSignature(keys.p256?.privateKey as KeyObject, {
      manifestDigest: digest,
      dockerReference: 'registry.example/ns/app',
    });
    expect((await evaluatePolicy(p, memoryImage(manifest, [sig, sig]), { readKey })).allowed).toBe(true);
    expect(reads).toBe(1);
  });

  it('a missing signature annotation and bad base64 are reasons', async () => {
    const k = keys.p256 as { publicKey: KeyObject; privateKey: KeyObject };
    const sig = createSigstoreSignature(k.privateKey, {
      manifestDigest: digest,
      dockerReference: 'registry.example/ns/app',
    });
    const noAnnotation = { ...sig, annotations: {} };
    expect((await evaluatePolicy(policyFor(k.publicKey), memoryImage(manifest, [noAnnotation]))).reason).toBe(
      `missing ${SIGSTORE_SIGNATURE_ANNOTATION} annotation`,
    );
    const badB64 = { ...sig, annotations: { [SIGSTORE_SIGNATURE_ANNOTATION]: '!!' } };
    expect((await evaluatePolicy(policyFor(k.publicKey), memoryImage(manifest, [badB64]))).reason).toMatch(
      /^base64 decoding: /,
    );
  });

  it('accepts extra manifest digests only when the image offers them (image-rs index signatures)', async () => {
    const k = keys.p256 as { publicKey: KeyObject; privateKey: KeyObject };
    const indexDigest = `sha256:${'ab'.repeat(32)}`;
    const sig = createSigstoreSignature(k.privateKey, {
      manifestDigest: indexDigest,
      dockerReference: 'registry.example/ns/app',
    });
    const plain = memoryImage(manifest, [sig]);
    expect((await evaluatePolicy(policyFor(k.publicKey), plain)).reason).toBe(
      `Signature for digest ${indexDigest} does not match`,
    );
    const withIndex = { ...plain, extraManifestDigests: [indexDigest] };
    expect((await evaluatePolicy(policyFor(k.publicKey), withIndex)).allowed).toBe(true);
  });

  // Payloads that verify cryptographically but must still be refused by the strict reader.
  const strictCases: [string, string][] = [
    [
      `{"critical":{"identity":{"docker-reference":"r"},"image":{"docker-manifest-digest":"${digest}"},"type":"cosign container image signature"}}`,
      'Key "optional" missing in a JSON object',
    ],
    [
      `{"critical":{"identity":{"docker-reference":"r"},"image":{"docker-manifest-digest":"${digest}"},"type":"cosign container image signature"},"optional":null,"x":1}`,
      'Unknown key "x"',
    ],
    [
      `{"critical":{"identity":{"docker-reference":"r"},"image":{"docker-manifest-digest":"${digest}"},"type":"cosign container image signature","extra":1},"optional":null}`,
      'Unknown key "extra"',
    ],
    [
      `{"critical":{"identity":{"docker-reference":"r","x":1},"image":{"docker-manifest-digest":"${digest}"},"type":"cosign container image signature"},"optional":null}`,
      'Unknown key "x"',
    ],
    [
      `{"critical":{"identity":{"docker-reference":"r"},"image":{"docker-manifest-digest":"${digest}"},"type":"atomic container signature"},"optional":null}`,
      'Unrecognized signature type atomic container signature',
    ],
    [
      `{"critical":{"identity":{"docker-reference":"r"},"image":{"docker-manifest-digest":"sha256:xyz"},"type":"cosign container image signature"},"optional":null}`,
      'invalid docker-manifest-digest value "sha256:xyz": invalid checksum digest length',
    ],
    [
      `{"critical":{"identity":{"docker-reference":"r"},"image":{"docker-manifest-digest":"${digest}"},"type":"cosign container image signature"},"optional":{"timestamp":1.5}}`,
      'Field optional.timestamp is not an integer',
    ],
    [
      `{"critical":{"identity":{"docker-reference":"r"},"image":{"docker-manifest-digest":"${digest}"},"type":"cosign container image signature"},"optional":{"a":1,"a":2}}`,
      'Duplicate key "a"',
    ],
    [
      `{"critical":{"identity":{"docker-reference":"r"},"image":{"docker-manifest-digest":"${digest}"},"type":"cosign container image signature"},"optional":null} x`,
      "invalid character 'x' after top-level value",
    ],
    [
      `{"critical":{"identity":{"docker-reference":"r"},"identity":{"docker-reference":"r"},"image":{"docker-manifest-digest":"${digest}"},"type":"cosign container image signature"},"optional":null}`,
      'Duplicate key "identity"',
    ],
  ];
  for (const [payloadText, message] of strictCases) {
    it(`strict payload: ${message}`, async () => {
      const k = keys.p256 as { publicKey: KeyObject; privateKey: KeyObject };
      const payload = new TextEncoder().encode(payloadText);
      const sig: UntrustedSignature = {
        format: 'sigstore',
        mimeType: SIGSTORE_SIGNATURE_MIME_TYPE,
        payload,
        annotations: { [SIGSTORE_SIGNATURE_ANNOTATION]: signPayload(k.privateKey, payload) },
      };
      const d = await evaluatePolicy(policyFor(k.publicKey), memoryImage(manifest, [sig]));
      expect(d.reason).toBe(message);
    });
  }

  it('optional keeps creator and timestamp and ignores other annotations', () => {
    const p = parseSigstorePayload(
      createSigstorePayload({
        manifestDigest: digest,
        dockerReference: 'r',
        optional: { creator: 'me', timestamp: 1700000000, any: 'x' },
      }),
    );
    expect(p).toEqual({
      dockerManifestDigest: digest,
      dockerReference: 'r',
      creator: 'me',
      timestamp: 1700000000,
    });
  });
});

describe('requirement combination', () => {
  const manifest = new TextEncoder().encode('{}');
  it('AND over requirements; the first denial decides and later ones are skipped', async () => {
    const p = parsePolicy(
      JSON.stringify({
        default: [
          { type: 'insecureAcceptAnything' },
          { type: 'reject' },
          { type: 'signedBy', keyType: 'GPGKeys', keyPath: '/k' },
        ],
      }),
    );
    const d = await evaluatePolicy(p, memoryImage(manifest, [], 'busybox'));
    expect(d.allowed).toBe(false);
    expect(d.scope).toBeNull();
    expect(d.reason).toBe('Running image docker://busybox is rejected by policy.');
    expect(d.verdicts.map((v) => v.outcome)).toEqual(['accepted', 'rejected', 'skipped']);
    expect(d.deniedBy).toEqual({ type: 'reject' });
  });

  it('signedBy with no GPG signature and signedBaseLayer deny', async () => {
    const p = parsePolicy(
      JSON.stringify({ default: [{ type: 'signedBy', keyType: 'GPGKeys', keyPath: '/k' }] }),
    );
    expect((await evaluatePolicy(p, memoryImage(manifest, []))).reason).toBe(
      'A signature was required, but no signature exists',
    );
    const b = parsePolicy(
      JSON.stringify({
        default: [{ type: 'signedBaseLayer', baseLayerIdentity: { type: 'matchRepository' } }],
      }),
    );
    expect((await evaluatePolicy(b, memoryImage(manifest, []))).reason).toBe(
      'signedBaseLayer not implemented yet!',
    );
  });

  it('dir signature files that do not parse are a reason', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'dirimg-'));
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'manifest.json'), '{}');
    await writeFile(join(dir, 'signature-1'), Buffer.from([0x00, 0x61]));
    const p = sigstorePolicy({ keyPath: KEY, signedIdentity: { type: 'matchRepository' } });
    const d = await evaluatePolicy(p, await openDirImage(dir, { reference: 'x.io/a:b' }));
    expect(d.reason).toBe(
      `parsing signature "${join(dir, 'signature-1')}": invalid signature format, missing newline`,
    );
  });
});
