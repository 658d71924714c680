import { describe, expect, it } from 'vitest';
import { call, failure, set, show } from './testkit.js';

describe('object.get', () => {
  it('looks up keys and paths, falling back to the default', () => {
    expect(call('object.get', { a: 1 }, 'a', 0)).toBe(1);
    expect(call('object.get', { a: 1 }, 'b', 'dflt')).toBe('dflt');
    expect(call('object.get', { a: { b: 1 } }, ['a', 'b'], 0)).toBe(1);
    expect(call('object.get', { a: { b: 1 } }, ['a', 'x'], 0)).toBe(0);
    expect(call('object.get', { a: [1, 2] }, ['a', 1], 0)).toBe(2);
    expect(call('object.get', { a: [1, 2] }, ['a', 5], 0)).toBe(0);
    expect(call('object.get', { a: set('x') }, ['a', 'x'], 0)).toBe('x');
    expect(show(call('object.get', { a: 1 }, [], 0))).toBe('{"a": 1}');
    expect(call('object.get', { a: null }, 'a', 0)).toBeNull();
    expect(failure('object.get', [1], 'a', 0).message).toBe(
      'object.get: operand 1 must be object but got array',
    );
  });
});

describe('object.keys, remove and filter', () => {
  it('take keys from arrays, sets or objects', () => {
    expect(show(call('object.keys', { b: 1, a: 2 }))).toBe('{"a", "b"}');
    expect(show(call('object.remove', { a: 1, b: 2, c: 3 }, ['a']))).toBe('{"b": 2, "c": 3}');
    expect(show(call('object.remove', { a: 1, b: 2 }, set('a', 'b')))).toBe('{}');
    expect(show(call('object.remove', { a: 1, b: 2 }, { b: 'x' }))).toBe('{"a": 1}');
    expect(show(call('object.filter', { a: 1, b: 2, c: 3 }, ['a', 'c', 'z']))).toBe('{"a": 1, "c": 3}');
    expect(failure('object.remove', { a: 1 }, 'a').message).toBe(
      'object.remove: operand 2 must be one of {object, set, array} but got string',
    );
  });
});

describe('object.union and object.union_n', () => {
  it('merge recursively, the right-hand value winning otherwise', () => {
    expect(show(call('object.union', { a: { b: 1 } }, { a: { c: 2 } }))).toBe('{"a": {"b": 1, "c": 2}}');
    expect(show(call('object.union', { a: 1 }, { a: { b: 1 } }))).toBe('{"a": {"b": 1}}');
    expect(show(call('object.union', { a: { b: 1 } }, { a: 1 }))).toBe('{"a": 1}');
  });

  it('union_n is a left fold of union', () => {
    expect(show(call('object.union_n', [{ a: { b: 2 } }, { a: 4 }, { a: { c: 3 } }]))).toBe(
      '{"a": {"c": 3}}',
    );
    expect(show(call('object.union_n', [{ a: 1 }, { b: 2 }, { a: 3 }]))).toBe('{"a": 3, "b": 2}');
    expect(show(call('object.union_n', []))).toBe('{}');
    // trustee's EAR policy merges trust claim objects this way.
    expect(
      show(
        call('object.union_n', [{ executables: 3, hardware: 2 }, { executables: 2 }, { configuration: 2 }]),
      ),
    ).toBe('{"configuration": 2, "executables": 2, "hardware": 2}');
    expect(failure('object.union_n', [{}, 1]).message).toBe(
      'object.union_n: operand 1 must be array of objects but got array containing number',
    );
  });
});

describe('object.subset', () => {
  it('objects recurse; sets and arrays compare members', () => {
    expect(call('object.subset', { a: 1, b: { c: 2, d: 3 } }, { b: { c: 2 } })).toBe(true);
    expect(call('object.subset', { a: 1 }, { a: 2 })).toBe(false);
    expect(call('object.subset', { a: 1 }, { b: 1 })).toBe(false);
    expect(call('object.subset', { a: set(1, 2, 3) }, { a: set(1, 3) })).toBe(true);
    expect(call('object.subset', { a: [1, 2, 3] }, { a: [2, 3] })).toBe(true);
    expect(call('object.subset', { a: [1, 2, 3] }, { a: [1, 3] })).toBe(false);
    expect(call('object.subset', set(1, 2), set(2))).toBe(true);
    expect(call('object.subset', [1, 2, 1, 2, 3], [1, 2, 3])).toBe(true);
    expect(call('object.subset', [1], [])).toBe(true);
    expect(call('object.subset', [3, 1, 2], set(1, 2))).toBe(true);
    expect(call('object.subset', [1], set(1, 2))).toBe(false);
    // OPA's array-over-set test only succeeds after visiting an element.
    expect(call('object.subset', [], set())).toBe(false);
  });

  it('rejects mixed operands', () => {
    const e = failure('object.subset', { a: 1 }, [1]);
    expect(e.code).toBe('eval_type_error');
    expect(e.message).toBe(
      'object.subset: both arguments object.subset must be of the same type or array and set',
    );
  });
});

describe('json.filter and json.remove', () => {
  it('filter keeps the given paths', () => {
    expect(show(call('json.filter', { a: { b: 1, c: 2 }, d: 3, e: 4 }, ['a/b', 'd']))).toBe(
      '{"a": {"b": 1}, "d": 3}',
    );
    expect(show(call('json.filter', { a: [{ x: 1, y: 2 }, { x: 3 }] }, ['a/0/x']))).toBe('{"a": [{"x": 1}]}');
    expect(show(call('json.filter', { a: { b: 1 } }, [['a', 'b']]))).toBe('{"a": {"b": 1}}');
    expect(show(call('json.filter', { 'a/b': 1, c: 2 }, ['a~1b']))).toBe('{"a/b": 1}');
    expect(show(call('json.filter', { a: 1 }, set('a')))).toBe('{"a": 1}');
  });

  it('remove drops the given paths', () => {
    expect(show(call('json.remove', { a: { b: 1, c: 2 }, d: 3 }, ['a/b', 'd']))).toBe('{"a": {"c": 2}}');
    expect(show(call('json.remove', { a: [1, 2, 3] }, ['/a/1']))).toBe('{"a": [1, 3]}');
    expect(show(call('json.remove', { a: set('x', 'y') }, ['a/x']))).toBe('{"a": {"y"}}');
    expect(failure('json.remove', { a: 1 }, 'a').message).toBe(
      'json.remove: operand 2 must be one of {set, array} but got string',
    );
    expect(failure('json.remove', { a: 1 }, [1]).message).toBe(
      'json.remove: operand 2 must be one of {set, array} containing string paths or array of path segments but got number',
    );
  });
});

describe('json.patch', () => {
  const patch = (doc: unknown, ...ops: unknown[]) => show(call('json.patch', doc, ops));

  it('applies RFC 6902 operations', () => {
    expect(patch({ a: 1 }, { op: 'add', path: '/b', value: 2 })).toBe('{"a": 1, "b": 2}');
    expect(patch({ a: [1, 3] }, { op: 'add', path: '/a/1', value: 2 })).toBe('{"a": [1, 2, 3]}');
    expect(patch({ a: [1] }, { op: 'add', path: '/a/-', value: 2 })).toBe('{"a": [1, 2]}');
    expect(patch({ a: 1, b: 2 }, { op: 'remove', path: '/a' })).toBe('{"b": 2}');
    expect(patch({ a: 1 }, { op: 'replace', path: '/a', value: 5 })).toBe('{"a": 5}');
    expect(patch({ a: { x: 1 } }, { op: 'move', from: '/a/x', path: '/b' })).toBe('{"a": {}, "b": 1}');
    expect(patch({ a: { x: 1 } }, { op: 'copy', from: '/a', path: '/b' })).toBe(
      '{"a": {"x": 1}, "b": {"x": 1}}',
    );
    expect(
      patch({ a: 1 }, { op: 'test', path: '/a', value: 1 }, { op: 'add', path: '/t', value: true }),
    ).toBe('{"a": 1, "t": true}');
    expect(patch({ 'a/b': 1 }, { op: 'replace', path: '/a~1b', value: 2 })).toBe('{"a/b": 2}');
    expect(patch({ a: 1 }, { op: 'add', path: '', value: [1] })).toBe('[1]');
    expect(patch({ a: 1 }, { op: 'remove', path: '' }, { op: 'add', path: '', value: { b: 2 } })).toBe(
      '{"b": 2}',
    );
    expect(patch(set('a'), { op: 'add', path: '/b', value: 'b' })).toBe('{"a", "b"}');
  });

  it('is undefined when an operation fails', () => {
    expect(call('json.patch', { a: 1 }, [{ op: 'test', path: '/a', value: 2 }])).toBeUndefined();
    expect(call('json.patch', { a: 1 }, [{ op: 'remove', path: '/b' }])).toBeUndefined();
    expect(call('json.patch', { a: [1] }, [{ op: 'add', path: '/a/5', value: 1 }])).toBeUndefined();
    expect(call('json.patch', { a: 1 }, [{ op: 'frobnicate', path: '/a' }])).toBeUndefined();
    expect(call('json.patch', { a: 1 }, [{ op: 'add', path: '/b' }])).toBeUndefined();
    expect(call('json.patch', { a: 1 }, [{ op: 'remove', path: '' }])).toBeUndefined();
    expect(call('json.patch', { a: 1 }, [1])).toBeUndefined();
  });
});
