/** One-line reasons for failures, naming the path of a file-system error. */

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
  return s.message.split('\n')[0] as string;
}
