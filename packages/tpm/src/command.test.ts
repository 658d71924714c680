import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  decodeCommand,
  extendPcr,
  marshalCommand,
  marshalNvRead,
  marshalNvReadPublicResponse,
  marshalNvReadResponse,
  marshalNvWrite,
  marshalPcrExtend,
  marshalResponse,
  nvName,
  parseNvReadParameters,
  parseNvReadPublicResponse,
  parseNvReadResponse,
  parseNvWriteParameters,
  parsePcrExtendParameters,
  parseResponse,
  passwordResponseSession,
  passwordSession,
  pcrDigest,
  replayPcr,
  TPM_ALG,
  TPM_CC,
  TPM_RH,
  TPM_ST,
  TPMA_NV,
  TpmError,
  TpmParseError,
  TpmUsageError,
} from './index.js';

const sha256 = (b: Uint8Array | string) => new Uint8Array(createHash('sha256').update(b).digest());

describe('command framing', () => {
  it('marshals a command with a password session and decodes it back', () => {
    const cmd = marshalCommand({
      code: TPM_CC.NV_Write,
      handles: [TPM_RH.OWNER, 0x01400002],
      sessions: [passwordSession(new TextEncoder().encode('pw'))],
      parameters: marshalNvWrite(new Uint8Array([1, 2, 3]), 5),
    });
    expect(new DataView(cmd.buffer).getUint16(0)).toBe(TPM_ST.SESSIONS);
    expect(new DataView(cmd.buffer).getUint32(2)).toBe(cmd.length);
    const d = decodeCommand(cmd);
    expect(d.code).toBe(TPM_CC.NV_Write);
    expect(d.handles).toEqual([TPM_RH.OWNER, 0x01400002]);
    expect(d.sessions).toEqual([
      { handle: TPM_RH.PW, nonce: new Uint8Array(), attributes: 1, hmac: new TextEncoder().encode('pw') },
    ]);
    expect(parseNvWriteParameters(d.parameters)).toEqual({ data: new Uint8Array([1, 2, 3]), offset: 5 });
  });

  it('decodes session-less commands and refuses unknown codes, bad tags and bad sizes', () => {
    const cmd = marshalCommand({ code: TPM_CC.NV_ReadPublic, handles: [0x01400001] });
    expect(decodeCommand(cmd)).toMatchObject({
      tag: TPM_ST.NO_SESSIONS,
      handles: [0x01400001],
      sessions: [],
    });
    const unknown = marshalCommand({ code: 0x199, parameters: new Uint8Array([0, 0, 0, 1]) });
    expect(() => decodeCommand(unknown)).toThrow(/handle count not given/);
    expect(decodeCommand(unknown, 1).handles).toEqual([1]);
    const badTag = cmd.slice();
    badTag[1] = 0x05;
    expect(() => decodeCommand(badTag)).toThrow(/neither TPM_ST_SESSIONS/);
    const badSize = cmd.slice();
    badSize[5]! += 1;
    expect(() => decodeCommand(badSize)).toThrow(/does not match/);
    const withAuth = marshalCommand({ code: TPM_CC.PCR_Extend, handles: [8], sessions: [passwordSession()] });
    const overAuth = withAuth.slice();
    new DataView(overAuth.buffer).setUint32(14, 1000);
    expect(() => decodeCommand(overAuth)).toThrow(/authorizationSize 1000 exceeds/);
    const emptyAuth = withAuth.slice(0, 18);
    new DataView(emptyAuth.buffer).setUint32(2, 18);
    new DataView(emptyAuth.buffer).setUint32(14, 0);
    expect(() => decodeCommand(emptyAuth)).toThrow(/without a session/);
  });

  it('parses responses with and without sessions, and refuses malformed ones', () => {
    const params = marshalNvReadResponse(new Uint8Array([9, 9]));
    const session = passwordResponseSession(passwordSession());
    const withSessions = marshalResponse({ parameters: params, sessions: [session] });
    expect(parseResponse(withSessions, TPM_CC.NV_Read, { sessionCount: 1 })).toEqual({
      handles: [],
      parameters: params,
      sessions: [session],
    });
    expect(parseNvReadResponse(params)).toEqual(new Uint8Array([9, 9]));
    // Sent one session, got none back (or the other way round): refuse.
    const noSessions = marshalResponse({ parameters: params });
    expect(() => parseResponse(noSessions, TPM_CC.NV_Read, { sessionCount: 1 })).toThrow(/tag 0x8001/);
    expect(() => parseResponse(withSessions, TPM_CC.NV_Read, { sessionCount: 0 })).toThrow(/tag 0x8002/);
    // parameterSize larger than what follows.
    const over = withSessions.slice();
    new DataView(over.buffer).setUint32(10, 100);
    expect(() => parseResponse(over, TPM_CC.NV_Read, { sessionCount: 1 })).toThrow(/parameterSize 100/);
    // Two sessions' worth of data for one session.
    const twoSessions = marshalResponse({ parameters: params, sessions: [session, session] });
    expect(() => parseResponse(twoSessions, TPM_CC.NV_Read, { sessionCount: 1 })).toThrow(/trailing/);
    // Error codes become TpmError; an error response with a body is malformed.
    expect(() => parseResponse(marshalResponse({ rc: 0x28b }), TPM_CC.NV_Read)).toThrow(TpmError);
    const errWithBody = new Uint8Array([0x80, 0x01, 0, 0, 0, 11, 0, 0, 0x02, 0x8b, 0]);
    expect(() => parseResponse(errWithBody, TPM_CC.NV_Read)).toThrow(/extra byte/);
    for (let n = 0; n < 10; n++) {
      expect(() => parseResponse(withSessions.subarray(0, n), TPM_CC.NV_Read, { sessionCount: 1 })).toThrow(
        TpmParseError,
      );
    }
    const withHandle = marshalResponse({ handles: [0x80000001], parameters: new Uint8Array([1]) });
    expect(parseResponse(withHandle, TPM_CC.CreatePrimary, { responseHandles: 1 }).handles).toEqual([
      0x80000001,
    ]);
  });

  it('round-trips the NV and PCR parameter areas an interposer handles', () => {
    expect(parseNvReadParameters(marshalNvRead(1024, 2048))).toEqual({ size: 1024, offset: 2048 });
    const pub = {
      nvIndex: 0x01400001,
      nameAlg: TPM_ALG.SHA256,
      attributes: TPMA_NV.OWNERREAD | TPMA_NV.WRITTEN,
      authPolicy: new Uint8Array(),
      dataSize: 2600,
    };
    const rp = parseNvReadPublicResponse(marshalNvReadPublicResponse(pub, nvName(pub)));
    expect(rp.nvPublic).toEqual(pub);
    expect(rp.name).toEqual(nvName(pub));
    const digests = [
      { hashAlg: TPM_ALG.SHA256, digest: sha256('a') },
      { hashAlg: TPM_ALG.SHA1, digest: new Uint8Array(20) },
    ];
    expect(parsePcrExtendParameters(marshalPcrExtend(digests))).toEqual(digests);
    expect(() => marshalNvWrite(new Uint8Array(2049), 0)).toThrow(TpmUsageError);
    expect(() => parseNvReadResponse(new Uint8Array([0x08, 0x01]))).toThrow(/exceeds the maximum 2048/);
  });
});

describe('PCR arithmetic', () => {
  it('computes the spec PCR8 rule: sha256(32 zero bytes ‖ digest)', () => {
    const digest = sha256('version = "0.1.0"\n');
    const expected = sha256(new Uint8Array([...new Uint8Array(32), ...digest]));
    expect(extendPcr(new Uint8Array(32), digest)).toEqual(expected);
    expect(replayPcr([digest])).toEqual(expected);
    expect(replayPcr([digest, digest])).toEqual(extendPcr(expected, digest));
    expect(() => extendPcr(new Uint8Array(32), new Uint8Array(48))).toThrow(TpmUsageError);
    expect(extendPcr(new Uint8Array(48), new Uint8Array(48), TPM_ALG.SHA384)).toHaveLength(48);
  });

  it('digests selected PCRs in selection order and refuses missing or mis-sized values', () => {
    const values = Array.from({ length: 24 }, (_, i) => sha256(String(i)));
    const sel = [{ hashAlg: TPM_ALG.SHA256, pcrs: [11, 3, 8] }];
    const expected = sha256(new Uint8Array([...values[3]!, ...values[8]!, ...values[11]!]));
    expect(pcrDigest(values, sel, TPM_ALG.SHA256)).toEqual(expected);
    const sha1Values = Array.from({ length: 24 }, () => new Uint8Array(20).fill(0xff));
    const banks = new Map([
      [TPM_ALG.SHA256, values],
      [TPM_ALG.SHA1, sha1Values],
    ]);
    const two = [
      { hashAlg: TPM_ALG.SHA1, pcrs: [0] },
      { hashAlg: TPM_ALG.SHA256, pcrs: [1] },
    ];
    expect(pcrDigest(banks, two, TPM_ALG.SHA384)).toEqual(
      new Uint8Array(createHash('sha384').update(sha1Values[0]!).update(values[1]!).digest()),
    );
    expect(() => pcrDigest(values, two, TPM_ALG.SHA256)).toThrow(/several banks/);
    expect(() => pcrDigest(values.slice(0, 10), sel, TPM_ALG.SHA256)).toThrow(
      /PCR 11 of bank sha256 is missing/,
    );
    expect(() => pcrDigest(sha1Values, sel, TPM_ALG.SHA256)).toThrow(/20 bytes, not 32/);
    expect(() => pcrDigest(new Map(), sel, TPM_ALG.SHA256)).toThrow(/no PCR values for bank sha256/);
    expect(() => pcrDigest(values, sel, TPM_ALG.NULL)).toThrow(/not a hash algorithm/);
  });
});
