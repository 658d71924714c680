// The hub's keyprovider.KeyProviderService over a real ttrpc socket: UnWrapKey answers ocicrypt's
// key-provider JSON for an attestation-agent packet (annotation as a number array or base64) with
// optsdata as a number array, refuses malformed requests and unreleased KEKs with upstream's texts,
// and WrapKey answers as upstream's ttrpc server does.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { attestationAgentWrapper } from '@broker/image';
import { Code, TtrpcClient, TtrpcError, TtrpcServer } from '@broker/ttrpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GetResourceFailed } from '../errors.js';
import {
  KEY_PROVIDER_SERVICE,
  KeyWrapProtocolInputCodec,
  KeyWrapProtocolOutputCodec,
  PARSE_FAILED,
  registerKeyProviderService,
  UNWRAP_FAILED,
} from './keyprovider.js';

const KID = 'kbs:///default/image-kek/app';
/** A KEK served by a KBS plugin (guest-components: the kid is any resource URI, `kbs+<plugin>://` too). */
const PLUGIN_KID = 'kbs+pkcs11:///default/image-kek/app';
const kek = randomBytes(32);
const OPTS = Buffer.from('{"symkey":"x","digest":"","cipheroptions":{"nonce":"y"}}');
let dir: string;
let server: TtrpcServer;
let client: TtrpcClient;
const asked: string[] = [];
const errors: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'keyprovider-'));
  server = new TtrpcServer();
  registerKeyProviderService(
    server,
    async (kid) => {
      asked.push(kid);
      if (kid === KID || kid === PLUGIN_KID) return kek;
      throw new GetResourceFailed('request unauthorized (PolicyDeny: Access denied by policy)');
    },
    (reason) => errors.push(reason),
  );
  await server.listen({ path: join(dir, 'cdh.sock') });
  client = await TtrpcClient.connect({ path: join(dir, 'cdh.sock') });
});

afterAll(async () => {
  client?.close();
  await server?.close();
  await rm(dir, { recursive: true, force: true });
});

async function call(method: string, json: unknown): Promise<unknown> {
  const bytes = await client.call(
    KEY_PROVIDER_SERVICE,
    method,
    KeyWrapProtocolInputCodec.encode({ KeyProviderKeyWrapProtocolInput: Buffer.from(JSON.stringify(json)) }),
  );
  const out = KeyWrapProtocolOutputCodec.decode(bytes).KeyProviderKeyWrapProtocolOutput;
  return JSON.parse(Buffer.from(out).toString('utf8'));
}

async function failure(method: string, json: unknown): Promise<TtrpcError> {
  const e = await call(method, json).then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(TtrpcError);
  return e as TtrpcError;
}

/** An UnWrapKey request as ocicrypt writes it. */
function unwrapRequest(annotation: unknown): unknown {
  return {
    op: 'keyunwrap',
    keywrapparams: {},
    keyunwrapparams: { dc: { Parameters: {} }, annotation },
  };
}

describe('keyprovider.KeyProviderService', () => {
  it('UnWrapKey opens an attestation-agent packet with the KEK fetched by kid', async () => {
    const packet = Buffer.from(await attestationAgentWrapper(KID, kek).wrap(OPTS));
    for (const annotation of [[...packet], packet.toString('base64')]) {
      const out = (await call('UnWrapKey', unwrapRequest(annotation))) as {
        keyunwrapresults: { optsdata: number[] };
      };
      expect(Buffer.from(out.keyunwrapresults.optsdata)).toEqual(OPTS);
    }
    expect(asked).toEqual([KID, KID]);
  });

  it('UnWrapKey asks for a kbs+<plugin>:// kid as written, so the hub fetches it from the plugin', async () => {
    asked.length = 0;
    const packet = Buffer.from(await attestationAgentWrapper(PLUGIN_KID, kek).wrap(OPTS));
    const out = (await call('UnWrapKey', unwrapRequest([...packet]))) as {
      keyunwrapresults: { optsdata: number[] };
    };
    expect(Buffer.from(out.keyunwrapresults.optsdata)).toEqual(OPTS);
    expect(asked).toEqual([PLUGIN_KID]);
  });

  it('refuses malformed requests with the parse error', async () => {
    const packet = [...(await attestationAgentWrapper(KID, kek).wrap(OPTS))];
    const cases: [unknown, string][] = [
      [{ op: 'keyunwrap', keyunwrapparams: { annotation: packet } }, 'missing field `keywrapparams`'],
      [{ op: 'keyunwrap', keywrapparams: {}, keyunwrapparams: null }, '`keyunwrapparams` is not an object'],
      [unwrapRequest([300]), '`keyunwrapparams.annotation` is not bytes'],
      [[1], 'not a JSON object'],
    ];
    for (const [request, reason] of cases) {
      const e = await failure('UnWrapKey', request);
      expect(e.code).toBe(Code.INTERNAL);
      expect(e.message).toBe(`${PARSE_FAILED}: ${reason}`);
    }
  });

  it('refuses a packet whose KEK the KBS does not release, and a hostile packet', async () => {
    const denied = Buffer.from(
      await attestationAgentWrapper('kbs:///default/denied-kek/app', kek).wrap(OPTS),
    );
    const e = await failure('UnWrapKey', unwrapRequest([...denied]));
    expect(e.code).toBe(Code.INTERNAL);
    expect(e.message).toBe(
      `${UNWRAP_FAILED}: Get resource failed: request unauthorized (PolicyDeny: Access denied by policy)`,
    );
    const hostile = Buffer.from(
      JSON.stringify({ kid: '/r/t/g', wrapped_data: [], iv: [], wrap_type: 'A256GCM' }),
    );
    const h = await failure('UnWrapKey', unwrapRequest([...hostile]));
    expect(h.message).toBe(
      `${UNWRAP_FAILED}: malwared AnnotationPacket format: kid "/r/t/g" is not a kbs:///<repository>/<type>/<tag> resource URI`,
    );
    expect(errors.at(-1)).toContain('malwared AnnotationPacket format');
  });

  it('WrapKey is not supported, as upstream answers over ttrpc', async () => {
    const e = await failure('WrapKey', { op: 'keywrap', keywrapparams: {}, keyunwrapparams: {} });
    expect(e.code).toBe(Code.NOT_FOUND);
    expect(e.message).toBe('/keyprovider.KeyProviderService/WrapKey is not supported');
  });
});
