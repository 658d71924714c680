// A client of trustee's RVPS gRPC service, as rvps-tool (rvps/src/client) uses it.
import { reference } from '@broker/trustee-protos';
import { ChannelCredentials, Metadata, type ServiceError } from '@grpc/grpc-js';

export const DEFAULT_RVPS_CLIENT_ADDRESS = 'http://127.0.0.1:50003';

/**
 * `http://host:port` (plaintext h2c) or `https://host:port` (TLS with the system roots, or `caCert`;
 * with `clientCert` for mutual TLS) as a grpc-js target.
 */
export function grpcTarget(
  address: string,
  tls: Pick<RvpsClientOptions, 'caCert' | 'clientCert'> = {},
): { target: string; credentials: ChannelCredentials } {
  const m = /^(https?):\/\/([^/]+)\/?$/.exec(address);
  if (m === null) {
    throw new Error(
      `address ${JSON.stringify(address.slice(0, 100))} must be http://HOST:PORT or https://HOST:PORT`,
    );
  }
  if (m[1] === 'http' && (tls.caCert !== undefined || tls.clientCert !== undefined)) {
    throw new Error(`a CA or client certificate needs an https:// address, not ${address.slice(0, 100)}`);
  }
  const credentials =
    m[1] === 'https'
      ? ChannelCredentials.createSsl(
          tls.caCert ?? null,
          tls.clientCert?.privateKey ?? null,
          tls.clientCert?.certChain ?? null,
        )
      : ChannelCredentials.createInsecure();
  return { target: m[2] as string, credentials };
}

export class RvpsClientError extends Error {
  override readonly name: string = 'RvpsClientError';
  constructor(
    message: string,
    readonly code?: number,
  ) {
    super(message);
  }
}

function failure(what: string, e: ServiceError): RvpsClientError {
  return new RvpsClientError(`${what}: ${e.details || e.message}`, e.code);
}

export interface RvpsClientOptions {
  /** An admin bearer JWT for writes (a fresh one per call), sent as `authorization: Bearer <jwt>`. */
  readonly token?: () => Promise<string>;
  /** For https:// addresses: PEM CA certificates to trust instead of the system roots. */
  readonly caCert?: Buffer;
  /** For https:// addresses: a PEM client certificate chain and its key, for mutual TLS. */
  readonly clientCert?: { readonly certChain: Buffer; readonly privateKey: Buffer };
}

export class RvpsClient {
  private readonly client: reference.ReferenceValueProviderServiceClient;
  private readonly token: (() => Promise<string>) | undefined;
  constructor(
    address: string,
    private readonly deadlineMs = 30_000,
    options: RvpsClientOptions = {},
  ) {
    const { target, credentials } = grpcTarget(address, options);
    this.client = new reference.ReferenceValueProviderServiceClient(target, credentials);
    this.token = options.token;
  }

  private deadline(): Date {
    return new Date(Date.now() + this.deadlineMs);
  }

  async register(message: string): Promise<void> {
    const metadata = new Metadata();
    if (this.token !== undefined) metadata.set('authorization', `Bearer ${await this.token()}`);
    return new Promise((resolve, reject) => {
      this.client.registerReferenceValue({ message }, metadata, { deadline: this.deadline() }, (err) =>
        err ? reject(failure('register reference value', err)) : resolve(),
      );
    });
  }

  /** The stored value's JSON text, or undefined when the id is unknown. */
  query(id: string): Promise<string | undefined> {
    return new Promise((resolve, reject) => {
      this.client.queryReferenceValue(
        { referenceValueId: id },
        new Metadata(),
        { deadline: this.deadline() },
        (err, res) =>
          err ? reject(failure('query reference value', err)) : resolve(res?.referenceValueResults),
      );
    });
  }

  close(): void {
    this.client.close();
  }
}
