import { Socket } from 'node:net';
import { TpmTransportError, TpmUsageError } from './errors.js';

/** Control-channel command codes (swtpm's tpm_ioctl.h: the ioctl number plus one). */
const CMD_INIT = 2;
const CMD_SHUTDOWN = 3;
const INIT_FLAG_DELETE_VOLATILE = 1;

/**
 * swtpm's control channel (`--ctrl type=tcp`): out-of-band power
 * management. `init()` is _TPM_Init, a TPM reset: afterwards the TPM needs
 * TPM2_Startup, and Startup(CLEAR) resets the PCRs, which is how a mock
 * simulates a reboot.
 */
export class SwtpmControlChannel {
  readonly host: string;
  readonly port: number;

  constructor(options: { readonly host?: string; readonly port: number }) {
    if (!Number.isInteger(options.port) || options.port <= 0 || options.port > 65535) {
      throw new TpmUsageError(`invalid swtpm control port ${options.port}`);
    }
    this.host = options.host ?? '127.0.0.1';
    this.port = options.port;
  }

  /** _TPM_Init; with `deleteVolatile`, swtpm also drops its saved volatile state. */
  async init(options: { readonly deleteVolatile?: boolean } = {}): Promise<void> {
    const req = Buffer.alloc(8);
    req.writeUInt32BE(CMD_INIT, 0);
    req.writeUInt32BE(options.deleteVolatile ? INIT_FLAG_DELETE_VOLATILE : 0, 4);
    await this.#call('CMD_INIT', req);
  }

  /** Stops the TPM (swtpm then exits, which is how a test can end it without a pid). */
  async shutdown(): Promise<void> {
    const req = Buffer.alloc(4);
    req.writeUInt32BE(CMD_SHUTDOWN, 0);
    await this.#call('CMD_SHUTDOWN', req);
  }

  #call(name: string, req: Buffer): Promise<void> {
    const where = `swtpm control channel at ${this.host}:${this.port}`;
    return new Promise((resolve, reject) => {
      const socket = new Socket();
      let got = Buffer.alloc(0);
      let settled = false;
      const done = (err?: Error) => {
        if (settled) return;
        settled = true;
        socket.destroy();
        if (err) reject(err);
        else resolve();
      };
      socket.on('error', (err) => done(new TpmTransportError(`${where}: ${err.message}`, { cause: err })));
      socket.on('close', () => done(new TpmTransportError(`${where} closed before answering ${name}`)));
      socket.on('data', (chunk) => {
        got = Buffer.concat([got, chunk]);
        if (got.length < 4) return;
        if (got.length > 4)
          return done(new TpmTransportError(`${where} sent ${got.length} bytes for ${name}`));
        const result = got.readUInt32BE(0);
        done(
          result === 0
            ? undefined
            : new TpmTransportError(`${name} failed with TPM result 0x${result.toString(16)}`),
        );
      });
      socket.connect(this.port, this.host, () => socket.write(req));
    });
  }
}
