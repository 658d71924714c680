/**
 * Glue between message codecs and the byte-level client/server, so service
 * packages write `serverMethod(ReqCodec, ResCodec, async (req) => …)` and
 * `clientMethod(client, 'svc', 'Method', ReqCodec, ResCodec)`.
 */
import type { CallOptions, TtrpcClient } from './client.js';
import type { MessageCodec } from './proto.js';
import type { CallContext, UnaryHandler } from './server.js';

/**
 * A unary handler working on decoded messages. A request that does not
 * decode answers INTERNAL "ttrpc: error unmarshalling payload: …", as
 * containerd/ttrpc does.
 */
export function serverMethod<Req, Res>(
  request: MessageCodec<Req>,
  response: MessageCodec<Res>,
  handler: (req: Req, ctx: CallContext) => Promise<Res>,
): UnaryHandler {
  return async (bytes, ctx) => response.encode(await handler(request.decode(bytes), ctx));
}

/** A function calling `service/method` with decoded messages. */
export function clientMethod<Req, Res>(
  client: TtrpcClient,
  service: string,
  method: string,
  request: MessageCodec<Req>,
  response: MessageCodec<Res>,
): (req: Req, options?: CallOptions) => Promise<Res> {
  return async (req, options) =>
    response.decode(await client.call(service, method, request.encode(req), options));
}
