// A client of trustee's RVPS gRPC service, as rvps-tool (rvps/src/client) uses it.
import { reference } from '@broker/trustee-protos';
import { ChannelCredentials, Metadata, type ServiceError } from '@grpc/grpc-js';

export const DEFAULT_RVPS_CLIENT_ADDRESS = 'http://127.0.0.1:50003';

/** `http://host:port` (plaintext h2c) or `https://host:port` (TLS with the system roots) as a grpc-js target. */
export function grpcTarget(address: string): { target: string; credentials: ChannelCredentials } {
  const m = /^(https?):\/\/([^/]+)\/?$/.exec(address);
  if (m === null) {
    throw new Error(
      `address ${JSON.stringify(address.slice(0, 100))} must be http://HOST:PORT or https://HOST:PORT`,
    );
  }
  const credentials = m[1] === 'https' ? ChannelCredentials.createSsl() : ChannelCredentials.createInsecure();
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

export class RvpsClient {
  private readonly client: reference.ReferenceValueProviderServiceClient;
  constructor(
    address: string,
    private readonly deadlineMs = 30_000,
  ) {
    const { target, credentials } = grpcTarget(address);
    this.client = new reference.ReferenceValueProviderServiceClient(target, credentials);
  }

  private deadline(): Date {
    return new Date(Date.now() + this.deadlineMs);
  }

  register(message: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.client.registerReferenceValue({ message }, new Metadata(), { deadline: this.deadline() }, (err) =>
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
