// trustee's RVPS gRPC service (rvps/src/server/mod.rs) over @grpc/grpc-js, with the KBS's RVPS behind it.

import { grpcWriteCredentials, OPEN_WRITES, WriteAuthError, type WriteAuthorizer } from '@broker/auth';
import { type Logger, messageOf } from '@broker/cli';
import { reference } from '@broker/trustee-protos';
import { Server, type ServerUnaryCall, type sendUnaryData, status } from '@grpc/grpc-js';
import { type RunningGrpcServer, serveGrpc } from './grpc.js';
import { MAX_RVPS_MESSAGE_LENGTH } from './message.js';
import type { Rvps } from './rvps.js';
import type { ServerTls } from './tls.js';

/**
 * The largest request accepted: a registration message at the KBS RVPS's own limit plus the protobuf
 * framing. grpc-js refuses anything larger with RESOURCE_EXHAUSTED before a handler sees it.
 */
export const MAX_RVPS_REQUEST_BYTES = MAX_RVPS_MESSAGE_LENGTH + 1024;
/** Replies are one reference value's JSON; the same bound keeps a hostile store from growing them. */
export const MAX_RVPS_RESPONSE_BYTES = MAX_RVPS_MESSAGE_LENGTH + 1024;

export interface RvpsServerOptions {
  readonly rvps: Rvps;
  /** `host:port` as trustee's `-a` takes it; port 0 picks a free one. */
  readonly address: string;
  readonly logger?: Logger;
  /** Who may register reference values; open to anyone when absent (trustee's behaviour). */
  readonly auth?: WriteAuthorizer;
  /** Serve TLS (HTTP/2 over TLS), asking for client certificates when it has a client CA. */
  readonly tls?: ServerTls;
}

export type RunningRvpsServer = RunningGrpcServer;

const REGISTER_PATH = '/reference.ReferenceValueProviderService/RegisterReferenceValue';

/** A refused write as its gRPC status: UNAUTHENTICATED, or PERMISSION_DENIED for a token that may not write. */
export function writeRefusal(e: WriteAuthError): { code: status; details: string } {
  return {
    code: e.code === 'PERMISSION_DENIED' ? status.PERMISSION_DENIED : status.UNAUTHENTICATED,
    details: e.message,
  };
}

/**
 * Handlers as trustee writes them: every failure is ABORTED with a fixed prefix. Registration first
 * passes `auth` (refused with UNAUTHENTICATED or PERMISSION_DENIED); queries are open.
 */
export function rvpsHandlers(
  rvps: Rvps,
  logger?: Logger,
  auth: WriteAuthorizer = OPEN_WRITES,
): reference.ReferenceValueProviderServiceServer {
  return {
    queryReferenceValue(
      call: ServerUnaryCall<reference.ReferenceValueQueryRequest, reference.ReferenceValueQueryResponse>,
      callback: sendUnaryData<reference.ReferenceValueQueryResponse>,
    ) {
      const id = call.request.referenceValueId;
      rvps.query(id).then(
        (value) => {
          // Absent means unknown: trustee's AS health-checks its RVPS with an id that never exists.
          callback(null, value === undefined ? {} : { referenceValueResults: JSON.stringify(value) });
        },
        (e: unknown) => {
          logger?.warn({ err: messageOf(e) }, 'query reference value failed');
          callback({ code: status.ABORTED, details: `Query reference value: ${messageOf(e)}` });
        },
      );
    },
    registerReferenceValue(
      call: ServerUnaryCall<
        reference.ReferenceValueRegisterRequest,
        reference.ReferenceValueRegisterResponse
      >,
      callback: sendUnaryData<reference.ReferenceValueRegisterResponse>,
    ) {
      let who: string;
      try {
        who = auth.check(REGISTER_PATH, grpcWriteCredentials(call));
      } catch (e) {
        if (!(e instanceof WriteAuthError)) throw e;
        logger?.warn({ err: e.message, peer: call.getPeer() }, 'register reference value refused');
        return callback(writeRefusal(e));
      }
      rvps.register(call.request.message).then(
        (names) => {
          logger?.info(
            names.length > 32 ? { count: names.length, by: who } : { names, by: who },
            'reference values registered',
          );
          callback(null, {});
        },
        (e: unknown) => {
          logger?.warn({ err: messageOf(e) }, 'register reference value failed');
          callback({ code: status.ABORTED, details: `Register reference value: ${messageOf(e)}` });
        },
      );
    },
  };
}

export async function startRvpsServer(options: RvpsServerOptions): Promise<RunningRvpsServer> {
  const server = new Server({
    'grpc.max_receive_message_length': MAX_RVPS_REQUEST_BYTES,
    'grpc.max_send_message_length': MAX_RVPS_RESPONSE_BYTES,
  });
  server.addService(
    reference.ReferenceValueProviderServiceService,
    rvpsHandlers(options.rvps, options.logger, options.auth),
  );
  return serveGrpc(server, {
    address: options.address,
    tls: options.tls,
    healthServices: ['reference.ReferenceValueProviderService'],
  });
}
