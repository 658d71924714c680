import { describe, expect, it } from 'vitest';
import { requestCodec, responseCodec } from './envelope.js';
import { ProtoDecodeError, ProtoEncodeError, ProtoSchemaError } from './errors.js';
import { defineProto, messageCodec } from './proto.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('ttrpc envelope', () => {
  it('encodes Request with upstream field numbers', () => {
    const bytes = requestCodec.encode({
      service: 's',
      method: 'm',
      payload: Uint8Array.of(1),
      timeout_nano: 5n,
      metadata: [{ key: 'k', value: 'v' }],
    });
    // 1:service "s", 2:method "m", 3:payload 01, 4:timeout_nano 5, 5:metadata {1:"k",2:"v"}
    expect(hex(bytes)).toBe('0a0173' + '12016d' + '1a0101' + '2005' + '2a06' + '0a016b' + '120176');
  });

  it('decodes Request, filling defaults and keeping 64-bit timeouts exact', () => {
    // 4: timeout_nano = 2^62 + 1
    const req = requestCodec.decode(Buffer.from('0a0173208180808080808080' + '40', 'hex'));
    expect(req.service).toBe('s');
    expect(req.method).toBe('');
    expect(req.payload.length).toBe(0);
    expect(req.metadata).toEqual([]);
    expect(req.timeout_nano).toBe(2n ** 62n + 1n);
  });

  it('encodes Response with google.rpc.Status{code=1,message=2,details=3 Any{type_url=1,value=2}}', () => {
    const bytes = responseCodec.encode({
      status: { code: 7, message: 'x', details: [{ type_url: 't', value: Uint8Array.of(9) }] },
      payload: Uint8Array.of(2),
    });
    expect(hex(bytes)).toBe('0a0d' + '0807' + '120178' + '1a06' + '0a0174' + '120109' + '120102');
  });

  it('decodes a Response without status as status null', () => {
    const res = responseCodec.decode(Buffer.from('120102', 'hex'));
    expect(res.status).toBeNull();
    expect([...res.payload]).toEqual([2]);
  });

  it('rejects garbage with ProtoDecodeError naming the type', () => {
    expect(() => requestCodec.decode(Buffer.from('0aff', 'hex'))).toThrow(ProtoDecodeError);
    expect(() => requestCodec.decode(Buffer.from('ffffffffffffffffffffff', 'hex'))).toThrow(/ttrpc\.Request/);
    expect(() => requestCodec.decode(Buffer.from('0f', 'hex'))).toThrow(ProtoDecodeError); // wire type 7
  });
});

describe('defineProto / messageCodec', () => {
  const root = defineProto(`
    syntax = "proto3";
    package demo;
    import "google/protobuf/empty.proto";
    message Inner { string Name = 1; }
    message Msg {
      string container_id = 1;
      bytes RuntimeData = 2;
      uint64 big = 3;
      optional uint64 RegisterIndex = 4;
      Inner inner = 5;
      map<string, string> options = 6;
      repeated string list = 7;
      Kind kind = 8;
      google.protobuf.Empty empty = 9;
    }
    enum Kind { A = 0; B = 1; }
    service Svc { rpc Do(Msg) returns (google.protobuf.Empty); }
  `);
  interface Msg {
    container_id?: string;
    RuntimeData?: Uint8Array;
    big?: bigint;
    RegisterIndex?: bigint;
    inner?: { Name: string } | null;
    options?: Record<string, string>;
    list?: string[];
    kind?: number;
    empty?: object | null;
  }
  const codec = messageCodec<Msg>(root, 'demo.Msg');

  it('keeps field names verbatim and round-trips every kind of field', () => {
    const bytes = codec.encode({
      container_id: 'c1',
      RuntimeData: Uint8Array.of(1, 2),
      big: 2n ** 64n - 1n,
      RegisterIndex: 0n,
      inner: { Name: 'n' },
      options: { a: 'b' },
      list: ['x', 'y'],
      kind: 1,
    });
    const back = codec.decode(bytes);
    expect(back.container_id).toBe('c1');
    expect([...(back.RuntimeData ?? [])]).toEqual([1, 2]);
    expect(back.big).toBe(2n ** 64n - 1n);
    expect(back.RegisterIndex).toBe(0n); // explicit presence survives
    expect(back.inner).toEqual({ Name: 'n' });
    expect(back.options).toEqual({ a: 'b' });
    expect(back.list).toEqual(['x', 'y']);
    expect(back.kind).toBe(1);
    expect(back.empty).toBeNull();
  });

  it('fills proto3 defaults and leaves unset optional fields absent', () => {
    const back = codec.decode(new Uint8Array(0));
    expect(back).toMatchObject({ container_id: '', big: 0n, inner: null, options: {}, list: [], kind: 0 });
    expect('RegisterIndex' in back).toBe(false);
  });

  it('resolves well-known imports', () => {
    const empty = messageCodec<object>(root, 'google.protobuf.Empty');
    expect(empty.encode({}).length).toBe(0);
    expect(empty.typeName).toBe('google.protobuf.Empty');
  });

  it('reports schema errors', () => {
    expect(() => defineProto('message {')).toThrow(ProtoSchemaError);
    expect(() => defineProto('syntax = "proto3"; message A { Missing m = 1; }')).toThrow(ProtoSchemaError);
    expect(() => messageCodec(root, 'demo.Nope')).toThrow(ProtoSchemaError);
  });

  it('reports values that do not fit the message', () => {
    expect(() => codec.encode({ inner: 'not an object' as unknown as { Name: string } })).toThrow(
      ProtoEncodeError,
    );
  });

  it('rejects truncated input', () => {
    const bytes = codec.encode({ container_id: 'abcdef' });
    expect(() => codec.decode(bytes.subarray(0, bytes.length - 2))).toThrow(ProtoDecodeError);
  });
});
