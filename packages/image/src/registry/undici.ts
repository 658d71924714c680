/**
 * The parts of undici this package uses, loaded from their own modules. The
 * package's index also loads fetch, WebSocket, EventSource, the mock and
 * cache layers and more: ~240 KB more of a minified bundle and ~6 MB more of
 * a process's RSS, none of it used here. The types are those of undici's
 * index; the lockfile pins the version these module paths belong to. (The
 * same as kbs-client's: packages do not share their HTTP internals.)
 */
import type * as Undici from 'undici';
// @ts-expect-error as above
import connectModule from 'undici/lib/api/api-connect.js';
// @ts-expect-error as above
import requestModule from 'undici/lib/api/api-request.js';
// @ts-expect-error as above
import errorsModule from 'undici/lib/core/errors.js';
// @ts-expect-error undici ships no declarations for its internal modules; the types come from its index.
import AgentModule from 'undici/lib/dispatcher/agent.js';
// @ts-expect-error as above
import PoolModule from 'undici/lib/dispatcher/pool.js';
// @ts-expect-error as above
import ProxyAgentModule from 'undici/lib/dispatcher/proxy-agent.js';

const requestOf = requestModule as (
  this: Undici.Dispatcher,
  options: Undici.Dispatcher.RequestOptions,
) => Promise<Undici.Dispatcher.ResponseData>;

export const Agent = AgentModule as typeof Undici.Agent;
export type Agent = Undici.Agent;
const ProxyAgentClass = ProxyAgentModule as typeof Undici.ProxyAgent;
const PoolClass = PoolModule as typeof Undici.Pool;
const connectOf = connectModule as (
  this: Undici.Dispatcher,
  options: Undici.Dispatcher.ConnectOptions,
) => Promise<Undici.Dispatcher.ConnectData>;

/**
 * undici's `ProxyAgent`, whose client to the proxy gets the `connect` method
 * (CONNECT tunnels) that undici's index would add to every dispatcher.
 */
export function newProxyAgent(options: Undici.ProxyAgent.Options): Undici.ProxyAgent {
  return new ProxyAgentClass({
    ...options,
    clientFactory: (origin, opts) =>
      Object.assign(new PoolClass(origin, opts), {
        connect(this: Undici.Dispatcher, o: Undici.Dispatcher.ConnectOptions) {
          return connectOf.call(this, o);
        },
      }),
  });
}
export type ProxyAgent = Undici.ProxyAgent;
/** `dispatcher.request(options)`: the index adds `request` to every dispatcher's prototype; this does not. */
export function request(
  dispatcher: Undici.Dispatcher,
  options: Undici.Dispatcher.RequestOptions,
): Promise<Undici.Dispatcher.ResponseData> {
  return requestOf.call(dispatcher, options);
}
export const errors = errorsModule as typeof Undici.errors;
export type { Dispatcher } from 'undici';
