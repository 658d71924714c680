import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryStorage } from '@broker/kv-storage';
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RvpsClient, RvpsClientError } from './client.js';
import { createRvps } from './rvps.js';
import { MAX_RVPS_REQUEST_BYTES, type RunningRvpsServer, startRvpsServer } from './server.js';
import { openRvpsStorage } from './storage.js';
import { sampleMessage } from './testing/index.js';

describe('rvps gRPC service', () => {
  let server: RunningRvpsServer;
  let client: RvpsClient;
  const storage = new MemoryStorage();

  beforeAll(async () => {
    server = await startRvpsServer({ rvps: createRvps(storage), address: '127.0.0.1:0' });
    client = new RvpsClient(`http://127.0.0.1:${server.port}`);
  });
  afterAll(async () => {
    client.close();
    await server.close();
  });

  it('registers a sample message and answers the query with the value as JSON', async () => {
    await client.register(sampleMessage({ 'measurement.sample.svn': ['1', '2'] }));
    expect(await client.query('measurement.sample.svn')).toBe('["1","2"]');
  });

  it('answers an unknown id (and the AS health check id) with the result absent, not an error', async () => {
    expect(await client.query('never-registered')).toBeUndefined();
    expect(await client.query('__healthcheck__')).toBeUndefined();
    // A name the store could never hold is unknown too, not a failure.
    expect(await client.query('../../etc/passwd')).toBeUndefined();
  });

  it('refuses a message of another version with ABORTED and trustee prefix', async () => {
    const err = await client.register(sampleMessage({ a: 1 }, '0.2.0')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RvpsClientError);
    expect((err as RvpsClientError).code).toBe(status.ABORTED);
    expect((err as Error).message).toMatch(/^register reference value: Register reference value: .*version/);
    expect(await client.query('a')).toBeUndefined();
  });

  it.each([
    ['not JSON', 'not json {'],
    ['bad base64 payload', JSON.stringify({ version: '0.1.0', type: 'sample', payload: '***' })],
    ['unsupported type', JSON.stringify({ version: '0.1.0', type: 'swid', payload: 'e30=' })],
    ['empty', ''],
  ])('refuses %s with ABORTED', async (_what, message) => {
    const err = await client.register(message).catch((e: unknown) => e);
    expect((err as RvpsClientError).code).toBe(status.ABORTED);
  });

  it('refuses a request over the stated size limit with RESOURCE_EXHAUSTED, and keeps serving', async () => {
    const err = await client.register('x'.repeat(MAX_RVPS_REQUEST_BYTES + 1)).catch((e: unknown) => e);
    expect((err as RvpsClientError).code).toBe(status.RESOURCE_EXHAUSTED);
    expect(await client.query('measurement.sample.svn')).toBe('["1","2"]');
  });
});

describe('rvps storage', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rvps-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps LocalJson values across restarts in the reference_value namespace', async () => {
    const config = { storageType: 'LocalJson' as const, localJsonDir: dir, warnings: [] };
    let storage = await openRvpsStorage(config);
    let server = await startRvpsServer({ rvps: createRvps(storage), address: '127.0.0.1:0' });
    let client = new RvpsClient(`http://127.0.0.1:${server.port}`);
    await client.register(sampleMessage({ kept: { x: 1 } }));
    client.close();
    await server.close();
    await storage.close();
    expect(readdirSync(dir)).toContain('reference_value');

    storage = await openRvpsStorage(config);
    server = await startRvpsServer({ rvps: createRvps(storage), address: '127.0.0.1:0' });
    client = new RvpsClient(`http://127.0.0.1:${server.port}`);
    expect(await client.query('kept')).toBe('{"x":1}');
    client.close();
    await server.close();
    await storage.close();
  });
});

describe('rvps malformed gRPC messages', () => {
  it('answers bytes that are not a protobuf message with a status, and keeps serving', async () => {
    const { makeGenericClientConstructor, credentials } = await import('@grpc/grpc-js');
    const server = await startRvpsServer({ rvps: createRvps(new MemoryStorage()), address: '127.0.0.1:0' });
    const Raw = makeGenericClientConstructor(
      {
        register: {
          path: '/reference.ReferenceValueProviderService/RegisterReferenceValue',
          requestStream: false,
          responseStream: false,
          requestSerialize: (b: Buffer) => b,
          requestDeserialize: (b: Buffer) => b,
          responseSerialize: (b: Buffer) => b,
          responseDeserialize: (b: Buffer) => b,
        },
      },
      'Raw',
    );
    const raw = new Raw(`127.0.0.1:${server.port}`, credentials.createInsecure()) as unknown as {
      register(req: Buffer, cb: (e: { code: number } | null) => void): void;
      close(): void;
    };
    // Field 1 declared as a 100-byte string with 2 bytes present; then an invalid wire type.
    for (const bytes of [Buffer.from([0x0a, 0x64, 0x41, 0x42]), Buffer.from([0x0f, 0xff, 0xff])]) {
      const code = await new Promise<number | undefined>((resolve) =>
        raw.register(bytes, (e) => resolve(e?.code)),
      );
      expect(code).toBe(status.INTERNAL);
    }
    raw.close();
    const client = new RvpsClient(`http://127.0.0.1:${server.port}`);
    expect(await client.query('x')).toBeUndefined();
    client.close();
    await server.close();
  });
});
