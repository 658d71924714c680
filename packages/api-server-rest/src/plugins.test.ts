// The opt-in `/cdh/plugin/<plugin>/<path>?<query>` route: off by default, only the allowed plugins,
// raw path and query handed to the data hub, and every hostile form refused before or by the hub.
import { describe, expect, it } from 'vitest';
import { checkPluginNames, MAX_PLUGIN_URI_LENGTH, PluginListError, parsePluginList } from './plugins.js';
import { type Feature, type Reply, Router } from './router.js';
import { startApiServer } from './server.js';
import { FakeDataHub } from './testing/helpers.js';

const text = (r: Reply) => (typeof r.body === 'string' ? r.body : new TextDecoder().decode(r.body));

function setup(plugins?: readonly string[], feature: Feature = 'resource') {
  const cdh = new FakeDataHub({
    'kbs+nebula-ca:///credential?name=pod-1&ip=10.9.0.2/24': 'credential-bytes',
    'kbs+external:///echo/app/config': 'echo-bytes',
    'kbs:///default/key/1': 'secret-bytes',
  });
  const router = new Router({ feature, version: 'test', resource: cdh, plugins });
  const get = (target: string, method = 'GET') =>
    router.route({ method, target, peerAddress: '127.0.0.1', readBody: async () => new Uint8Array(0) });
  return { cdh, get };
}

describe('/cdh/plugin without the opt-in (the default)', () => {
  it('answers 403 naming the flag that enables the plugin, and never calls the data hub', async () => {
    const { cdh, get } = setup();
    const r = await get('/cdh/plugin/nebula-ca/credential?name=pod-1&ip=10.9.0.2/24');
    expect([r.status, text(r)]).toEqual([
      403,
      'KBS plugin "nebula-ca" is not enabled on this API: start api-server-rest with --plugins nebula-ca to allow it',
    ]);
    expect(cdh.calls).toEqual([]);
  });

  it('leaves /cdh/resource as upstream: kbs:/// only, query dropped', async () => {
    const { cdh, get } = setup();
    const r = await get('/cdh/resource/default/key/1?x=1');
    expect([r.status, text(r)]).toEqual([200, 'secret-bytes']);
    expect(cdh.calls).toEqual(['kbs:///default/key/1']);
  });
});

describe('/cdh/plugin with allowed plugins', () => {
  it('asks the data hub for kbs+<plugin>:///<path>?<query>, query passed on raw', async () => {
    const { cdh, get } = setup(['nebula-ca', 'external']);
    const r = await get('/cdh/plugin/nebula-ca/credential?name=pod-1&ip=10.9.0.2/24');
    expect([r.status, r.contentType, text(r), r.route]).toEqual([
      200,
      'application/octet-stream',
      'credential-bytes',
      'cdh/plugin',
    ]);
    const e = await get('/cdh/plugin/external/echo/app/config');
    expect([e.status, text(e)]).toEqual([200, 'echo-bytes']);
    await get('/cdh/plugin/external/echo/x?a=%2F+b&a=2');
    await get('/cdh/plugin/external/echo/x?');
    expect(cdh.calls).toEqual([
      'kbs+nebula-ca:///credential?name=pod-1&ip=10.9.0.2/24',
      'kbs+external:///echo/app/config',
      'kbs+external:///echo/x?a=%2F+b&a=2',
      'kbs+external:///echo/x?',
    ]);
  });

  it('answers 403 for a plugin not in the list, with how to enable it', async () => {
    const { cdh, get } = setup(['nebula-ca']);
    const r = await get('/cdh/plugin/external/echo/app/config');
    expect([r.status, text(r)]).toEqual([
      403,
      'KBS plugin "external" is not enabled on this API: start api-server-rest with --plugins external to allow it',
    ]);
    expect(cdh.calls).toEqual([]);
  });

  it.each([
    [
      'an encoded slash in the plugin name',
      '/cdh/plugin/nebula-ca%2Fcredential/x',
      '"nebula-ca%2Fcredential"',
    ],
    ['an encoded plugin name', '/cdh/plugin/nebula%2dca/credential', '"nebula%2dca"'],
    ['..', '/cdh/plugin/../resource/default/key/1', '".."'],
    ['an empty plugin name', '/cdh/plugin//credential', '""'],
    ['an upper-case name', '/cdh/plugin/Nebula-CA/credential', '"Nebula-CA"'],
  ])('answers 403 for %s, without calling the data hub', async (_why, target, shown) => {
    const { cdh, get } = setup(['nebula-ca']);
    const r = await get(target);
    expect([r.status, text(r)]).toEqual([403, `${shown} is not a KBS plugin name`]);
    expect(cdh.calls).toEqual([]);
  });

  it('sends resource readers to /cdh/resource', async () => {
    const { cdh, get } = setup(['nebula-ca']);
    const r = await get('/cdh/plugin/resource/default/key/1');
    expect([r.status, text(r)]).toEqual([
      404,
      'resource is not a plugin here: read resources at /cdh/resource/<path>',
    ]);
    expect(cdh.calls).toEqual([]);
  });

  it.each(['/cdh/plugin', '/cdh/plugin/', '/cdh/plugin/nebula-ca', '/cdh/plugin?x=1'])(
    '%s has no plugin path: URL NOT FOUND',
    async (target) => {
      const { cdh, get } = setup(['nebula-ca']);
      const r = await get(target);
      expect([r.status, text(r)]).toEqual([404, 'URL NOT FOUND']);
      expect(cdh.calls).toEqual([]);
    },
  );

  it.each(['POST', 'PUT', 'DELETE', 'HEAD', 'OPTIONS'])(
    'answers %s with 405: only a GET calls a plugin',
    async (method) => {
      const { cdh, get } = setup(['nebula-ca']);
      const r = await get('/cdh/plugin/nebula-ca/credential?name=pod-1&ip=10.9.0.2/24', method);
      expect([r.status, text(r)]).toEqual([405, 'Method Not Allowed']);
      expect(cdh.calls).toEqual([]);
    },
  );

  it('passes encoded slashes, .. and empty segments of the plugin path on raw, for the data hub to refuse', async () => {
    const { cdh, get } = setup(['nebula-ca']);
    cdh.failure = new Error('ttrpc request error: INTERNAL: [CDH] [ERROR]: Get Resource failed');
    for (const target of [
      '/cdh/plugin/nebula-ca/a%2Fb',
      '/cdh/plugin/nebula-ca/../../kbs/v0/resource/x',
      '/cdh/plugin/nebula-ca/%2e%2e/x',
      '/cdh/plugin/nebula-ca//x',
      '/cdh/plugin/nebula-ca/',
    ]) {
      const r = await get(target);
      expect([r.status, text(r)]).toEqual([500, cdh.failure.message]);
    }
    expect(cdh.calls).toEqual([
      'kbs+nebula-ca:///a%2Fb',
      'kbs+nebula-ca:///../../kbs/v0/resource/x',
      'kbs+nebula-ca:///%2e%2e/x',
      'kbs+nebula-ca:////x',
      'kbs+nebula-ca:///',
    ]);
  });

  it('refuses a URI longer than the data hub takes with its 500, before calling it', async () => {
    const { cdh, get } = setup(['nebula-ca']);
    const prefix = '/cdh/plugin/nebula-ca/credential?name=';
    const uriPrefix = 'kbs+nebula-ca:///credential?name=';
    const fits = `${prefix}${'a'.repeat(MAX_PLUGIN_URI_LENGTH - uriPrefix.length)}`;
    cdh.resources.set(
      `${uriPrefix}${'a'.repeat(MAX_PLUGIN_URI_LENGTH - uriPrefix.length)}`,
      new Uint8Array([1]),
    );
    expect((await get(fits)).status).toBe(200);
    const r = await get(`${fits}a`);
    expect([r.status, text(r)]).toEqual([500, 'KBS plugin URI is longer than 4096 characters']);
    const huge = await get(`${prefix}${'a'.repeat(1_000_000)}`);
    expect(huge.status).toBe(500);
    expect(cdh.calls).toHaveLength(1);
  });

  it('answers 500 with the data hub error for an allowed plugin the KBS does not have', async () => {
    const { get } = setup(['nosuch']);
    const r = await get('/cdh/plugin/nosuch/x');
    expect(r.status).toBe(500);
    expect(text(r)).toBe('ttrpc request error: INTERNAL: [CDH] [ERROR]: no kbs+nosuch:///x');
  });

  it('is behind the resource feature', async () => {
    const router = new Router({ feature: 'attestation', version: 'test', plugins: ['nebula-ca'] });
    const r = await router.route({
      method: 'GET',
      target: '/cdh/plugin/nebula-ca/credential',
      peerAddress: '127.0.0.1',
      readBody: async () => new Uint8Array(0),
    });
    expect([r.status, text(r)]).toEqual([404, 'Resource Feature Not Enabled']);
  });

  it('refuses a non-loopback peer before anything else', async () => {
    const { cdh } = setup(['nebula-ca']);
    const router = new Router({
      feature: 'resource',
      version: 'test',
      resource: cdh,
      plugins: ['nebula-ca'],
    });
    const r = await router.route({
      method: 'GET',
      target: '/cdh/plugin/nebula-ca/credential?name=pod-1&ip=10.9.0.2/24',
      peerAddress: '10.0.0.1',
      readBody: async () => new Uint8Array(0),
    });
    expect(r.status).toBe(403);
    expect(cdh.calls).toEqual([]);
  });
});

describe('the list of allowed plugins', () => {
  it('parses comma-separated names and drops repeats', () => {
    expect(parsePluginList('nebula-ca')).toEqual(['nebula-ca']);
    expect(parsePluginList('nebula-ca,external,nebula-ca,my.plugin-2')).toEqual([
      'nebula-ca',
      'external',
      'my.plugin-2',
    ]);
  });

  it.each([
    ['', /empty plugin name/],
    ['nebula-ca,', /empty plugin name/],
    [',nebula-ca', /empty plugin name/],
    ['nebula-ca,,external', /empty plugin name/],
    ['resource', /resources are always served at \/cdh\/resource/],
    ['nebula-ca,resource', /resources are always served at \/cdh\/resource/],
    ['Nebula-CA', /"Nebula-CA" is not a KBS plugin name/],
    ['nebula-ca, external', /" external" is not a KBS plugin name/],
    ['../x', /is not a KBS plugin name/],
    ['a/b', /is not a KBS plugin name/],
    ['*', /is not a KBS plugin name/],
    ['-x', /is not a KBS plugin name/],
    ['a'.repeat(65), /is not a KBS plugin name/],
  ])('refuses %j', (list, message) => {
    expect(() => parsePluginList(list)).toThrow(message);
    expect(() => parsePluginList(list)).toThrow(PluginListError);
  });

  it('is checked by the Router too', () => {
    expect(() => new Router({ feature: 'resource', version: 't', plugins: ['resource'] })).toThrow(
      expect.objectContaining({ code: 'PLUGINS_INVALID' }),
    );
    expect(checkPluginNames([])).toEqual([]);
  });

  it('is checked by startApiServer, which also needs the resource feature for it', async () => {
    await expect(
      startApiServer({ features: 'resource', bind: '127.0.0.1:0', plugins: ['nebula-ca', 'resource'] }),
    ).rejects.toThrow(expect.objectContaining({ code: 'PLUGINS_INVALID' }));
    await expect(
      startApiServer({ features: 'attestation', bind: '127.0.0.1:0', plugins: ['nebula-ca'] }),
    ).rejects.toThrow(/needs the resource feature/);
  });
});
