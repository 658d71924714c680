import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Code, TtrpcClient, TtrpcError, TtrpcServer } from '@broker/ttrpc';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  AA_ERROR_PREFIX,
  ATTESTATION_AGENT_SERVICE,
  AttestationAgentClient,
  type AttestationAgentServiceImpl,
  DEFAULT_ATTESTATION_AGENT_SOCKET,
  DEFAULT_ATTESTATION_AGENT_SOCKET_PATH,
  decodeKbsTokenReply,
  ExtendRuntimeMeasurementRequestCodec,
  ExtendRuntimeMeasurementResponseCodec,
  encodeKbsTokenReply,
  GetAdditionalTeesResponseCodec,
  GetEvidenceRequestCodec,
  GetTeeTypeResponseCodec,
  GetTokenRequestCodec,
  InvalidKbsTokenReply,
  RuntimeMeasurementResult,
  registerAttestationAgentService,
} from './index.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('wire encoding (field names and numbers of upstream attestation-agent.proto)', () => {
  it('encodes requests with upstream field numbers', () => {
    expect(hex(GetEvidenceRequestCodec.encode({ RuntimeData: Buffer.from('ab') }))).toBe('0a026162');
    expect(hex(GetTokenRequestCodec.encode({ TokenType: 'kbs' }))).toBe('0a036b6273');
    expect(hex(GetTeeTypeResponseCodec.encode({ tee: 'tdx' }))).toBe('0a03746478');
    expect(hex(GetAdditionalTeesResponseCodec.encode({ additional_tees: ['a', 'bc'] }))).toBe(
      '0a01610a026263',
    );
    expect(hex(ExtendRuntimeMeasurementResponseCodec.encode({ Result: 2 }))).toBe('0802');
  });

  it('keeps the proto3 optional RegisterIndex absent unless set, and 64-bit when set', () => {
    const base = { Domain: 'd', Operation: 'o', Content: 'c' };
    const without = ExtendRuntimeMeasurementRequestCodec.encode(base);
    expect(hex(without)).toBe('0a016412016f1a0163');
    expect('RegisterIndex' in ExtendRuntimeMeasurementRequestCodec.decode(without)).toBe(false);
    const zero = ExtendRuntimeMeasurementRequestCodec.encode({ ...base, RegisterIndex: 0 });
    // Explicit presence: index 0 is sent, unlike a plain proto3 scalar.
    expect(hex(zero)).toBe('0a016412016f1a01632000');
    expect(ExtendRuntimeMeasurementRequestCodec.decode(zero).RegisterIndex).toBe(0n);
    const big = ExtendRuntimeMeasurementRequestCodec.encode({ ...base, RegisterIndex: 2n ** 64n - 1n });
    expect(ExtendRuntimeMeasurementRequestCodec.decode(big).RegisterIndex).toBe(2n ** 64n - 1n);
  });

  it('uses the default socket of upstream ttrpc-aa', () => {
    expect(DEFAULT_ATTESTATION_AGENT_SOCKET_PATH).toBe(
      '/run/confidential-containers/attestation-agent/attestation-agent.sock',
    );
    expect(DEFAULT_ATTESTATION_AGENT_SOCKET).toBe(`unix://${DEFAULT_ATTESTATION_AGENT_SOCKET_PATH}`);
  });
});

describe('KBS token reply', () => {
  it('round-trips with upstream member order', () => {
    const bytes = encodeKbsTokenReply({ token: 'a.b.c', tee_keypair: 'PEM' });
    expect(Buffer.from(bytes).toString()).toBe('{"token":"a.b.c","tee_keypair":"PEM"}');
    expect(decodeKbsTokenReply(bytes)).toEqual({ token: 'a.b.c', tee_keypair: 'PEM' });
  });

  it('ignores other members, as serde does', () => {
    const bytes = Buffer.from('{"tee_keypair":"k","extra":1,"token":"t"}');
    expect(decodeKbsTokenReply(bytes)).toEqual({ token: 't', tee_keypair: 'k' });
  });

  it.each([
    ['empty', ''],
    ['not JSON', '{"token":'],
    ['an array', '["t","k"]'],
    ['null', 'null'],
    ['a number token', '{"token":1,"tee_keypair":"k"}'],
    ['no key', '{"token":"t"}'],
    ['a null key', '{"token":"t","tee_keypair":null}'],
  ])('rejects %s', (_name, text) => {
    expect(() => decodeKbsTokenReply(Buffer.from(text))).toThrow(InvalidKbsTokenReply);
  });

  it('rejects invalid UTF-8', () => {
    expect(() => decodeKbsTokenReply(Uint8Array.of(0x7b, 0xff, 0x7d))).toThrow(InvalidKbsTokenReply);
  });
});

describe('client and registered service over a unix socket', () => {
  let dir: string;
  let server: TtrpcServer;
  let client: AttestationAgentClient;
  let seen: unknown[];

  async function start(impl: AttestationAgentServiceImpl): Promise<void> {
    server = new TtrpcServer();
    registerAttestationAgentService(server, impl);
    const path = join(dir, 'aa.sock');
    await server.listen({ path });
    client = await AttestationAgentClient.connect(`unix://${path}`);
  }

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'guest-api-aa-'));
    seen = [];
  });
  afterEach(async () => {
    client?.close();
    await server?.close({ graceMs: 100 });
    await rm(dir, { recursive: true, force: true });
  });

  const impl: AttestationAgentServiceImpl = {
    async getEvidence(runtimeData) {
      seen.push(['evidence', Buffer.from(runtimeData).toString()]);
      return Buffer.from(`{"report_data":"${Buffer.from(runtimeData).toString('base64')}"}`);
    },
    async getAdditionalEvidence() {
      return new Uint8Array(0);
    },
    async getToken(tokenType) {
      if (tokenType !== 'kbs') throw new Error(`Unsupported token type ${JSON.stringify(tokenType)}`);
      return encodeKbsTokenReply({ token: 'h.p.s', tee_keypair: '-----BEGIN PRIVATE KEY-----' });
    },
    async extendRuntimeMeasurement(req) {
      seen.push(['extend', req.Domain, req.Operation, req.Content, req.RegisterIndex]);
      return RuntimeMeasurementResult.NOT_ENABLED;
    },
    async getTeeType() {
      return 'sample';
    },
    async getAdditionalTees() {
      return ['sampledevice'];
    },
  };

  it('serves every method the implementation has', async () => {
    await start(impl);
    expect(Buffer.from(await client.getEvidence(Buffer.from('nonce'))).toString()).toBe(
      `{"report_data":"${Buffer.from('nonce').toString('base64')}"}`,
    );
    expect((await client.getAdditionalEvidence(Buffer.from('x'))).length).toBe(0);
    expect(await client.getKbsToken()).toEqual({
      token: 'h.p.s',
      tee_keypair: '-----BEGIN PRIVATE KEY-----',
    });
    expect(await client.getTeeType()).toBe('sample');
    expect(await client.getAdditionalTees()).toEqual(['sampledevice']);
    expect(
      await client.extendRuntimeMeasurement({ domain: 'd', operation: 'o', content: 'c', registerIndex: 17 }),
    ).toBe(RuntimeMeasurementResult.NOT_ENABLED);
    await client.extendRuntimeMeasurement({ domain: 'd', operation: 'o', content: 'c' });
    expect(seen).toEqual([
      ['evidence', 'nonce'],
      ['extend', 'd', 'o', 'c', 17n],
      ['extend', 'd', 'o', 'c', undefined],
    ]);
  });

  it('turns a plain error into INTERNAL with the upstream prefix and wording', async () => {
    await start(impl);
    const err = await client.getToken('foo').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TtrpcError);
    expect((err as TtrpcError).code).toBe(Code.INTERNAL);
    expect((err as TtrpcError).message).toBe(
      `${AA_ERROR_PREFIX}AA-KBC get token failed: Unsupported token type "foo"`,
    );
  });

  it('passes a TtrpcError through unchanged', async () => {
    await start({
      async getEvidence() {
        throw new TtrpcError(Code.INVALID_ARGUMENT, 'too big');
      },
    });
    await expect(client.getEvidence(Buffer.alloc(1))).rejects.toMatchObject({
      code: Code.INVALID_ARGUMENT,
      message: 'too big',
    });
  });

  it('answers a method the implementation lacks as upstream generated code does (BindInitData)', async () => {
    await start(impl);
    await expect(client.bindInitData(Buffer.alloc(32))).rejects.toMatchObject({
      code: Code.NOT_FOUND,
      message: `/${ATTESTATION_AGENT_SERVICE}/BindInitData is not supported`,
    });
  });

  it('answers garbage request bytes with the ttrpc unmarshal error, and keeps serving', async () => {
    await start(impl);
    const path = join(dir, 'aa.sock');
    const raw = await TtrpcClient.connect({ path });
    try {
      const err = await raw
        .call(ATTESTATION_AGENT_SERVICE, 'GetToken', Uint8Array.of(0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f))
        .catch((e: unknown) => e);
      expect(err).toMatchObject({ code: Code.INTERNAL });
      expect((err as Error).message).toMatch(/error unmarshalling payload/);
    } finally {
      raw.close();
    }
    expect(await client.getTeeType()).toBe('sample');
  });

  it('applies the default call deadline', async () => {
    await start({
      getTeeType: () => new Promise<string>(() => {}),
    });
    const slow = new AttestationAgentClient(await TtrpcClient.connect({ path: join(dir, 'aa.sock') }), {
      timeoutMs: 50,
    });
    try {
      await expect(slow.getTeeType()).rejects.toMatchObject({ code: Code.DEADLINE_EXCEEDED });
    } finally {
      slow.close();
    }
  });
});
