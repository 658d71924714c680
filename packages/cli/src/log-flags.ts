// The `--log-level` and `--log-format` flags that the one-shot commands take, checked in one place.
import { choice, UsageError } from './args.js';
import { LOG_FORMATS, type LogFormat, parseLogDirectives } from './log.js';

export interface LogFlags {
  /** The directive list as given (`debug`, `mock_tee=trace,info`), to be read as RUST_LOG. */
  readonly level?: string;
  readonly format?: LogFormat;
}

/**
 * Checks `--log-level` (RUST_LOG's directive syntax, for a program logging under `targets`) and
 * `--log-format`; a bad value is a usage error that names its flag (exit 2).
 */
export function logFlags(
  values: { readonly 'log-level'?: string | undefined; readonly 'log-format'?: string | undefined },
  targets: readonly string[],
): LogFlags {
  const level = values['log-level'];
  try {
    if (level !== undefined) parseLogDirectives('--log-level', level, targets);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const format = choice('log-format', values['log-format'], LOG_FORMATS);
  return { ...(level !== undefined && { level }), ...(format !== undefined && { format }) };
}
