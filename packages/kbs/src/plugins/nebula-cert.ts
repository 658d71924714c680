// Runs the `nebula-cert` executable (slackhq/nebula): argv only, never a shell; stdin closed; a
// deadline (the process is killed at it) and a cap on what it may print.
import { execFile } from 'node:child_process';
import { KbsServiceError } from '../errors.js';

/** Long enough for an Argon2-encrypted CA on a busy machine; signing takes milliseconds. */
export const DEFAULT_NEBULA_CERT_TIMEOUT_MS = 30_000;
const MAX_TOOL_OUTPUT_BYTES = 64 * 1024;

export class NebulaCertError extends KbsServiceError {
  override readonly name: string = 'NebulaCertError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('NEBULA_CERT_FAILED', message, options);
  }
}

export class NebulaCert {
  constructor(
    readonly path: string,
    private readonly timeoutMs = DEFAULT_NEBULA_CERT_TIMEOUT_MS,
  ) {}

  /** Runs `nebula-cert <args…>`; resolves with stdout, rejects with the tool's own complaint. */
  run(args: readonly string[]): Promise<string> {
    return new Promise((resolve, reject) => {
      const child = execFile(
        this.path,
        args,
        {
          shell: false,
          timeout: this.timeoutMs,
          killSignal: 'SIGKILL',
          maxBuffer: MAX_TOOL_OUTPUT_BYTES,
          encoding: 'utf8',
          windowsHide: true,
        },
        (error, stdout, stderr) => {
          if (error === null) {
            resolve(stdout);
            return;
          }
          const what = `${this.path} ${args[0] ?? ''}`;
          const e = error as NodeJS.ErrnoException & { killed?: boolean; code?: unknown };
          let why: string;
          if (e.code === 'ENOENT') why = 'not found (set nebula_cert_bin_path)';
          else if (e.code === 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER')
            why = `printed more than ${MAX_TOOL_OUTPUT_BYTES} bytes`;
          else if (e.killed === true) why = `did not finish within ${this.timeoutMs} ms`;
          else why = (stderr || stdout).trim().split('\n').slice(-3).join(' ').slice(0, 512) || e.message;
          reject(new NebulaCertError(`${what}: ${why}`, { cause: error }));
        },
      );
      child.stdin?.end();
    });
  }

  /** The version `nebula-cert -version` reports (`Version: 1.6.1`). */
  async version(): Promise<string> {
    const out = await this.run(['-version']);
    const m = /^Version: (\S+)\s*$/.exec(out);
    if (m === null)
      throw new NebulaCertError(
        `${this.path} -version: unexpected output ${JSON.stringify(out.slice(0, 80))}`,
      );
    return m[1] as string;
  }
}
