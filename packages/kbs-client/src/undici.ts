/**
 * The parts of undici this package uses, loaded from their own modules. The
 * package's index also loads fetch, WebSocket, EventSource, the mock and
 * cache layers and more: ~240 KB more of a minified bundle and ~6 MB more of
 * the attestation agent's RSS after a handshake, none of it used here. The
 * types are those of undici's index; the lockfile pins the version these
 * module paths belong to.
 */
import type * as Undici from 'undici';
// @ts-expect-error as above
import requestModule from 'undici/lib/api/api-request.js';
// @ts-expect-error as above
import connectorModule from 'undici/lib/core/connect.js';
// @ts-expect-error as above
import errorsModule from 'undici/lib/core/errors.js';
// @ts-expect-error undici ships no declarations for its internal modules; the types come from its index.
import AgentModule from 'undici/lib/dispatcher/agent.js';
// @ts-expect-error as above
import ClientModule from 'undici/lib/dispatcher/client.js';

const requestOf = requestModule as (
  this: Undici.Dispatcher,
  options: Undici.Dispatcher.RequestOptions,
) => Promise<Undici.Dispatcher.ResponseData>;

export const Agent = AgentModule as typeof Undici.Agent;
export type Agent = Undici.Agent;
export type AgentOptions = Undici.Agent.Options;
/** One origin, its own connection(s): the HTTP layer's one-off connection for a retry. */
export const Client = ClientModule as typeof Undici.Client;
export type Client = Undici.Client;
/** `dispatcher.request(options)`: the index adds `request` to every dispatcher's prototype; this does not. */
export function request(
  dispatcher: Undici.Dispatcher,
  options: Undici.Dispatcher.RequestOptions,
): Promise<Undici.Dispatcher.ResponseData> {
  return requestOf.call(dispatcher, options);
}
export const buildConnector = connectorModule as typeof Undici.buildConnector;
export type ConnectorOptions = Undici.buildConnector.BuildOptions;
export type Connector = Undici.buildConnector.connector;
export const errors = errorsModule as typeof Undici.errors;
export type { Dispatcher } from 'undici';
