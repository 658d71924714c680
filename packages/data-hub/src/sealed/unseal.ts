/**
 * `api.SealedSecretService/UnsealSecret`: the pointer is parsed and, unless
 * `skip_sealed_secret_verification`, verified (kid from the KBS or from the
 * sealed-secret key folder), then unsealed. Every KBS request (the kid's
 * JWK, a vault secret, an envelope's KEK) goes through the hub's
 * `getResource`, so they share its cached token and its attestation.
 *
 * Loaded on the first `UnsealSecret` call, like the KBS client.
 */
import { messageOf } from '@broker/cli';
import { describeSealedSecret, SIGNING_CREDENTIALS_PATH, unsealSecret } from '@broker/sealed-secret';
import type { Logger } from 'pino';
import { GetResourceFailed } from '../errors.js';
import { UnsealSecretFailed } from './errors.js';

export interface UnsealContext {
  /** The hub's resource fetch (throws `GetResourceFailed`). */
  readonly getResource: (uri: string) => Promise<Uint8Array>;
  readonly skipVerification: boolean;
  /** Key files of a `kid` that is not a KBS URI (default upstream's folder). */
  readonly signingKeyDir?: string;
  readonly logger?: Logger;
}

/** Unseals `secret`; throws `UnsealSecretFailed` with upstream's wording, after logging the reason. */
export async function unsealWithHub(secret: Uint8Array, ctx: UnsealContext): Promise<Uint8Array> {
  // kid and resource come from the unverified pointer: logged as untrusted text, never the secret.
  const about = describeSealedSecret(secret);
  ctx.logger?.info({ kid: about.kid, resource: about.resource }, 'unseal secret called');
  try {
    const plaintext = await unsealSecret(secret, {
      skipVerification: ctx.skipVerification,
      signingKeyDir: ctx.signingKeyDir ?? SIGNING_CREDENTIALS_PATH,
      // The sealed-secret layer words KBS failures itself ("get resource failed: <reason>").
      getResource: async (uri) => {
        try {
          return await ctx.getResource(uri);
        } catch (e) {
          throw e instanceof GetResourceFailed ? new Error(e.reason, { cause: e }) : e;
        }
      },
    });
    ctx.logger?.info({ kid: about.kid, resource: about.resource }, 'sealed secret unsealed');
    return plaintext;
  } catch (cause) {
    const failure = new UnsealSecretFailed(messageOf(cause), { cause });
    ctx.logger?.error(
      { kid: about.kid, resource: about.resource, err: failure.reason },
      'UnsealSecret failed',
    );
    throw failure;
  }
}
