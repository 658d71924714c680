import { randomBytes } from 'node:crypto';
import { marshalCommand, marshalResponse, TPM_ALG, TPM_CC, TPM_RH, TpmWriter } from '@broker/tpm';
import { describe, expect, it } from 'vitest';
import { SessionTracker } from './sessions.js';

const SESSION = 0x02000000;

function startCommand(
  tpmKey: number = TPM_RH.NULL,
  bind: number = TPM_RH.NULL,
  type = 0,
  hash: number = TPM_ALG.SHA256,
): Uint8Array {
  return marshalCommand({
    code: 0x176,
    handles: [tpmKey, bind],
    parameters: new TpmWriter()
      .tpm2b(Buffer.alloc(32, 1), 64, 'nonceCaller')
      .tpm2b(new Uint8Array(), 64, 'salt')
      .u8(type)
      .u16(TPM_ALG.NULL)
      .u16(hash)
      .finish(),
  });
}

function startResponse(nonce: Uint8Array, handle = SESSION): Uint8Array {
  return marshalResponse({
    handles: [handle],
    parameters: new TpmWriter().tpm2b(nonce, 64, 'nonceTPM').finish(),
  });
}

function readCommand(attributes: number): Uint8Array {
  return marshalCommand({
    code: TPM_CC.NV_Read,
    handles: [TPM_RH.OWNER, 0x01500000],
    sessions: [{ handle: SESSION, nonce: Buffer.alloc(32, 2), attributes, hmac: Buffer.alloc(32) }],
    parameters: new TpmWriter().u16(4).u16(0).finish(),
  });
}

function readResponse(nonce: Uint8Array, attributes: number): Uint8Array {
  return marshalResponse({
    parameters: new TpmWriter().tpm2b(Buffer.alloc(4), 1024, 'data').finish(),
    sessions: [{ nonce, attributes, hmac: Buffer.alloc(32) }],
  });
}

describe('SessionTracker', () => {
  it('follows an unsalted, unbound HMAC session from start through uses to its end', () => {
    const t = new SessionTracker();
    const n1 = randomBytes(32);
    t.observe(startCommand(), startResponse(n1));
    expect(t.get(SESSION)).toEqual({
      handle: SESSION,
      authHash: TPM_ALG.SHA256,
      nonceTpm: Uint8Array.from(n1),
    });
    const n2 = randomBytes(32);
    t.observe(readCommand(1), readResponse(n2, 1));
    expect(Buffer.from(t.get(SESSION)!.nonceTpm).equals(n2)).toBe(true);
    // continueSession clear: the TPM ends the session with the command.
    t.observe(readCommand(0), readResponse(randomBytes(32), 0));
    expect(t.get(SESSION)).toBeUndefined();
  });

  it('forgets a flushed session, and ignores failed commands', () => {
    const t = new SessionTracker();
    t.observe(startCommand(), startResponse(randomBytes(32)));
    const failed = marshalResponse({ rc: 0x98e });
    t.observe(readCommand(0), failed);
    expect(t.get(SESSION)).toBeDefined();
    const flush = marshalCommand({
      code: TPM_CC.FlushContext,
      parameters: new TpmWriter().u32(SESSION).finish(),
    });
    t.observe(flush, marshalResponse({}));
    expect(t.get(SESSION)).toBeUndefined();
  });

  it('does not track sessions whose key it cannot know: salted, bound, policy, odd hash', () => {
    for (const cmd of [
      startCommand(0x81000001),
      startCommand(TPM_RH.NULL, TPM_RH.OWNER),
      startCommand(TPM_RH.NULL, TPM_RH.NULL, 1),
      startCommand(TPM_RH.NULL, TPM_RH.NULL, 0, 0x1234),
    ]) {
      const t = new SessionTracker();
      t.observe(cmd, startResponse(randomBytes(32)));
      expect(t.size).toBe(0);
    }
    const t = new SessionTracker();
    t.observe(startCommand(), startResponse(randomBytes(32), 0x80000001));
    expect(t.size).toBe(0);
  });

  it('learns nothing from garbage, truncated or mismatched exchanges, and never throws', () => {
    const t = new SessionTracker();
    t.observe(startCommand(), startResponse(randomBytes(32)));
    const before = t.get(SESSION);
    const good = readCommand(1);
    const samples: [Uint8Array, Uint8Array][] = [
      [new Uint8Array(), new Uint8Array()],
      [good.subarray(0, 20), readResponse(randomBytes(32), 1)],
      [good, readResponse(randomBytes(32), 1).subarray(0, 30)],
      [good, marshalResponse({})],
      [startCommand().subarray(0, 25), startResponse(randomBytes(32))],
      [startCommand(), startResponse(randomBytes(32)).subarray(0, 15)],
      [randomBytes(64), randomBytes(64)],
    ];
    for (let i = 0; i < 200; i++) samples.push([randomBytes(i % 80), randomBytes((i * 7) % 90)]);
    for (const [c, r] of samples) expect(() => t.observe(c, r)).not.toThrow();
    expect(t.get(SESSION)).toEqual(before);
  });
});
