/** One-line reasons for failures, naming the path of a file-system error. */

/**
 * What a command-line helper's error says failed. `DirectoryError` carries the system's code (`ENOENT`,
 * `ENOTDIR`…) so that `hintOf` and `describeError` treat it as they treat Node's own errors.
 */
export type CliErrorCode =
  /** The command line cannot be run (`UsageError`). */
  | 'USAGE_INVALID'
  /** A failure already reported to the user; `status` is the exit status (`CommandExit`). */
  | 'COMMAND_EXIT'
  /** A configuration document is not one the program accepts (`ConfigError`). */
  | 'CONFIG_INVALID'
  /** A failure with a hint saying what the user can do (`ActionableError`). */
  | 'ACTION_NEEDED'
  /** A log level setting is not one (`LogLevelError`). */
  | 'LOG_LEVEL_INVALID'
  /** A directory could not be created: the system's error code (`DirectoryError`). */
  | `E${Uppercase<string>}`;

/** Base class of the command-line helpers' errors; callers branch on `code` or on the class. */
export class CliError extends Error {
  override readonly name: string = 'CliError';
  readonly code: CliErrorCode;
  constructor(code: CliErrorCode, message?: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

const REASONS: Readonly<Record<string, string>> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EISDIR: 'is a directory',
  ENOTDIR: 'a parent is not a directory',
  EROFS: 'read-only file system',
  EEXIST: 'already exists',
  ENOSPC: 'no space left on device',
  EADDRINUSE: 'address already in use',
  ENAMETOOLONG: 'name too long',
  ELOOP: 'too many symbolic links',
};

interface SystemError {
  readonly code?: unknown;
  readonly path?: unknown;
  readonly address?: unknown;
  readonly message: string;
}

/** What to do about a system error, by its code. */
const SYSTEM_HINTS: Readonly<Record<string, string>> = {
  ENOENT: 'check the path',
  EACCES: 'check its permissions, or run as a user who may use it',
  EPERM: 'check its permissions, or run as a user who may use it',
  EISDIR: 'give a file, not a folder',
  ENOTDIR: 'check the path',
  EROFS: 'choose a writable location',
  ENOSPC: 'free some space',
  EADDRINUSE: 'another process listens there: stop it or choose another address',
  ECONNREFUSED: 'nothing listens there: is the service running, and are the host and port right?',
  ENOTFOUND: 'the host name does not resolve: check the URL',
  EAI_AGAIN: 'the host name could not be resolved now: check the URL and the DNS',
  ETIMEDOUT: 'the peer did not answer in time: check the address and the network',
  ECONNRESET: 'the peer closed the connection: check that it is the service you meant (http or https?)',
  EHOSTUNREACH: 'no route to the host: check the address and the network',
  ENETUNREACH: 'no route to the host: check the address and the network',
};

/** Certificate verification failures (OpenSSL's names, and Node's for a host name mismatch). */
const CERTIFICATE_CODES = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_SIGNATURE_FAILURE',
  'INVALID_CA',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** Whether `code` names a peer certificate that did not verify. */
export function isCertificateFailureCode(code: unknown): boolean {
  return typeof code === 'string' && CERTIFICATE_CODES.has(code);
}

/**
 * What the user can do about `e`: its own `hint` (any error may carry one, a string), else the hint
 * of the first system error code among it and its causes; undefined when there is none.
 */
export function hintOf(e: unknown): string | undefined {
  for (let c = e, depth = 0; c instanceof Error && depth < 8; c = c.cause, depth++) {
    const own = (c as { hint?: unknown }).hint;
    if (typeof own === 'string' && own !== '') return own;
    const code = (c as { code?: unknown }).code;
    if (isCertificateFailureCode(code)) return CERTIFICATE_HINT;
    if (typeof code === 'string' && Object.hasOwn(SYSTEM_HINTS, code)) return SYSTEM_HINTS[code];
  }
  // A failure wrapped into words only (gRPC's bind errors, a library that kept the message but not the
  // error): the code or the certificate's complaint as the message says it.
  for (let c = e, depth = 0; c instanceof Error && depth < 8; c = c.cause, depth++) {
    if (CERTIFICATE_WORDS.test(c.message)) return CERTIFICATE_HINT;
    const named = NETWORK_CODE.exec(c.message)?.[1];
    if (named !== undefined) return SYSTEM_HINTS[named];
  }
  return undefined;
}

const CERTIFICATE_HINT = "the peer's certificate is not trusted: give the command its CA certificate";
const CERTIFICATE_WORDS =
  /self[- ]signed certificate|unable to verify the first certificate|unable to get local issuer certificate|certificate has expired/i;
const NETWORK_CODE = new RegExp(`\\b(${Object.keys(SYSTEM_HINTS).join('|')})\\b`);

/** An error that says what the user can do about it (printed after the reason). */
export class ActionableError extends CliError {
  override readonly name: string = 'ActionableError';
  constructor(
    message: string,
    readonly hint: string,
    options?: { cause?: unknown },
  ) {
    super('ACTION_NEEDED', message, options);
  }
}

/** Gives `e` a hint unless it has one; returns `e`. */
export function withHint<E>(e: E, hint: string): E {
  if (e instanceof Error && typeof (e as { hint?: unknown }).hint !== 'string') {
    Object.defineProperty(e, 'hint', { value: hint, enumerable: false, configurable: true });
  }
  return e;
}

/**
 * The one line a command prints for a failure: what failed and why (`describeError`), then, when
 * known, what to do (`hintOf`), as `<reason>; <what to do>`.
 */
export function describeFailure(e: unknown): string {
  const reason = describeError(e);
  const hint = hintOf(e);
  if (hint === undefined || reason.includes(hint)) return reason;
  return `${reason}; ${hint}`;
}

/**
 * Whether a failure should show its stack and causes: `RUST_BACKTRACE` set (not `0`), or `RUST_LOG`
 * asking for debug or trace (upstream's switches).
 */
export function wantsBacktrace(env: Readonly<Record<string, string | undefined>>): boolean {
  const bt = env.RUST_BACKTRACE;
  if (bt !== undefined && bt !== '' && bt !== '0') return true;
  return /(^|[,=])(debug|trace)(,|$)/i.test(env.RUST_LOG ?? '');
}

/** The stack of `e` and of each cause, for `wantsBacktrace`. */
export function backtraceOf(e: unknown): string {
  const parts: string[] = [];
  for (let c = e, depth = 0; depth < 8 && c !== undefined; depth++) {
    if (c instanceof Error) {
      parts.push(`${depth === 0 ? '' : 'Caused by: '}${c.stack ?? `${c.name}: ${c.message}`}`);
      c = c.cause;
    } else {
      parts.push(`Caused by: ${String(c)}`);
      break;
    }
  }
  return `${parts.join('\n')}\n`;
}

/** `<path>: <reason>` for a file-system error, the message otherwise; one line. */
export function describeError(e: unknown): string {
  if (!(e instanceof Error)) return String(e).split('\n')[0] as string;
  const s = e as Error & SystemError;
  const where = typeof s.path === 'string' ? s.path : typeof s.address === 'string' ? s.address : undefined;
  if (typeof s.code === 'string' && where !== undefined) {
    const reason = REASONS[s.code] ?? s.message.replace(/^[A-Z]+: /, '').replace(/, \w+ '.*'$/, '');
    // Errors we wrapped keep their own words; the system's are rewritten to lead with the path.
    if (s.message.startsWith(`${s.code}:`)) return `${where}: ${reason}`;
  }
  return withPosition(e, inWords(firstLine(s.message)));
}

/**
 * A system error's text kept inside another message, in words: `ENOENT: no such file or directory,
 * open '/x'` → `no such file or directory`, and a bare `ENOENT` at the end of a clause → the same.
 */
function inWords(line: string): string {
  return line
    .replace(/\b(E[A-Z]{2,}): ([^,;]+), \w+ '[^']*'/g, (all, code: string, reason: string) =>
      Object.hasOwn(REASONS, code) ? reason : all,
    )
    .replace(/\b(E[A-Z]{2,})(?=$|[;,)\]])/g, (code: string) => REASONS[code] ?? code);
}

const MAX_LINE = 400;

/**
 * The message's first line; a message that breaks inside a quoted excerpt (V8's JSON errors quote
 * the text, newlines included) is joined instead, so the line does not end in the middle of a quote.
 */
function firstLine(message: string): string {
  const [head = '', ...rest] = message.split('\n');
  const quotes = (head.match(/"/g) ?? []).length;
  let line = head;
  if (quotes % 2 === 1 && rest.length > 0) line = message.replace(/\s*\n\s*/g, ' ');
  return line.length > MAX_LINE ? `${line.slice(0, MAX_LINE)}…` : line;
}

/** Appends the line and column a parser error (smol-toml's TomlError, among others) carries. */
function withPosition(e: Error, line: string): string {
  for (let c: unknown = e, depth = 0; c instanceof Error && depth < 8; c = c.cause, depth++) {
    const { line: l, column } = c as { line?: unknown; column?: unknown };
    if (typeof l === 'number' && typeof column === 'number' && !/\bline \d/.test(line)) {
      return `${line} (line ${l}, column ${column})`;
    }
  }
  return line;
}

/** The message of an Error, or the thrown value as text. */
export function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
