// Simple signatures made by Debian's gpg (an independent OpenPGP implementation) against our checks,
// including the hostile cases: trailing packets, expired and revoked keys, payloads that lie.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadGpgKeyring, MAX_GPG_PAYLOAD_BYTES, verifyGpgSignature, verifySimpleSigning } from './gpg.js';
import { createGpgHome, type GpgHome } from './testing/gpg.js';

const DIGEST = `sha256:${'ab'.repeat(32)}`;
const payload = (o: unknown) => Buffer.from(JSON.stringify(o));
const good = {
  critical: {
    identity: { 'docker-reference': 'registry.test/ns/app:v1' },
    image: { 'docker-manifest-digest': DIGEST },
    type: 'atomic container signature',
  },
  optional: { creator: 'gpg test', timestamp: 1700000000 },
};
const accept = { validateManifestDigest: () => {}, validateDockerReference: () => {} };

let g: GpgHome;
let signer: string;
let other: string;

beforeAll(async () => {
  g = await createGpgHome();
  signer = await g.generateKey('Signer <signer@example.test>');
  other = await g.generateKey('Other <other@example.test>');
}, 60_000);
afterAll(async () => g?.close());

describe('simple signatures made by gpg', () => {
  it('a gpg signature with the trusted key verifies and names its signer', async () => {
    const kr = await loadGpgKeyring([await g.exportKey(signer)]);
    const sig = await verifySimpleSigning(kr, await g.sign(signer, payload(good)), accept);
    expect(sig).toEqual({
      dockerReference: 'registry.test/ns/app:v1',
      dockerManifestDigest: DIGEST,
      creator: 'gpg test',
      timestamp: 1700000000,
      signerFingerprint: signer,
    });
  });

  it('a signature by another key is refused', async () => {
    const kr = await loadGpgKeyring([await g.exportKey(signer)]);
    await expect(verifyGpgSignature(kr, await g.sign(other, payload(good)))).rejects.toThrow(
      /which is not among the trusted keys/,
    );
  });

  it.each([
    ['a copy of the whole message', (sig: Buffer) => Buffer.concat([sig, sig])],
    // A literal data packet (new format, tag 11): binary, no name, time 0, "x".
    [
      'a literal data packet',
      (sig: Buffer) => Buffer.concat([sig, Buffer.from([0xcb, 0x07, 0x62, 0x00, 0, 0, 0, 0, 0x78])]),
    ],
    ['a user ID packet', (sig: Buffer) => Buffer.concat([sig, Buffer.from([0xcd, 0x01, 0x78])])],
    ['bytes that are no packet', (sig: Buffer) => Buffer.concat([sig, Buffer.from([0x00, 0x01])])],
  ])('a signature followed by %s is refused', async (_what, tamper) => {
    const kr = await loadGpgKeyring([await g.exportKey(signer)]);
    const sig = await g.sign(signer, payload(good));
    await expect(verifyGpgSignature(kr, tamper(sig))).rejects.toThrow(/Invalid GPG signature/);
  });

  it('an uncompressed signed message verifies; a second signature in front of it is refused', async () => {
    const kr = await loadGpgKeyring([await g.exportKey(signer)]);
    const plain = await g.sign(signer, payload(good), { uncompressed: true });
    expect((await verifyGpgSignature(kr, plain)).signerFingerprint).toBe(signer);
    // [signature, one-pass signature, literal, signature]: a valid OpenPGP message with two good signatures.
    const detached = await g.sign(signer, payload(good), { detached: true });
    await expect(verifyGpgSignature(kr, Buffer.concat([detached, plain]))).rejects.toThrow(
      'Invalid GPG signature: expected one signed literal data packet, got packets [signature, onePassSignature, literalData, signature]',
    );
  });

  it('a key that has expired since it signed is refused', async () => {
    const h = await createGpgHome();
    try {
      const old = await h.generateKey('Old <old@example.test>', {
        expire: '1d',
        fakedTime: '20200101T000000',
      });
      const sig = await h.sign(old, payload(good), { fakedTime: '20200101T120000' });
      const kr = await loadGpgKeyring([await h.exportKey(old)]);
      // Valid at the time it was made…
      await expect(verifyGpgSignature(kr, sig, new Date('2020-01-01T13:00:00Z'))).resolves.toBeDefined();
      // …not now.
      await expect(verifyGpgSignature(kr, sig)).rejects.toThrow(/is not valid now: .*expired/i);
    } finally {
      await h.close();
    }
  }, 60_000);

  it('a revoked key is refused', async () => {
    const h = await createGpgHome();
    try {
      const fpr = await h.generateKey('Revoked <revoked@example.test>');
      const sig = await h.sign(fpr, payload(good));
      await h.revoke(fpr);
      const kr = await loadGpgKeyring([await h.exportKey(fpr)]);
      await expect(verifyGpgSignature(kr, sig)).rejects.toThrow(/revoked/i);
    } finally {
      await h.close();
    }
  }, 60_000);

  it.each([
    ['optional is null', { ...good, optional: null }, /JSON object expected/],
    ['optional is missing', { critical: good.critical }, /optional/],
    [
      'the type is cosign’s',
      { ...good, critical: { ...good.critical, type: 'cosign container image signature' } },
      /Unrecognized signature type cosign container image signature/,
    ],
    ['critical has an extra key', { ...good, critical: { ...good.critical, extra: 1 } }, /extra/],
    [
      'the digest is not a digest',
      { ...good, critical: { ...good.critical, image: { 'docker-manifest-digest': 'sha256:zz' } } },
      /docker-manifest-digest/,
    ],
  ])('a verified payload where %s is refused', async (_what, body, reason) => {
    const kr = await loadGpgKeyring([await g.exportKey(signer)]);
    await expect(verifySimpleSigning(kr, await g.sign(signer, payload(body)), accept)).rejects.toThrow(
      reason,
    );
  });

  it('a duplicate key in the payload is refused', async () => {
    const kr = await loadGpgKeyring([await g.exportKey(signer)]);
    const text = JSON.stringify(good).replace('"optional":{', '"optional":{"creator":"a",');
    await expect(verifySimpleSigning(kr, await g.sign(signer, Buffer.from(text)), accept)).rejects.toThrow(
      /Duplicate key "creator"/,
    );
  });

  it('a small signature that decompresses past the payload cap is refused', async () => {
    const kr = await loadGpgKeyring([await g.exportKey(signer)]);
    const sig = await g.sign(signer, Buffer.alloc(MAX_GPG_PAYLOAD_BYTES * 2, 0x20));
    expect(sig.byteLength).toBeLessThan(64 * 1024);
    await expect(verifyGpgSignature(kr, sig)).rejects.toThrow(/Maximum decompressed message size exceeded/);
  });
});
