// The boot test's guest clock check: the container's reading must lie between the time set and that
// time plus the host's measured interval, in whole seconds.
import { describe, expect, it } from 'vitest';
import { clockWindow } from './clock.js';

describe('clockWindow', () => {
  const set = 1_900_000_000;

  it('accepts the time set and readings up to the elapsed seconds, rounded up, plus one', () => {
    const at = (readS: number) => clockWindow({ setS: set, readS, sentMs: 1000, doneMs: 3200 });
    expect(at(set)).toEqual({ maxS: set + 4, elapsedMs: 2200, ok: true });
    expect(at(set + 4).ok).toBe(true);
  });

  it('refuses a clock behind the time set or ahead of the time the host saw pass', () => {
    const at = (readS: number) => clockWindow({ setS: set, readS, sentMs: 1000, doneMs: 3200 });
    expect(at(set - 1).ok).toBe(false);
    expect(at(set + 5).ok).toBe(false);
    // The host's clock, a day behind the time set: the guest's clock was never set.
    expect(at(set - 86_400).ok).toBe(false);
  });

  it('allows one second when the calls took no whole second', () => {
    const w = clockWindow({ setS: set, readS: set + 1, sentMs: 50, doneMs: 50 });
    expect(w).toEqual({ maxS: set + 1, elapsedMs: 0, ok: true });
    expect(clockWindow({ setS: set, readS: set + 2, sentMs: 50, doneMs: 50 }).ok).toBe(false);
  });

  it('refuses a reading the container did not print, or times that are not an interval', () => {
    expect(clockWindow({ setS: set, readS: Number.NaN, sentMs: 0, doneMs: 10 }).ok).toBe(false);
    expect(clockWindow({ setS: set, readS: set, sentMs: 10, doneMs: 0 }).ok).toBe(false);
    expect(clockWindow({ setS: set, readS: set, sentMs: 0, doneMs: Number.NaN }).ok).toBe(false);
  });
});
