// Helpers for this package's tests (not exported from index.ts): upstream fixtures, temporary
// folders, a real in-process KBS, a fake attestation agent and a small data hub serving UnsealSecret.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SampleAttester } from '@broker/attester';
import { vector } from '@broker/cli/testing';
import {
  ATTESTATION_AGENT_SERVICE,
  GetTokenRequestCodec,
  GetTokenResponseCodec,
  registerDataHubServices,
} from '@broker/guest-api';
import { parseKbsConfigText, type RunningKbs, startKbs } from '@broker/kbs';
import { ALLOW_ALL_RESOURCE_POLICY, KbsAdminClient, KbsClient } from '@broker/kbs-client';
import { Code, serverMethod, TtrpcError, TtrpcServer } from '@broker/ttrpc';
import pino from 'pino';
import type { JsonMap } from '../json.js';
import { unsealSecret } from '../unseal.js';

export const FIXTURES = vector('guest-components/sealed-secret');

export function fixture(name: string): Promise<Buffer> {
  return readFile(join(FIXTURES, name));
}

export async function fixtureJson(name: string): Promise<JsonMap> {
  return JSON.parse((await fixture(name)).toString('utf8')) as JsonMap;
}

export async function tempDir(
  prefix = 'sealed-test-',
): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

export interface TestKbs {
  readonly url: string;
  setResource(path: string, value: string | Uint8Array): Promise<void>;
  close(): Promise<void>;
}

/** A KBS on 127.0.0.1 over HTTP with the allow-all resource policy. */
export async function startTestKbs(): Promise<TestKbs> {
  const toml =
    '[http_server]\nsockets = ["127.0.0.1:0"]\ninsecure_http = true\n' +
    '[attestation_token]\ninsecure_header_jwk = true\n' +
    '[admin]\nauthorization_mode = "InsecureAllowAll"\n[[plugins]]\nname = "resource"\n';
  const kbs: RunningKbs = await startKbs(parseKbsConfigText(toml), { logger: pino({ level: 'silent' }) });
  const url = kbs.urls[0] as string;
  const admin = new KbsAdminClient({ url, adminToken: null, logger: { warn() {} } });
  await admin.setResourcePolicy(ALLOW_ALL_RESOURCE_POLICY);
  return {
    url,
    setResource: (path, value) => admin.setResource(path, value),
    close: () => kbs.close(),
  };
}

/** An attestation agent answering `GetToken("kbs")` with a real token from `kbsUrl` (sample attester). */
export async function startFakeAa(
  path: string,
  kbsUrl: string,
): Promise<{ calls: () => number; close(): Promise<void> }> {
  const server = new TtrpcServer();
  let calls = 0;
  server.register(ATTESTATION_AGENT_SERVICE, {
    GetToken: serverMethod(GetTokenRequestCodec, GetTokenResponseCodec, async (req) => {
      calls++;
      if (req.TokenType !== 'kbs') throw new TtrpcError(Code.INTERNAL, 'unknown token type');
      const client = new KbsClient({ url: kbsUrl, attester: new SampleAttester() });
      try {
        const { token, teeKeyPair } = await client.getToken();
        return { Token: Buffer.from(JSON.stringify({ token, tee_keypair: teeKeyPair.toPem() })) };
      } finally {
        client.close();
      }
    }),
  });
  await server.listen({ path });
  return { calls: () => calls, close: () => server.close({ graceMs: 0 }) };
}

/**
 * A data hub serving only `UnsealSecret`, with resources from a map: the
 * library's unsealing behind a real ttrpc socket. `fail` makes every call fail
 * as a hub whose attestation failed.
 */
export async function startFakeHub(
  path: string,
  resources: Map<string, Uint8Array>,
  options: { signingKeyDir?: string; skipVerification?: boolean } = {},
): Promise<{ calls: string[]; fail: boolean; close(): Promise<void> }> {
  const server = new TtrpcServer();
  const state = {
    calls: [] as string[],
    fail: false,
    close: () => server.close({ graceMs: 0 }),
  };
  registerDataHubServices(server, {
    async unsealSecret(secret) {
      state.calls.push(Buffer.from(secret).toString('utf8'));
      if (state.fail) throw new Error('Unseal Secret failed: attestation failed');
      return unsealSecret(secret, {
        ...options,
        getResource: async (uri) => {
          const value = resources.get(uri);
          if (value === undefined) throw new Error(`KBS resource not found: ${uri}`);
          return value;
        },
      });
    },
  });
  await server.listen({ path });
  return state;
}
