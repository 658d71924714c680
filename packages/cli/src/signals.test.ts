import { describe, expect, it } from 'vitest';
import { untilStopSignal } from './signals.js';

describe('untilStopSignal', () => {
  it('resolves with the signal and removes its listeners', async () => {
    const before = process.listenerCount('SIGTERM');
    const intBefore = process.listenerCount('SIGINT');
    const stopped = untilStopSignal();
    expect(process.listenerCount('SIGTERM')).toBe(before + 1);
    process.emit('SIGTERM', 'SIGTERM');
    await expect(stopped).resolves.toBe('SIGTERM');
    expect(process.listenerCount('SIGTERM')).toBe(before);
    expect(process.listenerCount('SIGINT')).toBe(intBefore);
  });
});
