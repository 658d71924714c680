/**
 * Strict protobuf decoding of agent requests into the JSON the kata agent gives its policy, and the
 * reverse encoding (for tests and the `check` tool).
 *
 * The agent decodes requests with rust-protobuf and serializes them with serde. The decoder here produces
 * that serde JSON directly from the wire bytes:
 * - keys are the Rust field names: proto names verbatim, keywords suffixed with `_` (`type` → `type_`);
 * - every field is present: proto3 defaults, `null` for unset messages and proto3 `optional` fields;
 * - enums are integers, `bytes` are arrays of numbers (Uint8Array here, see `toPolicyJson`), 64-bit
 *   integers are exact (`bigint` beyond 2^53);
 * - a oneof is one member named after the oneof, `{"<CamelCaseField>": value}` or `null`.
 *
 * The gate forwards the original bytes, so the policy must see exactly what the agent will act on.
 * Encodings on which protobufjs-style decoders and rust-protobuf could disagree are rejected rather than
 * interpreted: a known field with the wrong wire type (Rust skips it as unknown), a singular field given
 * twice (Rust merges messages), 32-bit varints or booleans outside their range (decoders truncate
 * differently), invalid UTF-8 in strings (Rust fails), and groups. Senders following the protobuf
 * encoding rules never produce any of these.
 */

import type { ProtoRoot } from '@broker/ttrpc';
import { type AgentProtoProfile, agentProtoRoot } from './agent-proto.js';
import { AgentPolicyError, type AgentPolicyErrorCode } from './errors.js';

type ProtoType = ReturnType<ProtoRoot['lookupType']>;
type ProtoField = ProtoType['fieldsArray'][number];

export type ScalarKind =
  | 'double'
  | 'float'
  | 'int32'
  | 'uint32'
  | 'sint32'
  | 'fixed32'
  | 'sfixed32'
  | 'int64'
  | 'uint64'
  | 'sint64'
  | 'fixed64'
  | 'sfixed64'
  | 'bool'
  | 'string'
  | 'bytes';

/** A decoded request: JSON values plus `bigint` and `Uint8Array`. */
export type WireValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | Uint8Array
  | WireValue[]
  | { [key: string]: WireValue };

interface ValueSpec {
  readonly kind: 'scalar' | 'enum' | 'message';
  readonly scalar: ScalarKind | undefined;
  readonly message: string | undefined;
}

interface FieldSpec extends ValueSpec {
  readonly id: number;
  readonly protoName: string;
  /** Key in the policy input. */
  readonly key: string;
  readonly repeated: boolean;
  readonly map: { readonly key: ScalarKind; readonly value: ValueSpec } | undefined;
  /** proto3 `optional`: `null` when absent. */
  readonly optional: boolean;
  /** Real oneof this field belongs to. */
  readonly oneof: OneofSpec | undefined;
}

interface OneofSpec {
  /** Key in the policy input (the oneof's name). */
  readonly key: string;
  /** Member field ids → serde variant name. */
  readonly variants: Map<number, string>;
}

interface MessageSpec {
  readonly name: string;
  readonly byId: ReadonlyMap<number, FieldSpec>;
  readonly byKey: ReadonlyMap<string, FieldSpec>;
  /** Fields outside real oneofs, in declaration order. */
  readonly plain: readonly FieldSpec[];
  readonly oneofs: readonly OneofSpec[];
}

/** The bytes are not an acceptable encoding of the request message. */
export class RequestDecodeError extends AgentPolicyError {
  override readonly code: AgentPolicyErrorCode = 'REQUEST_DECODE_FAILED';
  override readonly name: string = 'RequestDecodeError';
  readonly typeName: string;
  constructor(typeName: string, message: string) {
    super(`${typeName}: ${message}`);
    this.typeName = typeName;
  }
}

/** A value given for encoding does not fit the message. */
export class RequestEncodeError extends AgentPolicyError {
  override readonly code: AgentPolicyErrorCode = 'REQUEST_ENCODE_FAILED';
  override readonly name: string = 'RequestEncodeError';
}

const RUST_KEYWORDS = new Set(
  (
    'as break const continue crate else enum extern false fn for if impl in let loop match mod move mut pub ' +
    'ref return self Self static struct super trait true type unsafe use where while async await dyn abstract ' +
    'become box do final macro override priv typeof unsized virtual yield try'
  ).split(' '),
);

/** rust-protobuf's Rust identifier for a proto field name. */
export function rustFieldName(protoName: string): string {
  return RUST_KEYWORDS.has(protoName) ? `${protoName}_` : protoName;
}

/** rust-protobuf's oneof variant name: the field name in CamelCase. */
export function rustVariantName(protoName: string): string {
  return protoName
    .split('_')
    .filter((p) => p !== '')
    .map((p) => p[0]!.toUpperCase() + p.slice(1))
    .join('');
}

const SCALARS = new Set<string>([
  'double',
  'float',
  'int32',
  'uint32',
  'sint32',
  'fixed32',
  'sfixed32',
  'int64',
  'uint64',
  'sint64',
  'fixed64',
  'sfixed64',
  'bool',
  'string',
  'bytes',
]);

/** Compiled messages by `<profile>/<full name>` (proto names never contain a slash). */
const specs = new Map<string, MessageSpec>();

function specKey(profile: AgentProtoProfile, fullName: string): string {
  return `${profile}/${fullName}`;
}

function valueSpecOf(
  profile: AgentProtoProfile,
  typeName: string,
  resolved: unknown,
  where: string,
): ValueSpec {
  if (SCALARS.has(typeName)) return { kind: 'scalar', scalar: typeName as ScalarKind, message: undefined };
  if (resolved && typeof resolved === 'object' && 'values' in resolved) {
    return { kind: 'enum', scalar: undefined, message: undefined };
  }
  if (resolved && typeof resolved === 'object' && 'fieldsArray' in resolved) {
    const full = (resolved as ProtoType).fullName.replace(/^\./, '');
    return { kind: 'message', scalar: undefined, message: specKey(profile, full) };
  }
  throw new AgentPolicyError(`${where}: unresolved type ${typeName}`, { code: 'SCHEMA_INVALID' });
}

function compileSpec(profile: AgentProtoProfile, type: ProtoType): MessageSpec {
  const name = type.fullName.replace(/^\./, '');
  const byId = new Map<number, FieldSpec>();
  const byKey = new Map<string, FieldSpec>();
  const plain: FieldSpec[] = [];
  const oneofs = new Map<string, OneofSpec>();
  for (const f of type.fieldsArray as ProtoField[]) {
    f.resolve();
    const optional = (f.options as Record<string, unknown> | undefined)?.proto3_optional === true;
    let oneof: OneofSpec | undefined;
    if (f.partOf && !optional) {
      oneof = oneofs.get(f.partOf.name);
      if (!oneof) {
        oneof = { key: rustFieldName(f.partOf.name), variants: new Map() };
        oneofs.set(f.partOf.name, oneof);
      }
      oneof.variants.set(f.id, rustVariantName(f.name));
    }
    const mapField = f as ProtoField & { map?: boolean; keyType?: string };
    const spec: FieldSpec = {
      ...valueSpecOf(profile, f.type, f.resolvedType, `${name}.${f.name}`),
      id: f.id,
      protoName: f.name,
      key: rustFieldName(f.name),
      repeated: f.repeated,
      map: mapField.map
        ? {
            key: mapField.keyType as ScalarKind,
            value: valueSpecOf(profile, f.type, f.resolvedType, `${name}.${f.name}`),
          }
        : undefined,
      optional,
      oneof,
    };
    byId.set(f.id, spec);
    byKey.set(spec.key, spec);
    if (!oneof) plain.push(spec);
  }
  return { name, byId, byKey, plain, oneofs: [...oneofs.values()] };
}

/** The compiled message of a `specKey`. */
function specOf(key: string): MessageSpec {
  let s = specs.get(key);
  if (!s) {
    const slash = key.indexOf('/');
    const profile = key.slice(0, slash) as AgentProtoProfile;
    s = compileSpec(profile, agentProtoRoot(profile).lookupType(key.slice(slash + 1)));
    specs.set(key, s);
  }
  return s;
}

/** Fully qualified name of an agent request message (`grpc.<name>`). */
function qualified(typeName: string): string {
  return typeName.includes('.') ? typeName : `grpc.${typeName}`;
}

// ---- decoding ---------------------------------------------------------------------------------------

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const TWO32 = 4294967296;

class Reader {
  pos: number;
  /** Low and high 32 bits of the last varint read. */
  lo = 0;
  hi = 0;
  constructor(
    readonly buf: Uint8Array,
    readonly typeName: string,
    start: number,
    readonly end: number,
  ) {
    this.pos = start;
  }

  fail(msg: string): never {
    throw new RequestDecodeError(this.typeName, msg);
  }

  varint(): void {
    let lo = 0;
    let hi = 0;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) this.fail('truncated varint');
      const b = this.buf[this.pos++]!;
      if (i < 4) lo |= (b & 0x7f) << (7 * i);
      else if (i === 4) {
        lo |= (b & 0x0f) << 28;
        hi |= (b & 0x7f) >>> 4;
      } else {
        if (i === 9 && b > 1) this.fail('varint overflows 64 bits');
        hi |= (b & 0x7f) << (7 * i - 32);
      }
      if ((b & 0x80) === 0) {
        this.lo = lo >>> 0;
        this.hi = hi >>> 0;
        return;
      }
    }
    this.fail('varint longer than 10 bytes');
  }

  /** A varint that must fit 32 bits unsigned (tags and lengths). */
  uint32(): number {
    this.varint();
    if (this.hi !== 0) this.fail('varint out of 32-bit range');
    return this.lo;
  }

  take(n: number): number {
    if (n > this.end - this.pos) this.fail('truncated field');
    const at = this.pos;
    this.pos += n;
    return at;
  }

  view(at: number, n: number): DataView {
    return new DataView(this.buf.buffer, this.buf.byteOffset + at, n);
  }
}

function u64(lo: number, hi: number): number | bigint {
  if (hi < 0x200000) return hi * TWO32 + lo;
  return (BigInt(hi) << 32n) | BigInt(lo);
}

function i64(lo: number, hi: number): number | bigint {
  if (hi & 0x80000000) {
    const v = BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo));
    return v >= -9007199254740991n ? Number(v) : v;
  }
  return u64(lo, hi);
}

/** The shortest decimal that reads back as the same float32, which is how serde_json prints an `f32`. */
function float32Value(x: number): number {
  if (!Number.isFinite(x)) return x;
  for (let p = 1; p <= 9; p++) {
    const y = Number(x.toPrecision(p));
    if (Math.fround(y) === x) return y;
  }
  return x;
}

function wireTypeOf(kind: ValueSpec): number {
  if (kind.kind === 'enum') return 0;
  if (kind.kind === 'message') return 2;
  switch (kind.scalar) {
    case 'double':
    case 'fixed64':
    case 'sfixed64':
      return 1;
    case 'float':
    case 'fixed32':
    case 'sfixed32':
      return 5;
    case 'string':
    case 'bytes':
      return 2;
    default:
      return 0;
  }
}

/** Reads one scalar or enum value encoded with its natural wire type. */
function readScalar(r: Reader, spec: ValueSpec, field: string): WireValue {
  if (spec.kind === 'enum') return readInt32(r, field);
  switch (spec.scalar!) {
    case 'int32':
      return readInt32(r, field);
    case 'uint32':
      r.varint();
      if (r.hi !== 0) r.fail(`${field}: uint32 value out of range`);
      return r.lo;
    case 'sint32': {
      r.varint();
      if (r.hi !== 0) r.fail(`${field}: sint32 value out of range`);
      return (r.lo >>> 1) ^ -(r.lo & 1);
    }
    case 'bool':
      r.varint();
      if (r.hi !== 0 || r.lo > 1) r.fail(`${field}: bool value is neither 0 nor 1`);
      return r.lo === 1;
    case 'int64':
      r.varint();
      return i64(r.lo, r.hi);
    case 'uint64':
      r.varint();
      return u64(r.lo, r.hi);
    case 'sint64': {
      r.varint();
      const v = (BigInt(r.hi) << 32n) | BigInt(r.lo);
      const z = (v >> 1n) ^ -(v & 1n);
      return z >= -9007199254740991n && z <= 9007199254740991n ? Number(z) : z;
    }
    case 'fixed32':
      return r.view(r.take(4), 4).getUint32(0, true);
    case 'sfixed32':
      return r.view(r.take(4), 4).getInt32(0, true);
    case 'float':
      return float32Value(r.view(r.take(4), 4).getFloat32(0, true));
    case 'fixed64': {
      const d = r.view(r.take(8), 8);
      return u64(d.getUint32(0, true), d.getUint32(4, true));
    }
    case 'sfixed64': {
      const d = r.view(r.take(8), 8);
      return i64(d.getUint32(0, true), d.getUint32(4, true));
    }
    case 'double':
      return r.view(r.take(8), 8).getFloat64(0, true);
    case 'string': {
      const n = r.uint32();
      const at = r.take(n);
      try {
        return utf8.decode(r.buf.subarray(at, at + n));
      } catch {
        return r.fail(`${field}: invalid UTF-8 in string`);
      }
    }
    case 'bytes': {
      const n = r.uint32();
      const at = r.take(n);
      return r.buf.slice(at, at + n);
    }
  }
}

function readInt32(r: Reader, field: string): number {
  r.varint();
  // Non-negative values are plain varints; negative ones are sign-extended to 64 bits.
  if (r.hi === 0 ? r.lo >= 0x80000000 : r.hi !== 0xffffffff || r.lo < 0x80000000) {
    r.fail(`${field}: int32 value out of range`);
  }
  return r.lo | 0;
}

function skipField(r: Reader, wireType: number): void {
  switch (wireType) {
    case 0:
      r.varint();
      return;
    case 1:
      r.take(8);
      return;
    case 2:
      r.take(r.uint32());
      return;
    case 5:
      r.take(4);
      return;
    default:
      r.fail(`unsupported wire type ${wireType}`);
  }
}

function defaultScalar(spec: ValueSpec): WireValue {
  if (spec.kind === 'enum') return 0;
  if (spec.kind === 'message') return null;
  switch (spec.scalar!) {
    case 'bool':
      return false;
    case 'string':
      return '';
    case 'bytes':
      return new Uint8Array(0);
    default:
      return 0;
  }
}

function setOwn(obj: { [key: string]: WireValue }, key: string, value: WireValue): void {
  // Map keys come from the wire; "__proto__" must become a member, not a prototype.
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

function decodeMessage(r: Reader, spec: MessageSpec, depth: number): { [key: string]: WireValue } {
  if (depth > 100) r.fail('message nesting exceeds the recursion limit of 100');
  const values = new Map<number, WireValue>();
  const oneofSet = new Map<OneofSpec, number>();
  while (r.pos < r.end) {
    const tag = r.uint32();
    const id = tag >>> 3;
    const wt = tag & 7;
    if (id === 0) r.fail('field number 0');
    const f = spec.byId.get(id);
    if (!f) {
      skipField(r, wt);
      continue;
    }
    const where = `${spec.name}.${f.protoName}`;
    if (f.map) {
      if (wt !== 2) r.fail(`${where}: unexpected wire type ${wt}`);
      const [k, v] = decodeMapEntry(r, f.map.key, f.map.value, where, depth);
      let obj = values.get(id) as { [key: string]: WireValue } | undefined;
      if (!obj) {
        obj = {};
        values.set(id, obj);
      }
      setOwn(obj, String(k), v);
      continue;
    }
    if (f.repeated) {
      let arr = values.get(id) as WireValue[] | undefined;
      if (!arr) {
        arr = [];
        values.set(id, arr);
      }
      const natural = wireTypeOf(f);
      if (wt === natural) {
        arr.push(readValue(r, f, where, depth));
      } else if (wt === 2 && natural !== 2) {
        // Packed scalars.
        const n = r.uint32();
        const at = r.take(n);
        const sub = new Reader(r.buf, r.typeName, at, at + n);
        while (sub.pos < sub.end) arr.push(readScalar(sub, f, where));
      } else {
        r.fail(`${where}: unexpected wire type ${wt}`);
      }
      continue;
    }
    if (wt !== wireTypeOf(f)) r.fail(`${where}: unexpected wire type ${wt}`);
    if (values.has(id)) r.fail(`${where}: field given more than once`);
    if (f.oneof) {
      if (oneofSet.has(f.oneof)) r.fail(`${where}: oneof ${f.oneof.key} given more than once`);
      oneofSet.set(f.oneof, id);
    }
    values.set(id, readValue(r, f, where, depth));
  }
  const out: { [key: string]: WireValue } = {};
  for (const f of spec.plain) {
    const v = values.get(f.id);
    if (v !== undefined) setOwn(out, f.key, v);
    else if (f.map) setOwn(out, f.key, {});
    else if (f.repeated) setOwn(out, f.key, []);
    else if (f.optional) setOwn(out, f.key, null);
    else setOwn(out, f.key, defaultScalar(f));
  }
  for (const o of spec.oneofs) {
    const id = oneofSet.get(o);
    if (id === undefined) setOwn(out, o.key, null);
    else {
      const variant: { [key: string]: WireValue } = {};
      setOwn(variant, o.variants.get(id)!, values.get(id)!);
      setOwn(out, o.key, variant);
    }
  }
  return out;
}

function readValue(r: Reader, spec: ValueSpec, where: string, depth: number): WireValue {
  if (spec.kind !== 'message') return readScalar(r, spec, where);
  const n = r.uint32();
  const at = r.take(n);
  return decodeMessage(new Reader(r.buf, r.typeName, at, at + n), specOf(spec.message!), depth + 1);
}

function decodeMapEntry(
  r: Reader,
  keyKind: ScalarKind,
  valueSpec: ValueSpec,
  where: string,
  depth: number,
): [WireValue, WireValue] {
  const n = r.uint32();
  const at = r.take(n);
  const sub = new Reader(r.buf, r.typeName, at, at + n);
  const keySpec: ValueSpec = { kind: 'scalar', scalar: keyKind, message: undefined };
  let key: WireValue | undefined;
  let value: WireValue | undefined;
  while (sub.pos < sub.end) {
    const tag = sub.uint32();
    const id = tag >>> 3;
    const wt = tag & 7;
    if (id === 1) {
      if (wt !== wireTypeOf(keySpec)) sub.fail(`${where}: unexpected wire type ${wt} for a map key`);
      if (key !== undefined) sub.fail(`${where}: map key given more than once`);
      key = readScalar(sub, keySpec, where);
    } else if (id === 2) {
      if (wt !== wireTypeOf(valueSpec)) sub.fail(`${where}: unexpected wire type ${wt} for a map value`);
      if (value !== undefined) sub.fail(`${where}: map value given more than once`);
      value = readValue(sub, valueSpec, where, depth);
    } else if (id === 0) {
      sub.fail('field number 0');
    } else {
      skipField(sub, wt);
    }
  }
  key ??= defaultScalar(keySpec);
  if (value === undefined) {
    value =
      valueSpec.kind === 'message'
        ? decodeMessage(
            new Reader(new Uint8Array(0), r.typeName, 0, 0),
            specOf(valueSpec.message!),
            depth + 1,
          )
        : defaultScalar(valueSpec);
  }
  return [key, value];
}

/**
 * Decodes request bytes of `typeName` (`CreateContainerRequest` or `grpc.CreateContainerRequest`) into
 * the serde form kata gives its policy, with the fields of the agent.proto `profile` (default `current`).
 * Throws `RequestDecodeError`.
 */
export function decodeRequest(
  typeName: string,
  bytes: Uint8Array,
  profile: AgentProtoProfile = 'current',
): { [key: string]: WireValue } {
  const name = qualified(typeName);
  const spec = specOf(specKey(profile, name));
  return decodeMessage(new Reader(bytes, name, 0, bytes.length), spec, 0);
}

/** Converts `Uint8Array` members to arrays of numbers, as serde writes `Vec<u8>`. */
export function toPolicyJson(v: WireValue): unknown {
  if (v instanceof Uint8Array) {
    // A plain loop: Array.from on a typed array goes through its iterator and is many times slower.
    const out = new Array<number>(v.length);
    for (let i = 0; i < v.length; i++) out[i] = v[i]!;
    return out;
  }
  if (Array.isArray(v)) return v.map(toPolicyJson);
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v)) {
      Object.defineProperty(out, k, {
        value: toPolicyJson(v[k]!),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  }
  return v;
}

// ---- encoding ---------------------------------------------------------------------------------------

class Writer {
  private buf = new Uint8Array(256);
  len = 0;

  private ensure(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }

  byte(b: number): void {
    this.ensure(1);
    this.buf[this.len++] = b;
  }

  varint(v: bigint): void {
    let x = BigInt.asUintN(64, v);
    do {
      let b = Number(x & 0x7fn);
      x >>= 7n;
      if (x !== 0n) b |= 0x80;
      this.byte(b);
    } while (x !== 0n);
  }

  bytes(b: Uint8Array): void {
    this.ensure(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}

function asBigInt(v: unknown, where: string, min: bigint, max: bigint): bigint {
  let b: bigint;
  if (typeof v === 'bigint') b = v;
  else if (typeof v === 'number' && Number.isInteger(v)) b = BigInt(v);
  else if (typeof v === 'string' && /^-?\d{1,20}$/.test(v)) b = BigInt(v);
  else throw new RequestEncodeError(`${where}: expected an integer, got ${describe(v)}`);
  if (b < min || b > max) throw new RequestEncodeError(`${where}: ${b} is out of range`);
  return b;
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v;
}

const I32 = [-(2n ** 31n), 2n ** 31n - 1n] as const;
const U32 = [0n, 2n ** 32n - 1n] as const;
const I64 = [-(2n ** 63n), 2n ** 63n - 1n] as const;
const U64 = [0n, 2n ** 64n - 1n] as const;

function isDefault(spec: ValueSpec, v: unknown): boolean {
  if (spec.kind === 'message') return false;
  if (spec.scalar === 'string') return v === '';
  if (spec.scalar === 'bool') return v === false;
  if (spec.scalar === 'bytes') return (v as ArrayLike<number>).length === 0;
  // biome-ignore lint/suspicious/noDoubleEquals: 0 and 0n are both the default
  return v == 0;
}

function writeScalar(w: Writer, spec: ValueSpec, v: unknown, where: string): void {
  if (spec.kind === 'enum') {
    w.varint(asBigInt(v, where, ...I32));
    return;
  }
  switch (spec.scalar!) {
    case 'int32':
      w.varint(asBigInt(v, where, ...I32));
      return;
    case 'uint32':
      w.varint(asBigInt(v, where, ...U32));
      return;
    case 'sint32':
    case 'sint64': {
      const b = asBigInt(v, where, ...(spec.scalar === 'sint32' ? I32 : I64));
      w.varint(b >= 0n ? b << 1n : (-b << 1n) - 1n);
      return;
    }
    case 'int64':
      w.varint(asBigInt(v, where, ...I64));
      return;
    case 'uint64':
      w.varint(asBigInt(v, where, ...U64));
      return;
    case 'bool':
      if (typeof v !== 'boolean')
        throw new RequestEncodeError(`${where}: expected a boolean, got ${describe(v)}`);
      w.byte(v ? 1 : 0);
      return;
    case 'fixed32':
    case 'sfixed32':
    case 'float': {
      const d = new DataView(new ArrayBuffer(4));
      if (spec.scalar === 'float') d.setFloat32(0, asNumber(v, where), true);
      else if (spec.scalar === 'fixed32') d.setUint32(0, Number(asBigInt(v, where, ...U32)), true);
      else d.setInt32(0, Number(asBigInt(v, where, ...I32)), true);
      w.bytes(new Uint8Array(d.buffer));
      return;
    }
    case 'fixed64':
    case 'sfixed64':
    case 'double': {
      const d = new DataView(new ArrayBuffer(8));
      if (spec.scalar === 'double') d.setFloat64(0, asNumber(v, where), true);
      else if (spec.scalar === 'fixed64') d.setBigUint64(0, asBigInt(v, where, ...U64), true);
      else d.setBigInt64(0, asBigInt(v, where, ...I64), true);
      w.bytes(new Uint8Array(d.buffer));
      return;
    }
    case 'string': {
      if (typeof v !== 'string')
        throw new RequestEncodeError(`${where}: expected a string, got ${describe(v)}`);
      const b = new TextEncoder().encode(v);
      w.varint(BigInt(b.length));
      w.bytes(b);
      return;
    }
    case 'bytes': {
      const b = asBytes(v, where);
      w.varint(BigInt(b.length));
      w.bytes(b);
      return;
    }
  }
}

function asNumber(v: unknown, where: string): number {
  if (typeof v !== 'number') throw new RequestEncodeError(`${where}: expected a number, got ${describe(v)}`);
  return v;
}

function asBytes(v: unknown, where: string): Uint8Array {
  if (v instanceof Uint8Array) return v;
  if (Array.isArray(v) && v.every((x) => Number.isInteger(x) && x >= 0 && x <= 255))
    return Uint8Array.from(v);
  throw new RequestEncodeError(`${where}: expected bytes (an array of 0..255), got ${describe(v)}`);
}

function tagOf(id: number, wireType: number): bigint {
  return BigInt(id * 8 + wireType);
}

function writeValue(
  w: Writer,
  id: number,
  spec: ValueSpec,
  v: unknown,
  where: string,
  ignored: string[],
): void {
  if (spec.kind === 'message') {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) {
      throw new RequestEncodeError(`${where}: expected an object, got ${describe(v)}`);
    }
    const body = encodeMessage(specOf(spec.message!), v as Record<string, unknown>, where, ignored);
    w.varint(tagOf(id, 2));
    w.varint(BigInt(body.length));
    w.bytes(body);
    return;
  }
  w.varint(tagOf(id, wireTypeOf(spec)));
  writeScalar(w, spec, v, where);
}

function encodeMessage(
  spec: MessageSpec,
  obj: Record<string, unknown>,
  path: string,
  ignored: string[],
): Uint8Array {
  const w = new Writer();
  for (const key of Object.keys(obj)) {
    const v = obj[key];
    const where = `${path}.${key}`;
    const f = spec.byKey.get(key);
    if (!f) {
      const oneof = spec.oneofs.find((o) => o.key === key);
      if (oneof) {
        if (v === null || v === undefined) continue;
        const entries = typeof v === 'object' && !Array.isArray(v) ? Object.entries(v as object) : [];
        const [variant, inner] = entries.length === 1 ? entries[0]! : [undefined, undefined];
        const id = [...oneof.variants].find(([, name]) => name === variant)?.[0];
        if (id === undefined) throw new RequestEncodeError(`${where}: expected {"<variant>": value}`);
        writeValue(w, id, spec.byId.get(id)!, inner, `${where}.${variant}`, ignored);
        continue;
      }
      ignored.push(where);
      continue;
    }
    if (v === null || v === undefined) {
      if (f.kind === 'message' || f.optional) continue;
      throw new RequestEncodeError(`${where}: null is only allowed for messages and optional fields`);
    }
    if (f.map) {
      if (typeof v !== 'object' || Array.isArray(v))
        throw new RequestEncodeError(`${where}: expected an object`);
      for (const k of Object.keys(v)) {
        const entry = new Writer();
        entry.varint(tagOf(1, wireTypeOf({ kind: 'scalar', scalar: f.map.key, message: undefined })));
        writeScalar(entry, { kind: 'scalar', scalar: f.map.key, message: undefined }, k, `${where}[key]`);
        writeValue(
          entry,
          2,
          f.map.value,
          (v as Record<string, unknown>)[k],
          `${where}[${JSON.stringify(k)}]`,
          ignored,
        );
        const body = entry.finish();
        w.varint(tagOf(f.id, 2));
        w.varint(BigInt(body.length));
        w.bytes(body);
      }
      continue;
    }
    if (f.repeated) {
      if (!Array.isArray(v)) throw new RequestEncodeError(`${where}: expected an array, got ${describe(v)}`);
      if (v.length === 0) continue;
      if (wireTypeOf(f) !== 2) {
        // proto3 packs repeated scalars.
        const packed = new Writer();
        v.forEach((x, i) => {
          writeScalar(packed, f, x, `${where}[${i}]`);
        });
        const body = packed.finish();
        w.varint(tagOf(f.id, 2));
        w.varint(BigInt(body.length));
        w.bytes(body);
      } else {
        v.forEach((x, i) => {
          writeValue(w, f.id, f, x, `${where}[${i}]`, ignored);
        });
      }
      continue;
    }
    if (!f.optional && isDefault(f, v)) {
      // Still type-check defaults so a wrong type is reported.
      writeScalar(new Writer(), f, v, where);
      continue;
    }
    writeValue(w, f.id, f, v, where, ignored);
  }
  return w.finish();
}

/**
 * Encodes a request given in the policy-input form (Rust field names, oneofs as `{"Variant": v}`, bytes
 * as number arrays or Uint8Array, 64-bit integers as numbers, bigints or decimal strings). Members the
 * message does not have are skipped and reported in `ignored` (recorded inputs of older agents carry
 * such fields). Throws `RequestEncodeError` for values of the wrong type. `profile` (default `current`)
 * picks the agent.proto version.
 */
export function encodeRequest(
  typeName: string,
  input: Record<string, unknown>,
  profile: AgentProtoProfile = 'current',
): { bytes: Uint8Array; ignored: string[] } {
  const name = qualified(typeName);
  const ignored: string[] = [];
  const bytes = encodeMessage(specOf(specKey(profile, name)), input, name.replace(/^grpc\./, ''), ignored);
  return { bytes, ignored };
}

/** Whether the schema has a message of this name (unqualified names are looked up in `grpc`). */
export function hasMessage(typeName: string): boolean {
  try {
    agentProtoRoot().lookupType(qualified(typeName));
    return true;
  } catch {
    return false;
  }
}
