// HTTPS key and certificate reloading: when the mounted files change (cert-manager renewing the
// certificate, an operator replacing the Secret), new connections get the new pair; connections already
// open keep theirs. The key and the certificate often come from two Secrets that Kubernetes updates one
// after the other, so a pair that does not match is not an error to act on: the current pair stays until
// both files agree.
import { createHash, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Server as HttpsServer } from 'node:https';
import { dirname } from 'node:path';
import { createSecureContext } from 'node:tls';
import type { Logger } from 'pino';
import type { HttpServerConfig } from '../config.js';
import { KbsConfigError, KbsServiceError } from '../errors.js';
import { tlsOptions } from '../server.js';
import { DirectoryWatcher, type DirectoryWatcherOptions } from './watcher.js';

/** Larger key or certificate files are not PEM a KBS would serve. */
export const MAX_TLS_FILE_BYTES = 1024 * 1024;

export interface TlsReloader {
  /** Re-reads both files now; resolves with whether new connections got a new pair. */
  reload(): Promise<boolean>;
  close(): Promise<void>;
}

async function readBounded(path: string): Promise<Buffer> {
  const b = await readFile(path);
  if (b.length > MAX_TLS_FILE_BYTES)
    throw new KbsServiceError('TLS_FILE_INVALID', `${path} is larger than ${MAX_TLS_FILE_BYTES} bytes`);
  return b;
}

/** When a PEM certificate (the first of a chain) stops being valid, in epoch seconds; undefined if unreadable. */
export function certificateNotAfter(cert: Buffer | string): number | undefined {
  try {
    const t = Date.parse(new X509Certificate(cert).validTo);
    return Number.isFinite(t) ? t / 1000 : undefined;
  } catch {
    return undefined;
  }
}

function describeCert(cert: Buffer): { subject?: string; notAfter?: string; sha256?: string } {
  try {
    const x = new X509Certificate(cert);
    return { subject: x.subject, notAfter: x.validTo, sha256: x.fingerprint256 };
  } catch {
    return {};
  }
}

/**
 * Watches the directories of `[http_server] private_key` and `certificate` and swaps the servers' secure
 * context when both files change into a valid pair.
 */
export function watchTlsFiles(
  config: HttpServerConfig,
  servers: readonly HttpsServer[],
  initial: { key: Buffer; cert: Buffer },
  logger: Logger,
  options: DirectoryWatcherOptions = {},
  /** Told of each certificate put in service (the metrics' expiry gauge). */
  onReloaded?: (cert: Buffer) => void,
): TlsReloader {
  const keyPath = config.privateKey;
  const certPath = config.certificate;
  if (keyPath === undefined || certPath === undefined)
    throw new KbsConfigError('HTTPS needs private_key and certificate');
  const digest = (key: Buffer, cert: Buffer) =>
    createHash('sha256').update(key).update('\0').update(cert).digest('hex');
  let current = digest(initial.key, initial.cert);
  let mismatchLogged = '';

  const reload = async (): Promise<boolean> => {
    let key: Buffer;
    let cert: Buffer;
    try {
      [key, cert] = await Promise.all([readBounded(keyPath), readBounded(certPath)]);
    } catch (e) {
      logger.warn(
        { reason: (e as Error).message },
        'TLS files cannot be read; keeping the current certificate',
      );
      return false;
    }
    const d = digest(key, cert);
    if (d === current) return false;
    const secure = { ...tlsOptions(config.tls), key, cert };
    try {
      // Throws when the key does not fit the certificate or either is not PEM.
      createSecureContext(secure);
    } catch (e) {
      if (mismatchLogged !== d) {
        mismatchLogged = d;
        logger.warn(
          { reason: (e as Error).message },
          'new TLS key and certificate are not a usable pair (yet); keeping the current certificate',
        );
      }
      return false;
    }
    for (const s of servers) s.setSecureContext(secure);
    current = d;
    onReloaded?.(cert);
    logger.info(describeCert(cert), 'TLS certificate reloaded: new connections use it');
    return true;
  };

  let last: Promise<boolean> = Promise.resolve(false);
  const watcher = new DirectoryWatcher(
    async () => {
      last = reload();
      await last;
    },
    {
      ...options,
      onWatchError: (dir, e) => logger.warn({ dir, reason: e.message }, 'cannot watch TLS directory'),
    },
  );
  watcher.setDirectories(new Set([dirname(keyPath), dirname(certPath)]));
  return {
    async reload() {
      await watcher.run();
      return last;
    },
    close: () => watcher.close(),
  };
}
