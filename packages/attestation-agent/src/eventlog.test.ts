import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  aaelEventText,
  EVENTLOG_FILE,
  EventLog,
  EventlogError,
  type EventlogHash,
  InvalidAaelEvent,
  MAX_AAEL_EVENT_BYTES,
  type MeasuringAttester,
  runtimeMeasurementProfile,
  tcg2AaelEntry,
  WAL_FILE,
} from './eventlog.js';

const EVENT = { domain: 'domain', operation: 'operation', content: 'content' };

describe('AAEL TCG2 entry', () => {
  // Digests of upstream's `test_event_digest` cases for "domain operation content".
  it.each([
    ['sha256', '46df8dacf00a07d34a83cdf56d7978697790787cf2ba1432ef7c38f22cd96351'],
    [
      'sha384',
      'dad5f0e226318ffa9839b75a472c6aa7fdb5834949d0a0a22990cf04d5692440fb00f3aa0609db7e49cd8d793f670d02',
    ],
    [
      'sha512',
      'b708d222ca8bd44dfe6ba0c4ca2cbb72379276fba8091025217064be45a813e5d6124ccf073219edb617d1faf007d55061465bdf34b7437dbdc9a7405bd4e9c0',
    ],
  ] as const)('digests the tagged event with %s as upstream', (alg, digest) => {
    expect(tcg2AaelEntry(aaelEventText(EVENT), 1, alg).digest.toString('hex')).toBe(digest);
  });

  it('lays the entry out little-endian: register, type 6, one digest, size, tagged "AAEL" event', () => {
    const text = 'd o c';
    const { bytes, digest } = tcg2AaelEntry(text, 3, 'sha384');
    expect(bytes.readUInt32LE(0)).toBe(3);
    expect(bytes.readUInt32LE(4)).toBe(6);
    expect(bytes.readUInt32LE(8)).toBe(1);
    expect(bytes.readUInt16LE(12)).toBe(0x000c);
    expect(bytes.subarray(14, 14 + 48)).toEqual(digest);
    expect(bytes.readUInt32LE(62)).toBe(8 + text.length);
    expect(bytes.subarray(66, 70).toString('latin1')).toBe('LEAA'); // 0x4141454c little-endian
    expect(bytes.readUInt32LE(70)).toBe(text.length);
    expect(bytes.subarray(74).toString()).toBe(text);
    expect(bytes.length).toBe(74 + text.length);
  });

  it('refuses a newline in the content (upstream Content) and oversize events', () => {
    expect(() => aaelEventText({ ...EVENT, content: 'a\nb' })).toThrow(InvalidAaelEvent);
    expect(() => aaelEventText({ ...EVENT, content: 'x'.repeat(MAX_AAEL_EVENT_BYTES) })).toThrow(
      /longer than/,
    );
    // Upstream only forbids newlines in the content; the domain is free text.
    expect(aaelEventText({ domain: 'a b', operation: 'o', content: '{"image":"x", "digest":"y"}' })).toBe(
      'a b o {"image":"x", "digest":"y"}',
    );
  });

  it('maps PCRs to CC measurement registers per TEE', () => {
    const tdx = runtimeMeasurementProfile('tdx');
    expect(tdx?.alg).toBe('sha384');
    expect([1, 7, 2, 6, 8, 15, 16, 17, 0].map((p) => tdx?.toCcmr(p))).toEqual([1, 1, 2, 2, 3, 3, 4, 4, 4]);
    expect(runtimeMeasurementProfile('csv')?.toCcmr(0)).toBe(0);
    expect(runtimeMeasurementProfile('az-snp-vtpm')).toMatchObject({ alg: 'sha256' });
    expect(runtimeMeasurementProfile('az-snp-vtpm')?.toCcmr(17)).toBe(17);
    expect(runtimeMeasurementProfile('sample')).toBeUndefined();
    expect(runtimeMeasurementProfile('snp')).toBeUndefined();
  });
});

/** A register bank that extends like a TPM/RTMR: new = H(old ‖ digest). */
class FakeMeasuringAttester implements MeasuringAttester {
  readonly tee = 'tdx' as const;
  readonly registers = new Map<number, Buffer>();
  readonly extended: [number, string][] = [];
  failNextExtend = false;
  constructor(readonly alg: EventlogHash = 'sha384') {}
  async getEvidence(): Promise<unknown> {
    return {};
  }
  value(pcr: number): Buffer {
    return this.registers.get(pcr) ?? Buffer.alloc(this.alg === 'sha384' ? 48 : 32);
  }
  async getRuntimeMeasurement(pcr: number): Promise<Uint8Array> {
    return this.value(pcr);
  }
  async extendRuntimeMeasurement(digest: Uint8Array, pcr: number): Promise<void> {
    if (this.failNextExtend) {
      this.failNextExtend = false;
      throw new Error('device refused');
    }
    this.extended.push([pcr, Buffer.from(digest).toString('hex')]);
    this.registers.set(pcr, createHash(this.alg).update(this.value(pcr)).update(digest).digest());
  }
}

describe('EventLog', () => {
  let dir: string;
  let attester: FakeMeasuringAttester;
  const profile = runtimeMeasurementProfile('tdx');
  if (profile === undefined) throw new Error('no tdx profile');

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'aa-eventlog-'));
    attester = new FakeMeasuringAttester();
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const exists = (p: string) =>
    stat(p).then(
      () => true,
      () => false,
    );

  it('appends one entry per event, extends the register, and leaves no write-ahead record', async () => {
    const log = await EventLog.open({ attester, profile, dir });
    await log.extend(EVENT, 17);
    await log.extend({ ...EVENT, content: 'two' }, 8);
    await log.close();
    const first = tcg2AaelEntry('domain operation content', 4, 'sha384');
    const second = tcg2AaelEntry('domain operation two', 3, 'sha384');
    expect(await readFile(join(dir, EVENTLOG_FILE))).toEqual(Buffer.concat([first.bytes, second.bytes]));
    expect(attester.extended).toEqual([
      [17, first.digest.toString('hex')],
      [8, second.digest.toString('hex')],
    ]);
    expect(await exists(join(dir, WAL_FILE))).toBe(false);
  });

  it('appends after existing content when reopened', async () => {
    await writeFile(join(dir, EVENTLOG_FILE), 'CCEL');
    const log = await EventLog.open({ attester, profile, dir });
    await log.extend(EVENT, 17);
    await log.close();
    const raw = await readFile(join(dir, EVENTLOG_FILE));
    expect(raw.subarray(0, 4).toString()).toBe('CCEL');
    expect(raw.subarray(4)).toEqual(tcg2AaelEntry('domain operation content', 4, 'sha384').bytes);
  });

  it('runs concurrent extends one at a time, in call order', async () => {
    const log = await EventLog.open({ attester, profile, dir });
    await Promise.all(['a', 'b', 'c', 'd'].map((c) => log.extend({ ...EVENT, content: c }, 17)));
    await log.close();
    const expected = ['a', 'b', 'c', 'd'].map((c) => tcg2AaelEntry(`domain operation ${c}`, 4, 'sha384'));
    expect(await readFile(join(dir, EVENTLOG_FILE))).toEqual(Buffer.concat(expected.map((e) => e.bytes)));
    let reg = Buffer.alloc(48);
    for (const e of expected) reg = createHash('sha384').update(reg).update(e.digest).digest();
    expect(attester.value(17)).toEqual(reg);
  });

  it('keeps the record when extending fails, and finishes the event on the next start', async () => {
    const log = await EventLog.open({ attester, profile, dir });
    attester.failNextExtend = true;
    await expect(log.extend(EVENT, 17)).rejects.toThrow('device refused');
    await log.close();
    expect(await exists(join(dir, WAL_FILE))).toBe(true);
    expect((await readFile(join(dir, EVENTLOG_FILE))).length).toBe(0);

    const reopened = await EventLog.open({ attester, profile, dir });
    await reopened.close();
    const entry = tcg2AaelEntry('domain operation content', 4, 'sha384');
    expect(attester.extended).toEqual([[17, entry.digest.toString('hex')]]);
    expect(await readFile(join(dir, EVENTLOG_FILE))).toEqual(entry.bytes);
    expect(await exists(join(dir, WAL_FILE))).toBe(false);
  });

  it('does not extend twice when the crash came after the extend', async () => {
    const entry = tcg2AaelEntry('domain operation content', 4, 'sha384');
    await attester.extendRuntimeMeasurement(entry.digest, 17);
    const head = Buffer.alloc(12);
    head.writeBigUInt64BE(0n, 0);
    head.writeUInt32BE(17, 8);
    await writeFile(
      join(dir, WAL_FILE),
      Buffer.concat([head, attester.value(17), Buffer.from('domain operation content')]),
    );
    const log = await EventLog.open({ attester, profile, dir });
    await log.close();
    expect(attester.extended.length).toBe(1);
    expect(await readFile(join(dir, EVENTLOG_FILE))).toEqual(entry.bytes);
  });

  it('refuses to start when the register matches neither state of the record', async () => {
    const head = Buffer.alloc(12);
    head.writeUInt32BE(17, 8);
    await writeFile(join(dir, WAL_FILE), Buffer.concat([head, Buffer.alloc(48, 7), Buffer.from('d o c')]));
    await expect(EventLog.open({ attester, profile, dir })).rejects.toThrow(/fatal error when recovering/);
    expect(attester.extended).toEqual([]);
  });

  it.each([
    ['truncated', Buffer.alloc(20)],
    [
      'with an absurd offset',
      Buffer.concat([Buffer.from('ffffffffffffffff00000011', 'hex'), Buffer.alloc(48)]),
    ],
    ['oversize', Buffer.alloc(12 + 48 + MAX_AAEL_EVENT_BYTES + 1)],
  ])('refuses a %s write-ahead record', async (_name, raw) => {
    await writeFile(join(dir, WAL_FILE), raw);
    await expect(EventLog.open({ attester, profile, dir })).rejects.toThrow(/Failed to read wal cache/);
  });

  it('fails an extend, as upstream, when the attester cannot read its registers', async () => {
    const blind: MeasuringAttester = {
      tee: 'az-tdx-vtpm',
      getEvidence: async () => ({}),
      extendRuntimeMeasurement: async () => {},
    };
    const log = await EventLog.open({ attester: blind, profile, dir });
    await expect(log.extend(EVENT, 17)).rejects.toThrow(EventlogError);
    await expect(log.extend(EVENT, 17)).rejects.toThrow(
      'The Attester does not support getting runtime measurement',
    );
    await log.close();
  });

  it('rejects an invalid event before touching the register', async () => {
    const log = await EventLog.open({ attester, profile, dir });
    await expect(log.extend({ ...EVENT, content: 'x\n' }, 17)).rejects.toThrow(InvalidAaelEvent);
    await log.close();
    expect(attester.extended).toEqual([]);
  });
});
