import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { OutputBuffer } from './output.js';

const tick = () => new Promise((r) => setImmediate(r));

describe('OutputBuffer', () => {
  it('waits for data, hands out at most len bytes, and answers empty data at the end', async () => {
    const source = new PassThrough();
    const out = new OutputBuffer(1024);
    out.attach(source);
    const pending = out.read(4);
    source.write('hello');
    expect(Buffer.from(await pending).toString()).toBe('hell');
    expect(Buffer.from(await out.read(100)).toString()).toBe('o');
    source.end();
    expect((await out.read(100)).length).toBe(0);
    expect((await out.read(100)).length).toBe(0);
  });

  it('stops reading its source at the limit and starts again once read', async () => {
    const source = new PassThrough({ highWaterMark: 16 });
    const out = new OutputBuffer(64);
    out.attach(source);
    for (let i = 0; i < 10; i++) source.write(Buffer.alloc(16, i));
    await tick();
    expect(out.buffered).toBe(64);
    expect(source.isPaused()).toBe(true);
    expect((await out.read(64)).length).toBe(64);
    await tick();
    expect(source.isPaused()).toBe(true); // full again with the next 64 bytes
    const rest = [await out.read(1000), await out.read(1000)];
    expect(rest.reduce((n, b) => n + b.length, 0)).toBe(96);
  });

  it('gives up a read when its call is cancelled, and loses nothing', async () => {
    const source = new PassThrough();
    const out = new OutputBuffer();
    out.attach(source);
    const controller = new AbortController();
    const cancelled = out.read(10, controller.signal);
    controller.abort(new Error('deadline'));
    await expect(cancelled).rejects.toThrow('deadline');
    source.write('later');
    expect(Buffer.from(await out.read(10)).toString()).toBe('later');
  });

  it('reports when its first byte arrived', async () => {
    const source = new PassThrough();
    const out = new OutputBuffer();
    out.attach(source);
    const before = performance.now();
    source.write('x');
    expect(await out.first).toBeGreaterThanOrEqual(before);
  });
});
