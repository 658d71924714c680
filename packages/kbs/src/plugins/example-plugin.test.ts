import { plugin } from '@broker/trustee-protos';
import { credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_EXAMPLE_ENTRIES, type RunningExamplePlugin, startExamplePlugin } from './example-plugin.js';

function handle(
  client: plugin.KbsPluginClient,
  req: Partial<plugin.PluginRequest>,
): Promise<plugin.PluginResponse> {
  const full = { body: Buffer.alloc(0), query: {}, path: [], method: 'GET', ...req };
  return new Promise((resolve, reject) =>
    client.handle(full, new Metadata(), { deadline: Date.now() + 10_000 }, (e, r) =>
      e ? reject(e) : resolve(r),
    ),
  );
}

describe('example plugin (store mode)', () => {
  let server: RunningExamplePlugin;
  let client: plugin.KbsPluginClient;
  beforeAll(async () => {
    server = await startExamplePlugin({ address: '127.0.0.1:0', store: true, encryptGet: true });
    client = new plugin.KbsPluginClient(`127.0.0.1:${server.port}`, credentials.createInsecure());
  });
  afterAll(async () => {
    client.close();
    await server.close();
  });

  it('stores by path, echoes unknown paths, refuses other methods', async () => {
    await handle(client, { method: 'POST', path: ['a', 'b'], body: Buffer.from('v') });
    expect((await handle(client, { path: ['a', 'b'] })).body.toString()).toBe('v');
    expect((await handle(client, { path: ['c'], query: { k: 'v' } })).body.toString()).toBe(
      'Echo: method=GET, path=["c"], query={"k": "v"}, body_len=0',
    );
    const e = (await handle(client, { method: 'PATCH' }).catch((x: unknown) => x)) as ServiceError;
    expect(e.details).toBe('method not supported: PATCH');
  });

  it(`keeps at most ${MAX_EXAMPLE_ENTRIES} paths; overwriting an existing one still works when full`, async () => {
    for (let i = 0; i < MAX_EXAMPLE_ENTRIES; i++) {
      await handle(client, { method: 'POST', path: ['fill', String(i)], body: Buffer.from('x') }).catch(
        () => {},
      );
    }
    const e = (await handle(client, { method: 'POST', path: ['one', 'more'] }).catch(
      (x: unknown) => x,
    )) as ServiceError;
    expect(e.details).toBe('the example plugin store is full');
    await handle(client, { method: 'POST', path: ['a', 'b'], body: Buffer.from('w') });
    expect((await handle(client, { path: ['a', 'b'] })).body.toString()).toBe('w');
  });
});
