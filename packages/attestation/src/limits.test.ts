import { RegoLimitError } from '@broker/rego';
import { describe, expect, it } from 'vitest';
import { EvaluationQueue, LimitFailures, limitErrorOf, PolicyCheckError } from './limits.js';

describe('EvaluationQueue', () => {
  it('runs one at a time, in order, letting the event loop turn between runs', async () => {
    const q = new EvaluationQueue(4);
    const order: string[] = [];
    const run = (name: string) =>
      q.run(() => {
        order.push(name);
        // Something that arrived while this ran (an I/O callback, a timer) is served before the next.
        setImmediate(() => order.push(`after ${name}`));
        return name;
      });
    expect(await Promise.all([run('a'), run('b'), run('c')])).toEqual(['a', 'b', 'c']);
    expect(order).toEqual(['a', 'after a', 'b', 'after b', 'c']);
    expect(q.ran).toBe(3);
  });

  it('pauses after a run as long as it ran, so that timers due meanwhile fire before the next run', async () => {
    const q = new EvaluationQueue(4);
    const order: string[] = [];
    const a = q.run(() => {
      const until = performance.now() + 20;
      while (performance.now() < until) {
        // an evaluation holding the event loop
      }
      // Due before the pause (as long as the run) ends.
      setTimeout(() => order.push('timer'), 10);
      order.push('a');
    });
    const b = q.run(() => {
      order.push('b');
    });
    await Promise.all([a, b]);
    expect(order).toEqual(['a', 'timer', 'b']);
  });

  it('refuses checks with `busy` beyond the one running and the waiting cap, never uploads, and takes work again after', async () => {
    const q = new EvaluationQueue(2);
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const first = q.run(() => gate);
    const waiting = [q.run(() => 'w1'), q.run(() => 'w2')];
    const refused = await q.run(() => 'w3').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(PolicyCheckError);
    expect(refused).toMatchObject({ code: 'busy' });
    // An upload is not refused: it waits its turn.
    const upload = q.run(() => 'upload', false);
    release();
    await first;
    expect(await Promise.all(waiting)).toEqual(['w1', 'w2']);
    expect(await upload).toBe('upload');
    expect(await q.run(() => 'later')).toBe('later');
    expect(q.ran).toBe(5);
  });

  it('goes on after a run that throws', async () => {
    const q = new EvaluationQueue(1);
    await expect(
      q.run(() => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await q.run(() => 1)).toBe(1);
  });
});

describe('LimitFailures', () => {
  it('remembers per kind and text, and drops the oldest beyond its size', () => {
    const m = new LimitFailures(2);
    const e = new RegoLimitError('memory', 'too much');
    m.remember('resource', 'a', e);
    expect(m.get('resource', 'a')).toBe(e);
    expect(m.get('attestation', 'a')).toBeUndefined();
    expect(m.get('resource', 'a ')).toBeUndefined();
    m.remember('resource', 'b', e);
    m.remember('resource', 'c', e);
    expect(m.get('resource', 'a')).toBeUndefined();
    expect(m.get('resource', 'c')).toBe(e);
  });

  it('finds a limit error through causes', () => {
    const e = new RegoLimitError('steps', 'x');
    expect(limitErrorOf(new Error('outer', { cause: new Error('mid', { cause: e }) }))).toBe(e);
    expect(limitErrorOf(new Error('plain'))).toBeUndefined();
  });
});
