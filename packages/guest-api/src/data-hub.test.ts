import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Code, ProtoDecodeError, TtrpcClient, TtrpcError, TtrpcServer } from '@broker/ttrpc';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  CDH_ERROR_PREFIX,
  DataHubClient,
  type DataHubServices,
  DEFAULT_CDH_SOCKET,
  GET_RESOURCE_SERVICE,
  GetResourceRequestCodec,
  GetResourceResponseCodec,
  IMAGE_PULL_SERVICE,
  ImagePullRequestCodec,
  ImagePullResponseCodec,
  registerDataHubServices,
  SEALED_SECRET_SERVICE,
  SECURE_MOUNT_SERVICE,
  SecureMountRequestCodec,
  UnsealSecretInputCodec,
} from './data-hub.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('messages', () => {
  it('encode with upstream field numbers', () => {
    // field 1, wire type 2 (0x0a), length, bytes
    expect(hex(GetResourceRequestCodec.encode({ ResourcePath: 'kbs:///a/b/c' }))).toBe(
      `0a0c${Buffer.from('kbs:///a/b/c').toString('hex')}`,
    );
    expect(hex(GetResourceResponseCodec.encode({ Resource: new Uint8Array([1, 2]) }))).toBe('0a020102');
    expect(hex(UnsealSecretInputCodec.encode({ secret: new Uint8Array([0x73]) }))).toBe('0a0173');
    expect(hex(ImagePullRequestCodec.encode({ image_url: 'i', bundle_path: 'b' }))).toBe('0a0169120162');
    expect(hex(ImagePullResponseCodec.encode({ manifest_digest: 'd' }))).toBe('0a0164');
    // volume_type=1, options map entry=2 {key=1,value=2}, flags=3, mount_point=4
    expect(
      hex(
        SecureMountRequestCodec.encode({
          volume_type: 'v',
          options: { k: 'x' },
          flags: ['f'],
          mount_point: 'm',
        }),
      ),
    ).toBe('0a0176' + '1206' + '0a016b120178' + '1a0166' + '22016d');
  });

  it('decode fills proto3 defaults', () => {
    expect(GetResourceRequestCodec.decode(new Uint8Array())).toEqual({ ResourcePath: '' });
    expect(SecureMountRequestCodec.decode(new Uint8Array())).toEqual({
      volume_type: '',
      options: {},
      flags: [],
      mount_point: '',
    });
  });

  it('refuse garbage and truncated input', () => {
    expect(() => GetResourceRequestCodec.decode(Buffer.from('0a05616263', 'hex'))).toThrow(ProtoDecodeError);
    expect(() => GetResourceRequestCodec.decode(Buffer.from('ffffffffffffffffffff01', 'hex'))).toThrow(
      ProtoDecodeError,
    );
  });

  it('default socket is upstream’s', () => {
    expect(DEFAULT_CDH_SOCKET).toBe('unix:///run/confidential-containers/cdh.sock');
  });
});

describe('client and server', () => {
  let dir: string;
  let server: TtrpcServer;
  let socket: string;
  const clients: DataHubClient[] = [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'guest-api-cdh-'));
    socket = join(dir, 'cdh.sock');
    server = new TtrpcServer();
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    await server.close({ graceMs: 0 });
    await rm(dir, { recursive: true, force: true });
  });

  async function serve(impl: DataHubServices): Promise<DataHubClient> {
    registerDataHubServices(server, impl);
    await server.listen({ path: socket });
    const c = await DataHubClient.connect(`unix://${socket}`, { timeoutMs: 5000 });
    clients.push(c);
    return c;
  }

  it('round-trips every implemented call', async () => {
    const seen: unknown[] = [];
    const client = await serve({
      async getResource(uri) {
        seen.push(uri);
        return Buffer.from(`res:${uri}`);
      },
      async unsealSecret(secret) {
        seen.push(Buffer.from(secret).toString());
        return Buffer.from('plain');
      },
      async secureMount(req) {
        seen.push(req);
      },
      async pullImage(url, bundle) {
        seen.push([url, bundle]);
        return 'sha256:abc';
      },
    });
    expect(Buffer.from(await client.getResource('kbs:///a/b/c')).toString()).toBe('res:kbs:///a/b/c');
    expect(Buffer.from(await client.unsealSecret('sealed.x')).toString()).toBe('plain');
    await client.secureMount({
      volume_type: 'BlockDevice',
      options: { a: 'b' },
      flags: [],
      mount_point: '/m',
    });
    expect(await client.pullImage('docker.io/x', '/run/b')).toBe('sha256:abc');
    expect(seen).toEqual([
      'kbs:///a/b/c',
      'sealed.x',
      { volume_type: 'BlockDevice', options: { a: 'b' }, flags: [], mount_point: '/m' },
      ['docker.io/x', '/run/b'],
    ]);
  });

  it('registers only implemented services; the others answer UNIMPLEMENTED', async () => {
    const names = registerDataHubServices(server, { getResource: async () => new Uint8Array([1]) });
    expect(names).toEqual([GET_RESOURCE_SERVICE]);
    await server.listen({ path: socket });
    const client = await DataHubClient.connect(socket);
    clients.push(client);
    for (const call of [
      () => client.unsealSecret('sealed.x'),
      () => client.pullImage('a', 'b'),
      () => client.secureMount({ volume_type: '', options: {}, flags: [], mount_point: '' }),
    ]) {
      const err = await call().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TtrpcError);
      expect((err as TtrpcError).code).toBe(Code.UNIMPLEMENTED);
    }
    expect([...(await client.getResource('kbs:///a/b/c'))]).toEqual([1]);
  });

  it('reports plain errors as INTERNAL with the CDH prefix, and passes TtrpcErrors through', async () => {
    const client = await serve({
      async getResource(uri) {
        if (uri === 'plain') throw new Error('Get Resource failed');
        throw new TtrpcError(Code.INVALID_ARGUMENT, 'custom');
      },
    });
    const plain = (await client.getResource('plain').catch((e: unknown) => e)) as TtrpcError;
    expect(plain.code).toBe(Code.INTERNAL);
    expect(plain.message).toBe(`${CDH_ERROR_PREFIX}Get Resource failed`);
    expect(plain.message).toBe('[CDH] [ERROR]: Get Resource failed');
    const custom = (await client.getResource('other').catch((e: unknown) => e)) as TtrpcError;
    expect(custom.code).toBe(Code.INVALID_ARGUMENT);
    expect(custom.message).toBe('custom');
  });

  it('answers a garbage request payload with INTERNAL unmarshalling, never calling the hub', async () => {
    let calls = 0;
    registerDataHubServices(server, {
      async getResource() {
        calls++;
        return new Uint8Array();
      },
    });
    await server.listen({ path: socket });
    const raw = await TtrpcClient.connect({ path: socket });
    try {
      const err = (await raw
        .call(GET_RESOURCE_SERVICE, 'GetResource', Buffer.from('0aff', 'hex'))
        .catch((e: unknown) => e)) as TtrpcError;
      expect(err.code).toBe(Code.INTERNAL);
      expect(err.message).toMatch(/^ttrpc: error unmarshalling payload: /);
      expect(calls).toBe(0);
    } finally {
      raw.close();
    }
  });

  it('applies the default deadline to calls', async () => {
    registerDataHubServices(server, {
      pullImage: (_u, _b, ctx) =>
        new Promise((_resolve, reject) =>
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)),
        ),
    });
    await server.listen({ path: socket });
    const client = await DataHubClient.connect(socket, { timeoutMs: 50 });
    clients.push(client);
    const err = (await client.pullImage('a', 'b').catch((e: unknown) => e)) as TtrpcError;
    expect(err.code).toBe(Code.DEADLINE_EXCEEDED);
  });

  it('uses the method paths upstream clients call', async () => {
    const client = await serve({
      getResource: async () => new Uint8Array([7]),
      unsealSecret: async () => new Uint8Array([8]),
      pullImage: async () => 'd',
      secureMount: async () => {},
    });
    expect(client.closed).toBe(false);
    const raw = await TtrpcClient.connect({ path: socket });
    try {
      const res = await raw.call(
        'api.GetResourceService',
        'GetResource',
        GetResourceRequestCodec.encode({ ResourcePath: 'x' }),
      );
      expect([...GetResourceResponseCodec.decode(res).Resource]).toEqual([7]);
      await raw.call('api.SealedSecretService', 'UnsealSecret', new Uint8Array());
      await raw.call('api.ImagePullService', 'PullImage', new Uint8Array());
      await raw.call('api.SecureMountService', 'SecureMount', new Uint8Array());
    } finally {
      raw.close();
    }
    expect([SEALED_SECRET_SERVICE, SECURE_MOUNT_SERVICE, IMAGE_PULL_SERVICE]).toEqual([
      'api.SealedSecretService',
      'api.SecureMountService',
      'api.ImagePullService',
    ]);
  });
});
