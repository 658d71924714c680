// Hostile reports: every truncation, bad length and unknown item fails with a named
// REPORT_MALFORMED (or UNSUPPORTED_VERSION), never an exception of another kind or a partial result.
import { readFileSync } from 'node:fs';
import { vector } from '@broker/cli/testing';
import { describe, expect, it } from 'vitest';
import { VerificationError } from '../errors.js';
import { decodeOpaqueData } from './opaque.js';
import {
  encodeUnsignedReport,
  MAX_NVIDIA_REPORT_BYTES,
  parseNvidiaReport,
  SPDM_REQUEST_SIZE,
} from './spdm.js';

const REPORT = Buffer.from(readFileSync(vector('trustee/nvidia/hopperAttestationReport.txt'), 'utf8'), 'hex');

function code(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(VerificationError);
    return `${(e as VerificationError).code}: ${(e as Error).message}`;
  }
  return 'accepted';
}

const item = (type: number, data: Buffer | number[]) => {
  const d = Buffer.from(data);
  const h = Buffer.alloc(4);
  h.writeUInt16LE(type, 0);
  h.writeUInt16LE(d.length, 2);
  return Buffer.concat([h, d]);
};
const MANDATORY = Buffer.concat([item(3, Buffer.from('1.0\0')), item(6, [0, 0x9f, 0, 0x96, 1, 0, 0, 0])]);

describe('SPDM GET_MEASUREMENTS parsing', () => {
  it('parses trustee report: 64 DMTF blocks, signed part ends 96 bytes before the end', () => {
    const r = parseNvidiaReport(REPORT);
    expect(r.response.blocks).toHaveLength(64);
    expect(r.signed.length).toBe(REPORT.length - 96);
    expect(r.request.nonce.toString('hex')).toBe(
      '931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb',
    );
    expect(Object.keys(r.response.opaque)).toHaveLength(14);
  });

  it('every truncation of the report is refused', () => {
    const seen = new Set<string>();
    for (let n = 0; n < REPORT.length; n += n < 200 ? 1 : 37) {
      const result = code(() => parseNvidiaReport(REPORT.subarray(0, n)));
      expect(result).toMatch(/^REPORT_MALFORMED: NVIDIA report/);
      seen.add(result.replace(/\(.*\)/, '').replace(/\d+/g, 'N'));
    }
    expect(seen.size).toBeGreaterThan(4);
  });

  it('a request or response SPDM version other than 1.1 is refused by name', () => {
    const a = Buffer.from(REPORT);
    a[0] = 0x12;
    expect(code(() => parseNvidiaReport(a))).toMatch(/^UNSUPPORTED_VERSION: .*request version 0x12/);
    const b = Buffer.from(REPORT);
    b[SPDM_REQUEST_SIZE] = 0x10;
    expect(code(() => parseNvidiaReport(b))).toMatch(/^UNSUPPORTED_VERSION: .*response version 0x10/);
  });

  it('a record length past the end, a block not in DMTF layout, a block overflowing the record', () => {
    const a = Buffer.from(REPORT);
    a.writeUIntLE(0xffffff, SPDM_REQUEST_SIZE + 5, 3);
    expect(code(() => parseNvidiaReport(a))).toMatch(/MeasurementRecord .* runs past the end/);
    const b = Buffer.from(REPORT);
    b[SPDM_REQUEST_SIZE + 8 + 1] = 2;
    expect(code(() => parseNvidiaReport(b))).toMatch(/not in the DMTF layout/);
    const c = Buffer.from(REPORT);
    c.writeUInt16LE(0xffff, SPDM_REQUEST_SIZE + 8 + 2);
    expect(code(() => parseNvidiaReport(c))).toMatch(/measurement block 1 .* runs past the end/);
    const d = Buffer.from(REPORT);
    d.writeUInt16LE(0xffff, SPDM_REQUEST_SIZE + 8 + 5);
    expect(code(() => parseNvidiaReport(d))).toMatch(/DMTF value .* runs past the end/);
    const e = Buffer.from(REPORT);
    e[SPDM_REQUEST_SIZE + 4] = 65; // one block more than the record holds
    expect(code(() => parseNvidiaReport(e))).toMatch(/measurement block 65 header .* runs past the end/);
  });

  it('an oversized report is refused before parsing', () => {
    expect(code(() => parseNvidiaReport(Buffer.alloc(MAX_NVIDIA_REPORT_BYTES + 1)))).toMatch(
      /^EVIDENCE_TOO_LARGE/,
    );
  });

  it('encodeUnsignedReport round-trips through the parser', () => {
    const nonce = Buffer.alloc(32, 7);
    const bytes = Buffer.concat([
      encodeUnsignedReport({
        nonce,
        blocks: [{ index: 5, value: Buffer.alloc(48, 1) }],
        opaque: [
          [3, Buffer.from('550.90.07\0')],
          [6, Buffer.from([0, 0x9f, 0, 0x96, 1, 0, 0, 0])],
        ],
      }),
      Buffer.alloc(96),
    ]);
    const r = parseNvidiaReport(bytes);
    expect(r.request.nonce).toEqual(nonce);
    expect(r.response.blocks).toEqual([{ index: 5, valueType: 0, value: Buffer.alloc(48, 1) }]);
    expect(r.response.opaque).toEqual({ driver_version: '550.90.07', vbios_version: '96.00.9f.00.01' });
  });
});

describe('NVIDIA opaque data', () => {
  it('decodes each value shape as trustee names it', () => {
    const counts = Buffer.alloc(8);
    counts.writeUInt32LE(130, 4);
    const out = decodeOpaqueData(
      Buffer.concat([
        MANDATORY,
        item(12, counts),
        item(22, Buffer.alloc(16, 0xab)),
        item(34, [4, 1]),
        item(36, [2]),
        item(35, Buffer.from('GH100\0\0')),
        item(20, [0xde, 0xad]),
      ]),
    );
    expect(out).toEqual({
      driver_version: '1.0',
      vbios_version: '96.00.9f.00.01',
      measurement_count: { '1': 0, '2': 130 },
      switch_pdi: ['abababababababab', 'abababababababab'],
      opaque_data_version: 260,
      feature_flag: 'PPCIE',
      chip_info: 'GH100',
      fwid: 'dead',
    });
  });

  it.each([
    ['an unknown type', Buffer.concat([MANDATORY, item(26, [1])]), /unknown data type 26/],
    ['a repeated type', Buffer.concat([MANDATORY, item(3, [0x41])]), /driver_version appears twice/],
    ['no vbios_version', item(3, Buffer.from('1')), /vbios_version and driver_version must be present/],
    [
      'an item past the end',
      Buffer.concat([MANDATORY, Buffer.from([20, 0, 0xff, 0xff, 0])]),
      /fwid .* runs past/,
    ],
    ['an empty vbios_version', Buffer.concat([item(6, []), item(3, [0x31])]), /vbios_version is empty/],
    ['counts not a multiple of 4', Buffer.concat([MANDATORY, item(12, [1, 2, 3])]), /multiple of 4/],
    ['PDIs not a multiple of 8', Buffer.concat([MANDATORY, item(22, [1])]), /multiple of 8/],
    ['an integer over 8 bytes', Buffer.concat([MANDATORY, item(34, Buffer.alloc(9))]), /longer than 8/],
    ['an integer over 2^53', Buffer.concat([MANDATORY, item(34, Buffer.alloc(8, 0xff))]), /exceeds 2\^53/],
    ['more than 255 counts', Buffer.concat([MANDATORY, item(12, Buffer.alloc(4 * 256))]), /more than 255/],
  ])('refuses %s', (_what, bytes, message) => {
    expect(code(() => decodeOpaqueData(bytes))).toMatch(message);
  });

  it('ignores a tail of four bytes or fewer, as trustee does', () => {
    expect(decodeOpaqueData(Buffer.concat([MANDATORY, Buffer.from([0xff, 0xff, 0, 0])]))).toHaveProperty(
      'driver_version',
      '1.0',
    );
  });
});
