/**
 * gRPC status codes, which ttrpc carries in `google.rpc.Status.code`.
 * Numbers are fixed by the gRPC spec; names follow its upper-case spelling.
 */
export const Code = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

/** One of the 17 defined codes. Peers may send other numbers; those stay plain `number`s. */
export type StatusCode = (typeof Code)[keyof typeof Code];

const names: readonly string[] = Object.keys(Code);

/** `codeName(7)` → `"PERMISSION_DENIED"`; unknown numbers → `"CODE(<n>)"`. */
export function codeName(code: number): string {
  return names[code] ?? `CODE(${code})`;
}
