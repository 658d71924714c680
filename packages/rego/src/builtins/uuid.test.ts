import { describe, expect, it } from 'vitest';
import { call, callIn, failure, show, testContext } from './testkit.js';

describe('uuid.rfc4122', () => {
  it('makes version 4 UUIDs, stable per key within a query', () => {
    const ctx = testContext();
    const a = callIn(ctx, 'uuid.rfc4122', 'a');
    expect(a).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(callIn(ctx, 'uuid.rfc4122', 'a')).toBe(a);
    expect(callIn(ctx, 'uuid.rfc4122', 'b')).not.toBe(a);
    expect(callIn(testContext(), 'uuid.rfc4122', 'a')).not.toBe(a);
  });

  it('wants a string key', () => {
    expect(failure('uuid.rfc4122', 42).message).toBe('uuid.rfc4122: operand 1 must be string but got number');
  });
});

describe('uuid.parse', () => {
  it('decodes version 1 fields (RFC 9562 test vector)', () => {
    expect(show(call('uuid.parse', 'C232AB00-9414-11EC-B3C8-9F6BDECED846'))).toBe(
      '{"clocksequence": 13256, "macvariables": "local:multicast", "nodeid": "9f-6b-de-ce-d8-46", "time": 1645557742000000000, "variant": "RFC4122", "version": 1}',
    );
  });

  it('decodes version 2 identity fields', () => {
    const v = show(call('uuid.parse', '000003e8-cbb9-21ea-b201-00045a86c8a1'));
    expect(v).toContain('"domain": "Group"');
    expect(v).toContain('"id": 1000');
    expect(v).toContain('"version": 2');
    expect(v).toContain('"macvariables": "global:unicast"');
  });

  it('gives version and variant for other versions, in every accepted form', () => {
    const v4 = '{"variant": "RFC4122", "version": 4}';
    expect(show(call('uuid.parse', 'a6342df8-7801-469c-b3f3-c5317a0ebdaa'))).toBe(v4);
    expect(show(call('uuid.parse', '{a6342df8-7801-469c-b3f3-c5317a0ebdaa}'))).toBe(v4);
    expect(show(call('uuid.parse', 'urn:uuid:a6342df8-7801-469c-b3f3-c5317a0ebdaa'))).toBe(v4);
    expect(show(call('uuid.parse', 'a6342df87801469cb3f3c5317a0ebdaa'))).toBe(v4);
    expect(show(call('uuid.parse', '00000000-0000-0000-c000-000000000000'))).toBe(
      '{"variant": "Microsoft", "version": 0}',
    );
  });

  it('is undefined for anything else', () => {
    expect(call('uuid.parse', 'not-a-uuid')).toBeUndefined();
    expect(call('uuid.parse', 'a6342df8-7801-469c-b3f3-c5317a0ebdaz')).toBeUndefined();
    expect(call('uuid.parse', 'a6342df8+7801-469c-b3f3-c5317a0ebdaa')).toBeUndefined();
  });
});
