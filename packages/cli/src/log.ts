/**
 * The one logger (pino) of every service and tool. The level comes from `RUST_LOG`, upstream's
 * variable (a tracing EnvFilter: `info`, `kbs=debug,info`, `attestation_agent::kbs=trace`), then
 * from the command's aliases (`KBS_LOG_LEVEL`) and its configuration file; pino has a single
 * level, so the directive that applies to this program wins: the most verbose `target=level`
 * naming it (or one of its modules), else the bare level. Anything else is refused naming the
 * variable and the allowed values. Lines are JSON on stdout, or a human format when stdout is a
 * terminal or with `--log-format text`. A JSON line names its level (`"level":"info"`) and carries an
 * ISO-8601 UTC time (`"time":"2026-01-01T00:00:00.000Z"`), as log collectors expect.
 */
import { writeSync } from 'node:fs';
import { isatty } from 'node:tty';
import pino, { type Level, type Logger } from 'pino';
import { CliError } from './errors.js';

export type { Logger } from 'pino';
export type LogLevel = Level | 'silent';
export type LogFormat = 'json' | 'text';
export const LOG_FORMATS: readonly LogFormat[] = ['json', 'text'];

/** The option every service accepts, and its help line. */
export const LOG_FORMAT_OPTION = { 'log-format': { type: 'string' } } as const;
export const LOG_FORMAT_HELP =
  '      --log-format <FORMAT>  json (default) or text (default when stdout is a terminal)';

const LEVELS: Readonly<Record<string, LogLevel>> = {
  off: 'silent',
  error: 'error',
  warn: 'warn',
  info: 'info',
  debug: 'debug',
  trace: 'trace',
};
const ALLOWED = Object.keys(LEVELS).join(', ');
const VERBOSITY: readonly LogLevel[] = ['silent', 'fatal', 'error', 'warn', 'info', 'debug', 'trace'];

/** A log level setting that is not one: names the variable (or file key) and the allowed values. */
export class LogLevelError extends CliError {
  override readonly name: string = 'LogLevelError';
  constructor(message?: string, options?: { cause?: unknown }) {
    super('LOG_LEVEL_INVALID', message, options);
  }
}

function levelOf(source: string, word: string, whole: string, target: string): LogLevel {
  const level = Object.hasOwn(LEVELS, word.toLowerCase()) ? LEVELS[word.toLowerCase()] : undefined;
  if (level !== undefined) return level;
  throw new LogLevelError(
    `${source}: ${JSON.stringify(whole.slice(0, 200))} is not a log level: use one of ${ALLOWED}, ` +
      `or comma-separated target=level directives such as "${target}=debug,info"`,
  );
}

/**
 * The level a tracing-style directive list sets for a program whose log targets are `targets`
 * (crate names such as `attestation_agent`); undefined when nothing in it applies.
 */
export function parseLogDirectives(
  source: string,
  directives: string,
  targets: readonly string[],
): LogLevel | undefined {
  let bare: LogLevel | undefined;
  let targeted: LogLevel | undefined;
  const example = targets[0] ?? 'kbs';
  for (const part of directives.split(',')) {
    const d = part.trim();
    if (d === '') continue;
    const eq = d.lastIndexOf('=');
    if (eq < 0) {
      // A bare word is a level, or one of our targets at full verbosity (EnvFilter's `target`).
      if (targets.includes(d)) targeted = moreVerbose(targeted, 'trace');
      else bare = levelOf(source, d, directives, example);
      continue;
    }
    const target = d.slice(0, eq).replace(/\[.*\]$/, '');
    const level = levelOf(source, d.slice(eq + 1), directives, example);
    if (targets.some((t) => target === t || target.startsWith(`${t}::`)))
      targeted = moreVerbose(targeted, level);
  }
  return targeted ?? bare;
}

function moreVerbose(a: LogLevel | undefined, b: LogLevel): LogLevel {
  if (a === undefined) return b;
  return VERBOSITY.indexOf(a) >= VERBOSITY.indexOf(b) ? a : b;
}

export interface LogLevelSources {
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Program names as RUST_LOG targets. */
  readonly targets: readonly string[];
  /** Variables read after RUST_LOG, e.g. `KBS_LOG_LEVEL`. */
  readonly aliases?: readonly string[];
  /** The configuration file's level (`[log] level`) and where it came from, for messages. */
  readonly configured?: { readonly value: string; readonly source: string };
  readonly fallback?: LogLevel;
}

/** RUST_LOG, then the aliases, then the configuration file, then `info`. Throws LogLevelError. */
export function resolveLogLevel(s: LogLevelSources): LogLevel {
  for (const variable of ['RUST_LOG', ...(s.aliases ?? [])]) {
    const value = s.env[variable];
    if (value === undefined || value.trim() === '') continue;
    const level = parseLogDirectives(variable, value, s.targets);
    if (level !== undefined) return level;
  }
  if (s.configured !== undefined) {
    const level = parseLogDirectives(s.configured.source, s.configured.value, s.targets);
    if (level !== undefined) return level;
  }
  return s.fallback ?? 'info';
}

export interface LoggerOptions {
  /** The command name, also the `name` of every line. */
  readonly name: string;
  /** RUST_LOG targets; default the name with `-` → `_` (the upstream crate's name), and the name. */
  readonly targets?: readonly string[];
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly aliases?: readonly string[];
  readonly configured?: LogLevelSources['configured'];
  /** `--log-format`; default text when the destination is a terminal, JSON otherwise. */
  readonly format?: LogFormat;
  /** File descriptor the lines go to: 1 (services, default) or 2 (tools whose stdout is data). */
  readonly fd?: number;
  /** Where lines go instead (tests); JSON unless `format` says text. */
  readonly destination?: { write(line: string): void };
  /** Fields on every line (a cluster worker's id). */
  readonly base?: Record<string, unknown>;
  /** The level when nothing sets one; default info (a tool that speaks only to warn passes warn). */
  readonly fallback?: LogLevel;
}

const LEVEL_LABELS: Readonly<Record<number, string>> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};
const HIDDEN_IN_TEXT = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg']);

/** One JSON log line as a human reads it: `time LEVEL name: message key=value ...`. */
export function formatLogLine(json: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const time =
    typeof entry.time === 'number'
      ? new Date(entry.time).toISOString()
      : typeof entry.time === 'string'
        ? entry.time
        : '';
  const level =
    typeof entry.level === 'string'
      ? entry.level.toUpperCase()
      : (LEVEL_LABELS[entry.level as number] ?? String(entry.level));
  const fields = Object.entries(entry)
    .filter(([k]) => !HIDDEN_IN_TEXT.has(k))
    .map(([k, v]) => `${k}=${typeof v === 'string' && !/[\s"=]/.test(v) ? v : JSON.stringify(v)}`);
  const head = `${time} ${level.padEnd(5)} ${String(entry.name ?? '')}: ${String(entry.msg ?? '')}`;
  return `${[head, ...fields].join(' ')}\n`;
}

/** Throws LogLevelError for a bad level setting: a configuration error, to be reported once. */
export function createLogger(options: LoggerOptions): Logger {
  const env = options.env ?? process.env;
  const targets = options.targets ?? [options.name.replaceAll('-', '_'), options.name];
  const level = resolveLogLevel({
    env,
    targets,
    ...(options.aliases !== undefined && { aliases: options.aliases }),
    ...(options.configured !== undefined && { configured: options.configured }),
    ...(options.fallback !== undefined && { fallback: options.fallback }),
  });
  const fd = options.fd ?? 1;
  const format = options.format ?? (options.destination === undefined && isatty(fd) ? 'text' : 'json');
  // process.stdout/stderr write synchronously to files, pipes and terminals on Linux.
  const stream = fd === 2 ? process.stderr : fd === 1 ? process.stdout : undefined;
  const sink = options.destination ?? {
    write: (line: string) => void (stream !== undefined ? stream.write(line) : writeSync(fd, line)),
  };
  const destination = format === 'text' ? { write: (line: string) => sink.write(formatLogLine(line)) } : sink;
  return pino(
    {
      name: options.name,
      level,
      formatters: { level: (label) => ({ level: label }) },
      timestamp: pino.stdTimeFunctions.isoTime,
      ...(options.base !== undefined && { base: options.base }),
    },
    destination,
  );
}

/** Re-applies the configuration file's level once it is read, unless the environment set one. */
export function applyConfiguredLevel(logger: Logger, options: LoggerOptions): void {
  const env = options.env ?? process.env;
  const targets = options.targets ?? [options.name.replaceAll('-', '_'), options.name];
  logger.level = resolveLogLevel({
    env,
    targets,
    ...(options.aliases !== undefined && { aliases: options.aliases }),
    ...(options.configured !== undefined && { configured: options.configured }),
    ...(options.fallback !== undefined && { fallback: options.fallback }),
  });
}

/** The access-log record of the KBS and api-server-rest: one shape, logged with the message `access`. */
export interface AccessRecord {
  readonly method: string;
  readonly path: string;
  readonly status: number;
  /** Response body bytes. */
  readonly bytes: number;
  readonly ms: number;
  readonly peer: string | undefined;
  readonly ua: string | undefined;
}

const MAX_LOGGED = 256;
const clip = (s: string | undefined, n: number) =>
  s !== undefined && s.length > n ? `${s.slice(0, n)}…` : s;

/** Bounds the client-chosen fields (method, path, user agent) and rounds the duration. */
export function accessRecord(r: AccessRecord): AccessRecord {
  return {
    method: clip(r.method, 16) as string,
    path: clip(r.path, MAX_LOGGED) as string,
    status: r.status,
    bytes: r.bytes,
    ms: Math.round(r.ms * 1000) / 1000,
    peer: r.peer,
    ua: clip(r.ua, MAX_LOGGED),
  };
}
