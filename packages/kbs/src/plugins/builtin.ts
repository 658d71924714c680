// trustee's built-in client plugins other than `resource` (plugin arm of api_server.rs `api`), behind the
// gate of gate.ts chosen by the plugin's validate_auth; its encrypted() asks, on the token path, for the
// reply to be JWE-encrypted to the TEE key. Every plugin failure is trustee's 401 PluginInternalError;
// replies are `text/xml` unless encrypted, as trustee.
import { KbsError } from '@broker/protocol';
import { KbsServiceError } from '../errors.js';
import { JweEncrypter } from '../jwe-encrypter.js';
import type { Reply } from '../reply.js';
import type { ApiRequest } from '../request.js';
import { authorizePluginCall, checkPluginAdmin, encryptToTee, type PluginGateDeps } from './gate.js';

/** What a built-in plugin sees of a request: the path after `/kbs/v0/<plugin>/`. */
export interface PluginCall {
  readonly method: string;
  readonly path: readonly string[];
  readonly query: Readonly<Record<string, string>>;
  readonly body: Uint8Array;
  /** On the token path: the verified attestation token's claims (trustee hands plugins its init_data_claims). */
  readonly claims?: Record<string, unknown>;
}

/** trustee's ClientPlugin trait. */
export interface BuiltinPlugin {
  readonly name: string;
  handle(call: PluginCall): Promise<Uint8Array>;
  /** true: the call needs admin credentials; false: an attestation token and the resource policy. */
  validateAuth(call: PluginCall): boolean;
  /** On the token path: encrypt the reply to the TEE key. */
  encrypted(call: PluginCall): boolean;
  close?(): Promise<void>;
}

export type BuiltinPluginDeps = PluginGateDeps;

const TEXT_XML = { 'content-type': 'text/xml' };

/** A refusal of the caller's request whose message is safe (and useful) to show the caller. */
export class PluginRequestError extends KbsServiceError {
  override readonly name: string = 'PluginRequestError';
  constructor(message: string) {
    super('PLUGIN_REQUEST_REFUSED', message);
  }
}

export class BuiltinPluginHost {
  private readonly jwe = new JweEncrypter();

  constructor(
    private readonly plugins: ReadonlyMap<string, BuiltinPlugin>,
    private readonly deps: BuiltinPluginDeps,
  ) {}

  has(name: string): boolean {
    return this.plugins.has(name);
  }

  async close(): Promise<void> {
    for (const p of this.plugins.values()) await p.close?.();
  }

  /** `rest` is the path after `/kbs/v0/<name>/`. */
  async handle(req: ApiRequest, name: string, rest: readonly string[]): Promise<Reply> {
    const plugin = this.plugins.get(name);
    if (plugin === undefined) throw new KbsError('PluginNotFound', `Plugin ${name.slice(0, 128)} not found`);
    const call: PluginCall = { method: req.method, path: rest, query: req.query, body: req.body };
    const run = (c: PluginCall) =>
      this.deps.metrics.measurePlugin(
        name,
        (e) => e instanceof KbsError && e.kind === 'PluginInternalError',
        async () => {
          try {
            return await plugin.handle(c);
          } catch (e) {
            const detail =
              e instanceof PluginRequestError ? `Plugin internal error: ${e.message}` : undefined;
            throw new KbsError('PluginInternalError', detail, { cause: e });
          }
        },
      );
    if (plugin.validateAuth(call)) {
      checkPluginAdmin(this.deps.admin, req);
      return { status: 200, headers: TEXT_XML, body: await run(call) };
    }
    const claims = await authorizePluginCall(this.deps, req, name, rest);
    const body = await run({ ...call, claims });
    if (!plugin.encrypted(call)) return { status: 200, headers: TEXT_XML, body };
    return encryptToTee(this.jwe, this.deps.tokens, claims, body);
  }
}
