// What the guest services' typed clients share: one ttrpc connection, a default per-call deadline, and
// codecs on both sides of each call.
import {
  type CallOptions,
  type ConnectOptions,
  type MessageCodec,
  parseTtrpcAddress,
  type TtrpcAddress,
  TtrpcClient,
} from '@broker/ttrpc';

export async function connectTtrpc(
  address: string | TtrpcAddress,
  options: ConnectOptions,
): Promise<TtrpcClient> {
  return TtrpcClient.connect(typeof address === 'string' ? parseTtrpcAddress(address) : address, options);
}

export abstract class TypedTtrpcClient {
  readonly #client: TtrpcClient;
  readonly #timeoutMs: number;

  /** Wraps a connected ttrpc client; `close()` closes it. A deadline of 0 means none. */
  protected constructor(client: TtrpcClient, timeoutMs: number) {
    this.#client = client;
    this.#timeoutMs = timeoutMs;
  }

  /** True once the connection is gone. */
  get closed(): boolean {
    return this.#client.closed;
  }

  close(): void {
    this.#client.close();
  }

  protected async call<Req, Res>(
    service: string,
    method: string,
    req: MessageCodec<Req>,
    res: MessageCodec<Res>,
    value: Req,
    options: CallOptions | undefined,
  ): Promise<Res> {
    const { timeoutMs = this.#timeoutMs, ...rest } = options ?? {};
    const callOptions: CallOptions = timeoutMs > 0 ? { ...rest, timeoutMs } : rest;
    return res.decode(await this.#client.call(service, method, req.encode(value), callOptions));
  }
}
