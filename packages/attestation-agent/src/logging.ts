/**
 * Log levels. Upstream's `[log] level` (and `RUST_LOG`, which overrides it)
 * is a tracing `EnvFilter`: comma-separated directives, each a bare level or
 * `target=level`. pino has one level, so the last bare level wins and
 * per-target directives are reported as ignored.
 */
import type { Level } from 'pino';

export type LogLevel = Level | 'silent';

const LEVELS: Readonly<Record<string, LogLevel>> = {
  trace: 'trace',
  debug: 'debug',
  info: 'info',
  warn: 'warn',
  error: 'error',
  off: 'silent',
};

export interface ParsedLogLevel {
  readonly level: LogLevel;
  /** Set when part of the directive could not be honoured. */
  readonly warning?: string;
}

export function parseLogLevel(directive: string, fallback: LogLevel = 'info'): ParsedLogLevel {
  let level: LogLevel | undefined;
  const ignored: string[] = [];
  for (const part of directive.split(',')) {
    const d = part.trim();
    if (d === '') continue;
    const bare = LEVELS[d.toLowerCase()];
    if (bare !== undefined && Object.hasOwn(LEVELS, d.toLowerCase())) level = bare;
    else ignored.push(d);
  }
  if (ignored.length === 0) return { level: level ?? fallback };
  return {
    level: level ?? fallback,
    warning: `log directive parts ignored (only a global level is supported): ${JSON.stringify(ignored.join(',').slice(0, 200))}`,
  };
}
