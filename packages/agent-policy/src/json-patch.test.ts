import { describe, expect, it } from 'vitest';
import { applyPatch, InvalidPatchError, type Json, PatchApplyError, parsePatch } from './json-patch.js';

// biome-ignore lint/suspicious/noExplicitAny: tests walk into decoded JSON of known shape
type J = any;

const patch = (doc: Json, ops: unknown) => applyPatch(doc, parsePatch(ops));

describe('JSON Patch (RFC 6902)', () => {
  it('applies the genpolicy state operations', () => {
    const doc: Json = { pstate: {} };
    const next = patch(doc, [
      { op: 'add', path: '/pstate/sandbox_name', value: 'web-0' },
      { op: 'add', path: '/pstate/namespace', value: 'default' },
    ]);
    expect(next).toEqual({ pstate: { sandbox_name: 'web-0', namespace: 'default' } });
    expect(doc).toEqual({ pstate: {} }); // the input is never modified
    expect(patch(next, [{ op: 'remove', path: '/pstate/namespace' }])).toEqual({
      pstate: { sandbox_name: 'web-0' },
    });
  });

  it('implements add, remove, replace, move, copy and test, with array indexes and escapes', () => {
    const doc: Json = { a: [1, 2], 'x/y': { '~k': 1 } };
    expect(patch(doc, [{ op: 'add', path: '/a/1', value: 9 }])).toEqual({ a: [1, 9, 2], 'x/y': { '~k': 1 } });
    expect(patch(doc, [{ op: 'add', path: '/a/-', value: 3 }])).toMatchObject({ a: [1, 2, 3] });
    expect(patch(doc, [{ op: 'replace', path: '/x~1y/~0k', value: 2 }])).toMatchObject({
      'x/y': { '~k': 2 },
    });
    expect(patch(doc, [{ op: 'move', from: '/a/0', path: '/b' }])).toEqual({
      a: [2],
      b: 1,
      'x/y': { '~k': 1 },
    });
    expect(patch(doc, [{ op: 'copy', from: '/a', path: '/c' }])).toMatchObject({ a: [1, 2], c: [1, 2] });
    expect(patch(doc, [{ op: 'test', path: '/a', value: [1, 2] }])).toEqual(doc);
    expect(patch(doc, [{ op: 'replace', path: '', value: 5 }])).toBe(5);
    expect(patch({ n: 5n }, [{ op: 'test', path: '/n', value: 5 }])).toEqual({ n: 5n });
  });

  it('fails as a whole, leaving the document unchanged, with the crate wording', () => {
    const doc: Json = { pstate: { a: 1 } };
    const ops = [
      { op: 'add', path: '/pstate/b', value: 2 },
      { op: 'test', path: '/pstate/a', value: 2 },
    ];
    expect(() => patch(doc, ops)).toThrow(new PatchApplyError(1, '/pstate/a', 'value did not match'));
    expect(doc).toEqual({ pstate: { a: 1 } });
    expect(() => patch(doc, [{ op: 'add', path: '/missing/x', value: 1 }])).toThrow(
      "operation '/0' failed at path '/missing/x': path is invalid",
    );
    expect(() => patch(doc, [{ op: 'remove', path: '/pstate/zz' }])).toThrow(/path is invalid/);
    expect(() =>
      patch(doc, [
        { op: 'add', path: '/pstate/x', value: 1 },
        { op: 'move', from: '/nope', path: '/y' },
      ]),
    ).toThrow(/"from" path is invalid/);
    expect(() => patch(doc, [{ op: 'move', from: '/pstate', path: '/pstate/a/b' }])).toThrow(/inside itself/);
    expect(() => patch({ a: [1] }, [{ op: 'add', path: '/a/5', value: 1 }])).toThrow(/path is invalid/);
    expect(() => patch({ a: [1] }, [{ op: 'add', path: '/a/01', value: 1 }])).toThrow(/path is invalid/);
    expect(() => patch(doc, [{ op: 'add', path: 'pstate', value: 1 }])).toThrow(/path is invalid/);
  });

  it('adds "__proto__" as a member, never as the prototype', () => {
    const next = patch({ pstate: {} }, [
      { op: 'add', path: '/pstate/__proto__', value: { polluted: true } },
    ]) as J;
    expect(Object.getOwnPropertyDescriptor(next.pstate, '__proto__')?.value).toEqual({ polluted: true });
    expect(({} as J).polluted).toBeUndefined();
    expect(next.pstate.polluted).toBeUndefined();
  });

  it('rejects documents that are not JSON Patch', () => {
    expect(() => parsePatch({ op: 'add' })).toThrow(InvalidPatchError);
    expect(() => parsePatch([{ op: 'frobnicate', path: '/a' }])).toThrow(/unknown op/);
    expect(() => parsePatch([{ op: 'add', path: '/a' }])).toThrow(/missing `value`/);
    expect(() => parsePatch([{ op: 'move', path: '/a' }])).toThrow(/`from`/);
    expect(() => parsePatch([5])).toThrow(/not an object/);
  });
});
