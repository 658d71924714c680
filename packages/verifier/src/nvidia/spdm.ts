// An NVIDIA GPU attestation report: the SPDM 1.1 GET_MEASUREMENTS request the driver sent,
// followed by the device's signed response (DMTF DSP0274 1.1, "GET_MEASUREMENTS request and
// MEASUREMENTS response messages"). Integers are little-endian.
//
//   request  (37 B): version, code, param1, param2, nonce[32], slot id
//   response       : version, code, param1, param2, NumberOfBlocks u8, MeasurementRecordLength u24,
//                    MeasurementRecord, responder nonce[32], OpaqueLength u16, OpaqueData, signature
//
// The signature (ECDSA P-384, raw r ‖ s) covers every byte before it, request included.
import { VerificationError } from '../errors.js';
import { decodeOpaqueData } from './opaque.js';

export const SPDM_VERSION_1_1 = 0x11;
export const SPDM_NONCE_SIZE = 32;
export const SPDM_REQUEST_SIZE = 4 + SPDM_NONCE_SIZE + 1;
/** A Hopper signs with P-384: r and s of 48 bytes each. */
export const HOPPER_SIGNATURE_SIZE = 96;
/** MeasurementSpecification bit 0: the block holds a DMTF measurement. */
export const DMTF_MEASUREMENT_SPECIFICATION = 1;
/** Largest report accepted: 255 blocks of up to 64 KiB would be far more; real reports are about 4 KiB. */
export const MAX_NVIDIA_REPORT_BYTES = 256 * 1024;

export interface SpdmRequest {
  readonly version: number;
  readonly code: number;
  readonly param1: number;
  readonly param2: number;
  readonly nonce: Buffer;
  readonly slotId: number;
}

export interface MeasurementBlock {
  readonly index: number;
  /** DMTFSpecMeasurementValueType. */
  readonly valueType: number;
  readonly value: Buffer;
}

export interface SpdmMeasurementsResponse {
  readonly version: number;
  readonly code: number;
  readonly param1: number;
  readonly param2: number;
  readonly blocks: readonly MeasurementBlock[];
  readonly responderNonce: Buffer;
  readonly opaque: Record<string, unknown>;
  readonly signature: Buffer;
}

export interface NvidiaReport {
  readonly request: SpdmRequest;
  readonly response: SpdmMeasurementsResponse;
  /** The bytes the signature covers: the request and the response up to its signature. */
  readonly signed: Buffer;
}

function malformed(message: string): VerificationError {
  return new VerificationError('REPORT_MALFORMED', `NVIDIA report: ${message}`);
}

function checkVersion(version: number, what: string): void {
  if (version !== SPDM_VERSION_1_1) {
    throw new VerificationError(
      'UNSUPPORTED_VERSION',
      `NVIDIA report: SPDM ${what} version 0x${version.toString(16).padStart(2, '0')} is not 0x11 (SPDM 1.1)`,
    );
  }
}

/** A bounded view of `bytes[offset, offset + length)`, or a REPORT_MALFORMED naming `what`. */
function take(bytes: Buffer, offset: number, length: number, what: string): Buffer {
  if (offset + length > bytes.length) {
    throw malformed(
      `${what} (${length} bytes at offset ${offset}) runs past the end (${bytes.length} bytes)`,
    );
  }
  return bytes.subarray(offset, offset + length);
}

function parseRequest(bytes: Buffer): SpdmRequest {
  const r = take(bytes, 0, SPDM_REQUEST_SIZE, 'GET_MEASUREMENTS request');
  checkVersion(r[0]!, 'request');
  return {
    version: r[0]!,
    code: r[1]!,
    param1: r[2]!,
    param2: r[3]!,
    nonce: Buffer.from(r.subarray(4, 4 + SPDM_NONCE_SIZE)),
    slotId: r[4 + SPDM_NONCE_SIZE]!,
  };
}

/** `index u8, MeasurementSpecification u8, MeasurementSize u16, Measurement` × count, each DMTF. */
function parseMeasurementRecord(record: Buffer, count: number): MeasurementBlock[] {
  const blocks: MeasurementBlock[] = [];
  let offset = 0;
  for (let n = 0; n < count; n++) {
    const head = take(record, offset, 4, `measurement block ${n + 1} header`);
    const index = head[0]!;
    if (head[1] !== DMTF_MEASUREMENT_SPECIFICATION) {
      throw malformed(`measurement block ${index} is not in the DMTF layout (specification ${head[1]})`);
    }
    const size = head.readUInt16LE(2);
    const measurement = take(record, offset + 4, size, `measurement block ${index}`);
    offset += 4 + size;
    // DMTF measurement: DMTFSpecMeasurementValueType u8, DMTFSpecMeasurementValueSize u16, value.
    if (measurement.length < 3) throw malformed(`measurement block ${index} is shorter than a DMTF header`);
    const valueSize = measurement.readUInt16LE(1);
    const value = take(measurement, 3, valueSize, `measurement block ${index} DMTF value`);
    blocks.push({ index, valueType: measurement[0]!, value: Buffer.from(value) });
  }
  return blocks;
}

/**
 * Parses the request and response. Fields after the signature, the request code and parameters
 * are not interpreted (as trustee); only the SPDM version and the DMTF layout are enforced.
 */
export function parseNvidiaReport(bytes: Buffer, signatureSize = HOPPER_SIGNATURE_SIZE): NvidiaReport {
  if (bytes.length > MAX_NVIDIA_REPORT_BYTES) {
    throw new VerificationError(
      'EVIDENCE_TOO_LARGE',
      `NVIDIA report is ${bytes.length} bytes, over ${MAX_NVIDIA_REPORT_BYTES}`,
    );
  }
  const request = parseRequest(bytes);
  const base = SPDM_REQUEST_SIZE;
  const head = take(bytes, base, 8, 'MEASUREMENTS response header');
  checkVersion(head[0]!, 'response');
  const blockCount = head[4]!;
  const recordLength = head.readUIntLE(5, 3);
  let offset = base + 8;
  const record = take(bytes, offset, recordLength, 'MeasurementRecord');
  offset += recordLength;
  const blocks = recordLength > 0 ? parseMeasurementRecord(record, blockCount) : [];
  const responderNonce = take(bytes, offset, SPDM_NONCE_SIZE, 'responder nonce');
  offset += SPDM_NONCE_SIZE;
  const opaqueLength = take(bytes, offset, 2, 'OpaqueLength').readUInt16LE(0);
  offset += 2;
  const opaque = decodeOpaqueData(take(bytes, offset, opaqueLength, 'OpaqueData'));
  offset += opaqueLength;
  const signature = take(bytes, offset, signatureSize, 'signature');
  return {
    request,
    response: {
      version: head[0]!,
      code: head[1]!,
      param1: head[2]!,
      param2: head[3]!,
      blocks,
      responderNonce: Buffer.from(responderNonce),
      opaque,
      signature: Buffer.from(signature),
    },
    signed: bytes.subarray(0, offset),
  };
}

// ---- Encoding, for the simulated device (mock TEE, tests) -------------------------------------

export interface ReportSpec {
  readonly nonce: Uint8Array;
  readonly blocks: readonly {
    readonly index: number;
    readonly value: Uint8Array;
    readonly valueType?: number;
  }[];
  /** Raw opaque items in order: `[type code, data]`. */
  readonly opaque: readonly (readonly [number, Uint8Array])[];
  readonly responderNonce?: Uint8Array;
}

/** The request and response of `spec` without the signature: the bytes a device signs. */
export function encodeUnsignedReport(spec: ReportSpec): Buffer {
  if (spec.nonce.length !== SPDM_NONCE_SIZE) throw new RangeError('the SPDM nonce is 32 bytes');
  const request = Buffer.concat([
    Buffer.from([SPDM_VERSION_1_1, 0xe0, 0x01, 0xff]),
    spec.nonce,
    Buffer.from([0]),
  ]);
  const record = Buffer.concat(
    spec.blocks.map((b) => {
      const dmtf = Buffer.alloc(3);
      dmtf[0] = b.valueType ?? 0;
      dmtf.writeUInt16LE(b.value.length, 1);
      const head = Buffer.from([b.index, DMTF_MEASUREMENT_SPECIFICATION, 0, 0]);
      head.writeUInt16LE(3 + b.value.length, 2);
      return Buffer.concat([head, dmtf, b.value]);
    }),
  );
  const opaque = Buffer.concat(
    spec.opaque.map(([code, data]) => {
      const h = Buffer.alloc(4);
      h.writeUInt16LE(code, 0);
      h.writeUInt16LE(data.length, 2);
      return Buffer.concat([h, data]);
    }),
  );
  const head = Buffer.from([SPDM_VERSION_1_1, 0x60, 0, 0, spec.blocks.length, 0, 0, 0]);
  head.writeUIntLE(record.length, 5, 3);
  const opaqueLength = Buffer.alloc(2);
  opaqueLength.writeUInt16LE(opaque.length, 0);
  return Buffer.concat([
    request,
    head,
    record,
    Buffer.from(spec.responderNonce ?? Buffer.alloc(SPDM_NONCE_SIZE)),
    opaqueLength,
    opaque,
  ]);
}
