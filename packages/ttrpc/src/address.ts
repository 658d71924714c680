/**
 * Where a ttrpc endpoint lives: a unix socket path or a TCP host/port.
 * Upstream tools write these as `unix:///run/…/x.sock` or `tcp://host:port`.
 */
import { TtrpcLibraryError } from './errors.js';

export interface UnixAddress {
  readonly path: string;
}
export interface TcpAddress {
  readonly host: string;
  readonly port: number;
}
export type TtrpcAddress = UnixAddress | TcpAddress;

export class InvalidTtrpcAddress extends TtrpcLibraryError {
  override readonly name: string = 'InvalidTtrpcAddress';
  readonly input: string;
  constructor(input: string, reason: string) {
    super('ADDRESS_INVALID', `invalid ttrpc address ${JSON.stringify(input.slice(0, 200))}: ${reason}`);
    this.input = input;
  }
}

export function isUnixAddress(a: TtrpcAddress): a is UnixAddress {
  return 'path' in a;
}

/**
 * Parses `unix:///abs/path`, `unix://rel` (as the Rust ttrpc crate, the rest
 * after `unix://` is the path), `tcp://host:port` and `tcp://[v6]:port`.
 * A bare absolute path is taken as a unix socket.
 */
export function parseTtrpcAddress(input: string): TtrpcAddress {
  if (input.startsWith('/')) return { path: input };
  if (input.startsWith('unix://')) {
    const path = input.slice('unix://'.length);
    if (path === '') throw new InvalidTtrpcAddress(input, 'empty socket path');
    return { path };
  }
  if (input.startsWith('tcp://')) {
    const rest = input.slice('tcp://'.length);
    const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]/]+)):(\d{1,5})$/.exec(rest);
    if (!m) throw new InvalidTtrpcAddress(input, 'expected tcp://host:port');
    const port = Number(m[3]);
    if (port < 1 || port > 65535) throw new InvalidTtrpcAddress(input, 'port out of range');
    return { host: (m[1] ?? m[2])!, port };
  }
  throw new InvalidTtrpcAddress(input, 'scheme must be unix:// or tcp://');
}

export function formatTtrpcAddress(a: TtrpcAddress): string {
  if (isUnixAddress(a)) return `unix://${a.path}`;
  return a.host.includes(':') ? `tcp://[${a.host}]:${a.port}` : `tcp://${a.host}:${a.port}`;
}
