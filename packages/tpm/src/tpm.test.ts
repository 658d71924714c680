import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ALL_PCRS,
  attestationKeyTemplate,
  extendPcr,
  marshalCreatePrimary,
  marshalGetCapability,
  marshalNvReadPublicResponse,
  marshalPcrRead,
  marshalPublic,
  marshalQuote,
  nvName,
  objectName,
  parseCreatePrimaryResponse,
  parseGetCapabilityResponse,
  parseNvReadPublicResponse,
  parsePcrReadResponse,
  parseQuoteResponse,
  parseReadPublicResponse,
  pcrDigest,
  pcrSelection,
  publicKeyFromTpmt,
  SwtpmControlChannel,
  spkiFromTpmt,
  TPM_ALG,
  TPM_CAP,
  TPM_CC,
  TPM_HR,
  TPM_PT,
  TPM_RC,
  TPM_RH,
  TPM_ST,
  TPMA_NV,
  Tpm,
  TpmError,
  TpmParseError,
  TpmUsageError,
  verifySignature,
} from './index.js';
import { type SwtpmInstance, startSwtpm, tpm2Tool } from './testing/swtpm.js';

const sha256 = (s: string | Uint8Array) => new Uint8Array(createHash('sha256').update(s).digest());
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

let swtpm: SwtpmInstance;
let work: string;

beforeAll(async () => {
  swtpm = await startSwtpm();
  work = await mkdtemp(join(tmpdir(), 'tpm-test-'));
});

afterAll(async () => {
  await swtpm?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

/** Runs `fn` with a fresh connection, closed afterwards so tpm2-tools can connect. */
async function withTpm<T>(fn: (tpm: Tpm) => Promise<T>): Promise<T> {
  const tpm = Tpm.open(swtpm.address);
  try {
    return await fn(tpm);
  } finally {
    await tpm.close();
  }
}

/** PCR values as tpm2_pcrread prints them (YAML-ish: `  8 : 0xABCD...`). */
async function toolPcrs(bank: string, pcrs: number[]): Promise<Map<number, string>> {
  const out = await tpm2Tool(swtpm, 'tpm2_pcrread', [`${bank}:${pcrs.join(',')}`]);
  const values = new Map<number, string>();
  for (const m of out.matchAll(/^\s+(\d+)\s*:\s*0x([0-9A-Fa-f]+)\s*$/gm)) {
    values.set(Number(m[1]), m[2]!.toLowerCase());
  }
  return values;
}

describe('Tpm against swtpm', () => {
  it('reports its properties and PCR banks', async () => {
    await withTpm(async (tpm) => {
      const props = await tpm.getProperties(TPM_PT.FAMILY_INDICATOR, 64);
      expect(props.get(TPM_PT.FAMILY_INDICATOR)).toBe(0x322e3000); // "2.0\0"
      expect(props.get(TPM_PT.MANUFACTURER)).toBe(0x49424d00); // "IBM\0"
      expect(await tpm.getProperty(TPM_PT.PCR_COUNT)).toBe(24);
      expect(await tpm.nvChunkSize()).toBe(await tpm.getProperty(TPM_PT.NV_BUFFER_MAX));
      const banks = await tpm.getPcrBanks();
      expect(banks.find((b) => b.hashAlg === TPM_ALG.SHA256)?.pcrs).toEqual([...ALL_PCRS]);
      const algs = await tpm.getCapability(TPM_CAP.ALGS, 0, 64);
      expect(
        algs.data.capability === TPM_CAP.ALGS && algs.data.algorithms.some((a) => a.alg === TPM_ALG.RSA),
      ).toBe(true);
    });
  });

  it('answers Startup on a started TPM with TPM_RC_INITIALIZE, which ensureStarted accepts', async () => {
    await withTpm(async (tpm) => {
      const err = await tpm.startup().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TpmError);
      expect((err as TpmError).code).toBe(TPM_RC.INITIALIZE);
      expect((err as TpmError).command).toBe('TPM2_Startup');
      expect((err as TpmError).decoded.name).toBe('TPM_RC_INITIALIZE');
      expect((err as TpmError).message).toMatch(/TPM2_Startup failed: TPM_RC 0x100 \(TPM_RC_INITIALIZE/);
      await tpm.ensureStarted();
    });
  });

  it('reads all 24 SHA-256 PCRs in several PCR_Read calls, as tpm2_pcrread sees them', async () => {
    const ours = await withTpm((tpm) => tpm.readPcrs(TPM_ALG.SHA256));
    expect(ours).toHaveLength(24);
    expect(hex(ours[0]!)).toBe('00'.repeat(32));
    const tools = await toolPcrs('sha256', [...ALL_PCRS]);
    expect(tools.size).toBe(24);
    expect(ours.map(hex)).toEqual(ALL_PCRS.map((i) => tools.get(i)));
  });

  it('extends PCR8 with a digest: sha256(zeros ‖ digest), as tpm2_pcrread confirms', async () => {
    const digest = sha256('initdata');
    const before = await withTpm((tpm) => tpm.readPcrs(TPM_ALG.SHA256, [8]));
    expect(hex(before[0]!)).toBe('00'.repeat(32));
    await withTpm((tpm) => tpm.pcrExtend(8, [{ hashAlg: TPM_ALG.SHA256, digest }]));
    const after = await withTpm((tpm) => tpm.readPcrs(TPM_ALG.SHA256, [8]));
    const expected = sha256(Buffer.concat([Buffer.alloc(32), digest]));
    expect(after[0]).toEqual(expected);
    expect(after[0]).toEqual(extendPcr(new Uint8Array(32), digest));
    expect((await toolPcrs('sha256', [8])).get(8)).toBe(hex(expected));
  });

  it('extends two banks at once and refuses digests of the wrong size before sending', async () => {
    const d1 = new Uint8Array(createHash('sha1').update('x').digest());
    const d256 = sha256('x');
    await withTpm(async (tpm) => {
      const [old1] = await tpm.readPcrs(TPM_ALG.SHA1, [10]);
      const [old256] = await tpm.readPcrs(TPM_ALG.SHA256, [10]);
      await tpm.pcrExtend(10, [
        { hashAlg: TPM_ALG.SHA1, digest: d1 },
        { hashAlg: TPM_ALG.SHA256, digest: d256 },
      ]);
      expect((await tpm.readPcrs(TPM_ALG.SHA1, [10]))[0]).toEqual(extendPcr(old1!, d1, TPM_ALG.SHA1));
      expect((await tpm.readPcrs(TPM_ALG.SHA256, [10]))[0]).toEqual(extendPcr(old256!, d256));
      await expect(tpm.pcrExtend(10, [{ hashAlg: TPM_ALG.SHA256, digest: d1 }])).rejects.toThrow(
        TpmUsageError,
      );
      await expect(tpm.pcrExtend(24, [{ hashAlg: TPM_ALG.SHA256, digest: d256 }])).rejects.toThrow(TpmError);
    });
  });

  it('creates an RSA AK, persists it, reads it back, quotes, and tpm2_checkquote accepts the quote', async () => {
    const persistent = 0x81010002;
    const nonce = sha256('nonce');
    const { quote, pub, publicArea, name, pcrs } = await withTpm(async (tpm) => {
      const created = await tpm.createPrimary(TPM_RH.ENDORSEMENT, attestationKeyTemplate('rsa2048'));
      expect(created.handle >>> 24).toBe(TPM_HR.TRANSIENT >>> 24);
      expect(created.name).toEqual(objectName(created.publicArea, TPM_ALG.SHA256));
      await tpm.evictControl(TPM_RH.OWNER, created.handle, persistent);
      await tpm.flushContext(created.handle);
      // The transient handle is gone now.
      const gone = await tpm.readPublic(created.handle).catch((e: unknown) => e);
      expect(gone).toBeInstanceOf(TpmError);
      expect(await tpm.getHandles(TPM_HR.PERSISTENT)).toContain(persistent);
      const read = await tpm.readPublic(persistent);
      expect(read.publicArea).toEqual(created.publicArea);
      expect(marshalPublic(read.public)).toEqual(read.publicArea);
      const q = await tpm.quote(persistent, nonce, [pcrSelection(TPM_ALG.SHA256)]);
      const values = await tpm.readPcrs(TPM_ALG.SHA256);
      return { quote: q, pub: read.public, publicArea: read.publicArea, name: read.name, pcrs: values };
    });
    expect(quote.attest.type).toBe(TPM_ST.ATTEST_QUOTE);
    expect(quote.attest.extraData).toEqual(nonce);
    expect(quote.attest.qualifiedSigner.length).toBe(34);
    expect(name).toEqual(objectName(publicArea, TPM_ALG.SHA256));
    expect(quote.signature.sigAlg).toBe(TPM_ALG.RSASSA);
    expect(pcrDigest(pcrs, quote.attest.attested.pcrSelect, TPM_ALG.SHA256)).toEqual(
      quote.attest.attested.pcrDigest,
    );
    const key = publicKeyFromTpmt(pub);
    expect(verifySignature(key, quote.quoted, quote.signature)).toBe(true);

    // tpm2-tools agrees on the key (DER SPKI) and on the quote.
    const derFile = join(work, 'ak.der');
    await tpm2Tool(swtpm, 'tpm2_readpublic', [
      '-c',
      `0x${persistent.toString(16)}`,
      '-f',
      'der',
      '-o',
      derFile,
    ]);
    expect(new Uint8Array(await readFile(derFile))).toEqual(spkiFromTpmt(pub));
    const pem = join(work, 'ak.pem');
    await writeFile(pem, key.export({ type: 'spki', format: 'pem' }));
    await writeFile(join(work, 'quote.msg'), quote.quoted);
    await writeFile(join(work, 'quote.sig'), quote.signatureBytes);
    const out = await tpm2Tool(swtpm, 'tpm2_checkquote', [
      '-u',
      pem,
      '-m',
      join(work, 'quote.msg'),
      '-s',
      join(work, 'quote.sig'),
      '-g',
      'sha256',
      '-q',
      hex(nonce),
    ]);
    expect(out).toMatch(/^sig: [0-9a-f]+/m);
    // A different nonce makes tpm2_checkquote fail.
    await expect(
      tpm2Tool(swtpm, 'tpm2_checkquote', [
        '-u',
        pem,
        '-m',
        join(work, 'quote.msg'),
        '-s',
        join(work, 'quote.sig'),
        '-g',
        'sha256',
        '-q',
        hex(sha256('other')),
      ]),
    ).rejects.toThrow();
  });

  it('quotes with an ECC P-256 key and verifies the ECDSA signature', async () => {
    await withTpm(async (tpm) => {
      const created = await tpm.createPrimary(TPM_RH.OWNER, attestationKeyTemplate('ecc-p256'));
      try {
        const q = await tpm.quote(created.handle, sha256('ecc'), [pcrSelection(TPM_ALG.SHA256, [0, 8])]);
        expect(q.signature.sigAlg).toBe(TPM_ALG.ECDSA);
        const key = publicKeyFromTpmt(created.public);
        expect(key.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
        expect(verifySignature(key, q.quoted, q.signature)).toBe(true);
        const tampered = q.quoted.slice();
        tampered[20]! ^= 0xff;
        expect(verifySignature(key, tampered, q.signature)).toBe(false);
      } finally {
        await tpm.flushContext(created.handle);
      }
    });
  });

  it('defines, writes, reads and undefines NV indices; big ones in chunks', async () => {
    const index = 0x01400002;
    const attributes = TPMA_NV.OWNERWRITE | TPMA_NV.OWNERREAD | TPMA_NV.NO_DA;
    await withTpm(async (tpm) => {
      expect(await tpm.nvReadPublicIfDefined(index)).toBeUndefined();
      const pub = {
        nvIndex: index,
        nameAlg: TPM_ALG.SHA256,
        attributes,
        authPolicy: new Uint8Array(),
        dataSize: 48,
      };
      await tpm.nvDefineSpace(TPM_RH.OWNER, pub);
      const again = await tpm.nvDefineSpace(TPM_RH.OWNER, pub).catch((e: unknown) => e);
      expect((again as TpmError).code).toBe(TPM_RC.NV_DEFINED);
      // Reading before the first write fails: the index is not initialized.
      const unwritten = await tpm.nvRead(TPM_RH.OWNER, index, 48).catch((e: unknown) => e);
      expect((unwritten as TpmError).code).toBe(TPM_RC.NV_UNINITIALIZED);
      const data = sha256('a').subarray(0, 16);
      const report = new Uint8Array(48).fill(7);
      report.set(data);
      await tpm.nvWrite(TPM_RH.OWNER, index, report);
      expect(await tpm.nvRead(TPM_RH.OWNER, index, 48)).toEqual(report);
      expect(await tpm.nvRead(TPM_RH.OWNER, index, 4, 44)).toEqual(report.subarray(44));
      const { nvPublic, name } = await tpm.nvReadPublic(index);
      expect(nvPublic.attributes & TPMA_NV.WRITTEN).not.toBe(0);
      expect(name).toEqual(nvName(nvPublic));
      expect(await tpm.getHandles(TPM_HR.NV_INDEX)).toContain(index);
      const past = await tpm.nvRead(TPM_RH.OWNER, index, 8, 44).catch((e: unknown) => e);
      expect((past as TpmError).code).toBe(TPM_RC.NV_RANGE);

      const big = 0x01400010;
      const blob = new Uint8Array(2000).map((_, i) => (i * 7) & 0xff);
      await tpm.nvDefineSpace(TPM_RH.OWNER, { ...pub, nvIndex: big, dataSize: blob.length });
      await tpm.nvWriteAll(TPM_RH.OWNER, big, blob);
      expect(await tpm.nvReadAll(TPM_RH.OWNER, big)).toEqual(blob);
      await tpm.nvUndefineSpace(TPM_RH.OWNER, big);
      await tpm.nvUndefineSpace(TPM_RH.OWNER, index);
      expect(await tpm.nvReadPublicIfDefined(index)).toBeUndefined();
      const missing = await tpm.nvRead(TPM_RH.OWNER, index, 1).catch((e: unknown) => e);
      expect(missing).toBeInstanceOf(TpmError);
      expect((missing as TpmError).decoded.handle).toBe(2);
    });
  });

  it('refuses a wrong owner password with an authorization error naming the session', async () => {
    await withTpm(async (tpm) => {
      const pub = {
        nvIndex: 0x01400020,
        nameAlg: TPM_ALG.SHA256,
        attributes: TPMA_NV.OWNERWRITE | TPMA_NV.OWNERREAD,
        authPolicy: new Uint8Array(),
        dataSize: 8,
      };
      const err = await tpm
        .nvDefineSpace(TPM_RH.OWNER, pub, { hierarchyAuth: 'wrong' })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TpmError);
      expect((err as TpmError).decoded.session).toBe(1);
      expect([TPM_RC.AUTH_FAIL, TPM_RC.BAD_AUTH]).toContain((err as TpmError).code);
    });
  });

  it('resets PCRs through the control channel (init, then Startup)', async () => {
    await withTpm((tpm) => tpm.pcrExtend(12, [{ hashAlg: TPM_ALG.SHA256, digest: sha256('boot') }]));
    const ctrl = new SwtpmControlChannel({ host: swtpm.host, port: swtpm.ctrlPort });
    await ctrl.init();
    await withTpm(async (tpm) => {
      // After _TPM_Init the TPM refuses everything but Startup.
      const err = await tpm.readPcrs(TPM_ALG.SHA256, [12]).catch((e: unknown) => e);
      expect((err as TpmError).code).toBe(TPM_RC.INITIALIZE);
      await tpm.startup();
      expect(hex((await tpm.readPcrs(TPM_ALG.SHA256, [12]))[0]!)).toBe('00'.repeat(32));
      // Persistent objects survive a reboot.
      expect(await tpm.getHandles(TPM_HR.PERSISTENT)).toContain(0x81010002);
    });
  });

  it('response parsers refuse every truncation, trailing bytes and corruption of real swtpm responses', async () => {
    const samples = await withTpm(async (tpm) => {
      const primary = await tpm.execute(TPM_CC.CreatePrimary, {
        handles: [TPM_RH.OWNER],
        auths: [undefined],
        parameters: marshalCreatePrimary(attestationKeyTemplate('ecc-p256')),
      });
      const handle = primary.handles[0]!;
      try {
        const quote = await tpm.execute(TPM_CC.Quote, {
          handles: [handle],
          auths: [undefined],
          parameters: marshalQuote(sha256('q'), { scheme: TPM_ALG.NULL }, [
            pcrSelection(TPM_ALG.SHA256, [0, 1]),
          ]),
        });
        const readPublic = await tpm.execute(TPM_CC.ReadPublic, { handles: [handle] });
        const pcrRead = await tpm.execute(TPM_CC.PCR_Read, {
          parameters: marshalPcrRead([pcrSelection(TPM_ALG.SHA256, [0, 8, 17])]),
        });
        const cap = await tpm.execute(TPM_CC.GetCapability, {
          parameters: marshalGetCapability(TPM_CAP.TPM_PROPERTIES, TPM_PT.FAMILY_INDICATOR, 4),
        });
        return [
          ['CreatePrimary', primary.parameters, parseCreatePrimaryResponse],
          ['Quote', quote.parameters, parseQuoteResponse],
          ['ReadPublic', readPublic.parameters, parseReadPublicResponse],
          ['PCR_Read', pcrRead.parameters, parsePcrReadResponse],
          ['GetCapability', cap.parameters, parseGetCapabilityResponse],
        ] as const;
      } finally {
        await tpm.flushContext(handle);
      }
    });
    const nvPub = {
      nvIndex: 0x01400001,
      nameAlg: TPM_ALG.SHA256,
      attributes: TPMA_NV.OWNERREAD,
      authPolicy: new Uint8Array(),
      dataSize: 10,
    };
    const all = [
      ...samples,
      [
        'NV_ReadPublic',
        marshalNvReadPublicResponse(nvPub, nvName(nvPub)),
        parseNvReadPublicResponse,
      ] as const,
    ];
    for (const [name, bytes, parse] of all) {
      expect(() => (parse as (b: Uint8Array) => unknown)(bytes), name).not.toThrow();
      for (let n = 0; n < bytes.length; n++) {
        expect(
          () => (parse as (b: Uint8Array) => unknown)(bytes.subarray(0, n)),
          `${name} prefix ${n}`,
        ).toThrow(TpmParseError);
      }
      const longer = new Uint8Array([...bytes, 0]);
      expect(() => (parse as (b: Uint8Array) => unknown)(longer), `${name} + 1 byte`).toThrow(TpmParseError);
      let seed = bytes.length;
      const rand = () => {
        seed = (seed * 1103515245 + 12345) >>> 0;
        return seed / 2 ** 32;
      };
      for (let i = 0; i < 500; i++) {
        const b = bytes.slice();
        b[Math.floor(rand() * b.length)] = Math.floor(rand() * 256);
        try {
          (parse as (b: Uint8Array) => unknown)(b);
        } catch (err) {
          expect(err, name).toBeInstanceOf(TpmParseError);
        }
      }
    }
  });
});
