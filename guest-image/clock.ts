// The boot test's check of the guest clock that SetGuestDateTime set (used by pod.ts, kept apart so a
// unit test can import it: pod.ts runs when loaded).

/** What the host measured around SetGuestDateTime and the container's reading of the guest's clock. */
export interface ClockReading {
  /** The whole seconds SetGuestDateTime set (its `Sec`; its `Usec` is below one second). */
  readonly setS: number;
  /** The guest's clock in whole seconds, as the container printed it. */
  readonly readS: number;
  /** The host's monotonic time (ms) just before sending SetGuestDateTime. */
  readonly sentMs: number;
  /** The host's monotonic time (ms) just after the container's output was read. */
  readonly doneMs: number;
}

export interface ClockWindow {
  /** The latest reading the guest's clock allows: the time set, plus the time the host saw pass. */
  readonly maxS: number;
  readonly elapsedMs: number;
  readonly ok: boolean;
}

/**
 * The container read its clock after SetGuestDateTime took effect and before its output reached the
 * host, so the reading lies between the time set and that time plus what passed at the host between
 * sending the call and reading the output, rounded up to whole seconds. One second more covers the
 * whole-second print: the `Usec` part of the time set plus the time passed can carry it one second past
 * the rounded-up interval.
 */
export function clockWindow(r: ClockReading): ClockWindow {
  const elapsedMs = r.doneMs - r.sentMs;
  const maxS = r.setS + Math.ceil(elapsedMs / 1000) + 1;
  const ok =
    Number.isInteger(r.readS) &&
    Number.isFinite(elapsedMs) &&
    elapsedMs >= 0 &&
    r.setS <= r.readS &&
    r.readS <= maxS;
  return { maxS, elapsedMs, ok };
}
