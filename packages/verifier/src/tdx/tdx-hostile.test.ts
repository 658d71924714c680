// Hostile input for the TDX parsers: truncation, oversize, wrong versions and types, inconsistent
// sizes, and a bounded, seeded fuzz run over quotes and event logs. Every failure must be a
// VerificationError; a mutated quote may only verify if every signed byte is unchanged.
import { readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import { VerificationError } from '../errors.js';
import { encodeCcEventLog, parseCcEventLog } from './ccel.js';
import { parseQeIdentity, parseTdxTcbInfo } from './collateral.js';
import { MAX_QUOTE_BYTES, parseTdxQuote } from './quote.js';
import { trustedSgxRoots } from './trust.js';
import { verifyQuoteSignatures } from './verify.js';

const QUOTE = readFileSync(vector('trustee/tdx/tdx_quote_4.dat'));
const TCB_INFO = readFileSync(vector('trustee/tdx/tcbInfo.json'), 'utf8');
const AT = new Date('2025-11-01T00:00:00Z');
const ROOTS = trustedSgxRoots(undefined);

function outcome(fn: () => unknown): string {
  try {
    fn();
    return 'ok';
  } catch (e) {
    if (e instanceof VerificationError) return e.code;
    throw e;
  }
}

/** mulberry32: a small deterministic PRNG, so a failing iteration can be replayed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function mutate(input: Buffer, rnd: () => number): Buffer {
  const int = (n: number) => Math.floor(rnd() * n);
  let b = Buffer.from(input);
  switch (int(5)) {
    case 0: // flip a few bits
      for (let i = int(4) + 1; i > 0; i--) b[int(b.length)]! ^= 1 << int(8);
      break;
    case 1: // truncate
      b = b.subarray(0, int(b.length));
      break;
    case 2: {
      // overwrite a little-endian length-like field with a large value
      const at = int(b.length - 4);
      b.writeUInt32LE([0xffffffff, 0x7fffffff, 0x10000, b.length, 0][int(5)]!, at);
      break;
    }
    case 3: {
      // insert bytes
      const at = int(b.length);
      b = Buffer.concat([b.subarray(0, at), Buffer.from([int(256), int(256), int(256)]), b.subarray(at)]);
      break;
    }
    default: // set a random byte
      b[int(b.length)] = int(256);
  }
  return b;
}

describe('quote parser bounds', () => {
  it('refuses every truncation of a real quote', () => {
    for (let n = 0; n < QUOTE.length; n += 7) {
      expect(outcome(() => parseTdxQuote(QUOTE.subarray(0, n)))).toMatch(
        /^(REPORT_MALFORMED|UNSUPPORTED_VERSION)$/,
      );
    }
  });

  it('refuses oversize input before reading it', () => {
    expect(outcome(() => parseTdxQuote(Buffer.alloc(MAX_QUOTE_BYTES + 1)))).toBe('EVIDENCE_TOO_LARGE');
  });

  it('refuses other versions, TEE types and key types', () => {
    const set = (off: number, v: number, size: 2 | 4) => {
      const b = Buffer.from(QUOTE);
      if (size === 2) b.writeUInt16LE(v, off);
      else b.writeUInt32LE(v, off);
      return b;
    };
    expect(outcome(() => parseTdxQuote(set(0, 3, 2)))).toBe('UNSUPPORTED_VERSION');
    expect(outcome(() => parseTdxQuote(set(0, 6, 2)))).toBe('UNSUPPORTED_VERSION');
    expect(outcome(() => parseTdxQuote(set(4, 0, 4)))).toBe('UNSUPPORTED_VERSION');
    expect(outcome(() => parseTdxQuote(set(2, 3, 2)))).toBe('UNSUPPORTED_ALGORITHM');
  });

  it('refuses inconsistent sizes and certification data types', () => {
    const sigAt = 48 + 584;
    const set = (off: number, v: number, size: 2 | 4) => {
      const b = Buffer.from(QUOTE);
      if (size === 2) b.writeUInt16LE(v, off);
      else b.writeUInt32LE(v, off);
      return b;
    };
    expect(outcome(() => parseTdxQuote(set(sigAt, 0xffffffff, 4)))).toBe('REPORT_MALFORMED');
    expect(outcome(() => parseTdxQuote(set(sigAt, 100, 4)))).toBe('REPORT_MALFORMED');
    expect(outcome(() => parseTdxQuote(set(sigAt + 4 + 128, 5, 2)))).toBe('UNSUPPORTED_VERSION');
    expect(outcome(() => parseTdxQuote(set(sigAt + 4 + 130, 10, 4)))).toBe('REPORT_MALFORMED');
    const authAt = sigAt + 4 + 134 + 384 + 64;
    expect(outcome(() => parseTdxQuote(set(authAt, 0xffff, 2)))).toBe('REPORT_MALFORMED');
    expect(outcome(() => parseTdxQuote(set(authAt + 2 + 32, 6, 2)))).toBe('UNSUPPORTED_VERSION');
    expect(outcome(() => parseTdxQuote(set(authAt + 2 + 32 + 2, 0xfffff, 4)))).toBe('EVIDENCE_TOO_LARGE');
  });

  it('refuses a chain of the wrong length', () => {
    const q = parseTdxQuote(QUOTE);
    const chain = q.pckChain.toString('latin1');
    const first = chain.slice(0, chain.indexOf('-----END CERTIFICATE-----') + 26);
    const rebuilt = Buffer.concat([
      QUOTE.subarray(0, QUOTE.length - q.pckChain.length - 4),
      Buffer.alloc(4),
      Buffer.from(first, 'latin1'),
    ]);
    // Fix up the three enclosing sizes for the shorter chain.
    const delta = q.pckChain.length - first.length;
    rebuilt.writeUInt32LE(first.length, rebuilt.length - first.length - 4);
    const sigAt = 48 + 584;
    rebuilt.writeUInt32LE(QUOTE.readUInt32LE(sigAt) - delta, sigAt);
    rebuilt.writeUInt32LE(QUOTE.readUInt32LE(sigAt + 4 + 130) - delta, sigAt + 4 + 130);
    expect(outcome(() => verifyQuoteSignatures(rebuilt, ROOTS, AT))).toBe('CERT_CHAIN_INVALID');
  });
});

describe('fuzz (bounded, seeded)', () => {
  it('quote parser and signature checks: only VerificationErrors, no forged passes', () => {
    const rnd = prng(0x7d1);
    const original = parseTdxQuote(QUOTE);
    let verified = 0;
    for (let i = 0; i < 1500; i++) {
      const m = mutate(QUOTE, rnd);
      let result: ReturnType<typeof verifyQuoteSignatures> | undefined;
      try {
        result = verifyQuoteSignatures(m, ROOTS, AT);
      } catch (e) {
        if (!(e instanceof VerificationError)) throw new Error(`iteration ${i}: ${(e as Error).message}`);
        continue;
      }
      verified++;
      // Whatever changed was not signed (PEM whitespace, the chain's NUL).
      expect(result.quote.signedData.equals(original.signedData)).toBe(true);
      expect(result.quote.signature.equals(original.signature)).toBe(true);
      expect(result.quote.qeReport.raw.equals(original.qeReport.raw)).toBe(true);
      expect(result.quote.attestationKey.equals(original.attestationKey)).toBe(true);
      expect(result.pck.leaf.raw.equals(parseLeaf())).toBe(true);
    }
    expect(verified).toBeLessThan(1500);
  });

  it('event log parser: only VerificationErrors', () => {
    const rnd = prng(0xcce1);
    const log = encodeCcEventLog([
      { index: 1, type: 0x80000008, data: Buffer.from('fv') },
      { index: 1, type: 0x80000001, data: efiVariable() },
      { index: 2, type: 0x80000003, data: imageLoad() },
      { index: 2, type: 0xd, data: Buffer.from('grub_cmd linux\0') },
      { index: 4, type: 0x6, data: Buffer.concat([tagHeader(11), Buffer.from('a b {"c":1}')]) },
      { index: 1, type: 0x8000000a, data: Buffer.from('\x05abcd\0') },
    ]);
    expect(parseCcEventLog(log).entries).toHaveLength(6);
    for (let i = 0; i < 2000; i++) {
      const m = mutate(log, rnd);
      const r = outcome(() => parseCcEventLog(m));
      expect(r).toMatch(/^(ok|REPORT_MALFORMED)$/);
    }
  });

  it('collateral parser: only VerificationErrors', () => {
    const rnd = prng(0xc011);
    const text = Buffer.from(TCB_INFO);
    for (let i = 0; i < 500; i++) {
      const m = mutate(text, rnd);
      expect(outcome(() => parseTdxTcbInfo(m))).toMatch(/^(ok|COLLATERAL_INVALID|EVIDENCE_TOO_LARGE)$/);
      expect(outcome(() => parseQeIdentity(m))).toMatch(/^(ok|COLLATERAL_INVALID|EVIDENCE_TOO_LARGE)$/);
    }
  });
});

function parseLeaf(): Buffer {
  return verifyQuoteSignatures(QUOTE, ROOTS, AT).pck.leaf.raw;
}

function tagHeader(len: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeUInt32LE(0x4141454c, 0);
  b.writeUInt32LE(len, 4);
  return b;
}

function efiVariable(): Buffer {
  const name = Buffer.from('SecureBoot', 'utf16le');
  const head = Buffer.alloc(32);
  head.writeBigUInt64LE(BigInt(name.length / 2), 16);
  head.writeBigUInt64LE(1n, 24);
  return Buffer.concat([head, name, Buffer.from([1])]);
}

function imageLoad(): Buffer {
  const file = Buffer.from('\\EFI\\BOOT\\BOOTX64.EFI\0', 'utf16le');
  const node = (t: number, s: number, d: Buffer) => {
    const h = Buffer.alloc(4);
    h[0] = t;
    h[1] = s;
    h.writeUInt16LE(d.length + 4, 2);
    return Buffer.concat([h, d]);
  };
  const path = Buffer.concat([
    node(2, 1, Buffer.from([0xd0, 0x41, 0x03, 0x0a, 0, 0, 0, 0])),
    node(1, 1, Buffer.from([0, 3])),
    node(4, 4, file),
    Buffer.from([0x7f, 0xff, 4, 0]),
  ]);
  const head = Buffer.alloc(32);
  head.writeBigUInt64LE(BigInt(path.length), 24);
  return Buffer.concat([head, path]);
}

describe('event log decoders', () => {
  it('decodes EFI variables, device paths, IPL strings and firmware blob names as trustee does', () => {
    const log = parseCcEventLog(
      encodeCcEventLog([
        { index: 1, type: 0x80000001, data: efiVariable() },
        { index: 2, type: 0x80000003, data: imageLoad() },
        { index: 3, type: 0xd, data: Buffer.from('grub_cmd linux /vmlinuz\0') },
        { index: 3, type: 0xd, data: Buffer.from('2e006c0069006e00750078000000', 'hex') },
        {
          index: 1,
          type: 0x8000000a,
          data: Buffer.from('0b74645f7061796c6f61640000109000000000000000001000000000', 'hex'),
        },
        { index: 1, type: 0xa, data: Buffer.from('ab\u0010c\u0001d') },
      ]),
    );
    const d = log.entries.map((e) => e.details);
    expect(d[0]).toEqual({
      unicode_name: 'SecureBoot',
      unicode_name_length: 10,
      variable_data: 'AQ==',
      variable_data_length: 1,
      variable_name: '00000000-0000-0000-0000-000000000000',
    });
    expect(d[1]).toEqual({ device_paths: ['ACPI(PNP0A03,0)', 'Pci(0,3)', 'File(\\EFI\\BOOT\\BOOTX64.EFI)'] });
    expect(d[2]).toEqual({ string: 'grub_cmd linux /vmlinuz' });
    expect(d[3]).toEqual({ string: 'linux' });
    expect(d[4]).toEqual({ string: 'td_payload' });
    expect(d[5]).toEqual({ string: 'ab cd' });
    expect(log.entries.every((e) => e.digest_matches_event)).toBe(true);
  });

  it('refuses unknown event types and algorithms, and runaway sizes', () => {
    const good = encodeCcEventLog([{ index: 1, type: 0x4, data: Buffer.alloc(4) }]);
    const at = good.length - 8 - (4 + 4 + 4 + 2 + 48 + 4 + 4);
    const type = Buffer.from(good);
    type.writeUInt32LE(0x1234, at + 4);
    expect(outcome(() => parseCcEventLog(type))).toBe('REPORT_MALFORMED');
    const alg = Buffer.from(good);
    alg.writeUInt16LE(0xb, at + 12);
    expect(outcome(() => parseCcEventLog(alg))).toBe('REPORT_MALFORMED');
    const size = Buffer.from(good);
    size.writeUInt32LE(0xffffffff, at + 12 + 2 + 48);
    expect(outcome(() => parseCcEventLog(size))).toBe('REPORT_MALFORMED');
    expect(outcome(() => parseCcEventLog(Buffer.alloc(3 * 1024 * 1024)))).toBe('EVIDENCE_TOO_LARGE');
    expect(outcome(() => parseCcEventLog(Buffer.alloc(10)))).toBe('REPORT_MALFORMED');
  });
});

describe('collateral documents', () => {
  it('refuse a repeated signed member, whose signed text and parsed value could differ', () => {
    const doc = JSON.parse(TCB_INFO) as { tcbInfo: unknown; signature: string };
    const inner = JSON.stringify(doc.tcbInfo);
    const twice = `{"tcbInfo":${inner},"tcbInfo":${inner.replace('"UpToDate"', '"OutOfDate"')},"signature":"${doc.signature}"}`;
    expect(outcome(() => parseTdxTcbInfo(twice))).toBe('COLLATERAL_INVALID');
    // Whitespace between members is fine; the signed text is the member's own bytes.
    const spaced = TCB_INFO.replace('{"tcbInfo":', '{ "tcbInfo" : ').replace(
      ',"signature"',
      ' , "signature"',
    );
    expect(parseTdxTcbInfo(spaced).signedText.equals(parseTdxTcbInfo(TCB_INFO).signedText)).toBe(true);
  });
});
