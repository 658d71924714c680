// A client of trustee's RVPS gRPC service, as rvps-tool (rvps/src/client) uses it.
import { reference } from '@broker/trustee-protos';
import { Metadata, type ServiceError } from '@grpc/grpc-js';
import { RvpsError } from './errors.js';
import { type GrpcTlsOptions, grpcTarget } from './grpc.js';

export const DEFAULT_RVPS_CLIENT_ADDRESS = 'http://127.0.0.1:50003';

export class RvpsClientError extends RvpsError {
  override readonly name: string = 'RvpsClientError';
  /** The gRPC status the call answered. */
  declare readonly code: number;
  /** `code` defaults to gRPC's UNKNOWN (2). */
  constructor(message: string, code = 2) {
    super(code, message);
  }
}

function failure(what: string, e: ServiceError): RvpsClientError {
  return new RvpsClientError(`${what}: ${e.details || e.message}`, e.code);
}

/** For https:// addresses, `caCert` and `clientCert` (GrpcTlsOptions). */
export interface RvpsClientOptions extends GrpcTlsOptions {
  /** An admin bearer JWT for writes (a fresh one per call), sent as `authorization: Bearer <jwt>`. */
  readonly token?: () => Promise<string>;
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
