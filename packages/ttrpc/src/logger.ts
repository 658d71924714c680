/**
 * The logging surface this package needs; a pino logger satisfies it.
 * Messages never include payloads or metadata values (they may hold secrets).
 */
export interface TtrpcLogger {
  debug(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

const noop = (): void => {};
export const silentLogger: TtrpcLogger = { debug: noop, warn: noop, error: noop };
