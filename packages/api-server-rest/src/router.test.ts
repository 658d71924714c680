import { describe, expect, it } from 'vitest';
import { BackendError, ExtendResult } from './backends.js';
import { isLoopbackAddress } from './loopback.js';
import {
  AaelEventError,
  BodyTooLargeError,
  type Feature,
  isFeature,
  parseAaelEvent,
  type Reply,
  Router,
} from './router.js';
import { FakeAttestationAgent, FakeDataHub } from './testing/helpers.js';

const utf8 = (s: string) => new TextEncoder().encode(s);
const text = (r: Reply) => (typeof r.body === 'string' ? r.body : new TextDecoder().decode(r.body));

interface Setup {
  router: Router;
  cdh: FakeDataHub;
  aa: FakeAttestationAgent;
}

function setup(feature: Feature = 'all', allowPeer?: (a: string | undefined) => boolean): Setup {
  const cdh = new FakeDataHub({ 'kbs:///default/key/1': 'secret-bytes' });
  const aa = new FakeAttestationAgent();
  const router = new Router({
    feature,
    version: 'Guest Components Version: test',
    resource: feature === 'attestation' ? undefined : cdh,
    attestation: feature === 'resource' ? undefined : aa,
    allowPeer,
  });
  return { router, cdh, aa };
}

function request(
  router: Router,
  method: string,
  target: string,
  opts: { peer?: string | undefined; body?: Uint8Array | string | Error } = {},
) {
  let bodyReads = 0;
  const reply = router.route({
    method,
    target,
    peerAddress: 'peer' in opts ? opts.peer : '127.0.0.1',
    readBody: async () => {
      bodyReads++;
      const b = opts.body ?? new Uint8Array(0);
      if (b instanceof Error) throw b;
      return typeof b === 'string' ? utf8(b) : b;
    },
  });
  return { reply, bodyReads: () => bodyReads };
}

const route = (router: Router, method: string, target: string, opts = {}) =>
  request(router, method, target, opts).reply;

describe('peer check', () => {
  it('answers 403 Forbidden to a non-loopback peer before anything else and closes', async () => {
    const { router, cdh } = setup();
    for (const peer of ['10.0.0.1', '192.168.1.5', '::ffff:10.0.0.1', 'fe80::1', undefined]) {
      const r = await route(router, 'GET', '/cdh/resource/default/key/1', { peer });
      expect(r.status).toBe(403);
      expect(text(r)).toBe('Forbidden');
      expect(r.close).toBe(true);
    }
    expect(cdh.calls).toEqual([]);
  });

  it('does not read the body of a forbidden aael request', async () => {
    const { router, aa } = setup();
    const { reply, bodyReads } = request(router, 'POST', '/aa/aael', { peer: '10.1.2.3', body: '{}' });
    expect((await reply).status).toBe(403);
    expect(bodyReads()).toBe(0);
    expect(aa.calls).toEqual([]);
  });

  it('accepts every loopback form', async () => {
    const { router } = setup();
    for (const peer of ['127.0.0.1', '127.1.2.3', '::1', '::ffff:127.0.0.1']) {
      expect((await route(router, 'GET', '/info', { peer })).status).toBe(200);
    }
  });

  it('uses an injected peer policy', async () => {
    const { router } = setup('all', (a) => a === '10.0.0.7');
    expect((await route(router, 'GET', '/info', { peer: '10.0.0.7' })).status).toBe(200);
    expect((await route(router, 'GET', '/info', { peer: '127.0.0.1' })).status).toBe(403);
  });

  it('isLoopbackAddress follows is_loopback (plus IPv4-mapped loopback)', () => {
    expect(isLoopbackAddress('127.0.0.1')).toBe(true);
    expect(isLoopbackAddress('127.255.255.254')).toBe(true);
    expect(isLoopbackAddress('::1')).toBe(true);
    expect(isLoopbackAddress('0:0:0:0:0:0:0:1')).toBe(true);
    expect(isLoopbackAddress('::ffff:127.0.0.1')).toBe(true);
    expect(isLoopbackAddress('128.0.0.1')).toBe(false);
    expect(isLoopbackAddress('0.0.0.0')).toBe(false);
    expect(isLoopbackAddress('::')).toBe(false);
    expect(isLoopbackAddress('::127.0.0.1')).toBe(false);
    expect(isLoopbackAddress('fe80::1%lo')).toBe(false);
    expect(isLoopbackAddress('localhost')).toBe(false);
    expect(isLoopbackAddress('')).toBe(false);
    expect(isLoopbackAddress(undefined)).toBe(false);
  });
});

describe('GET /info', () => {
  it('reports version and feature only without the attestation feature', async () => {
    const { router, aa } = setup('resource');
    const r = await route(router, 'GET', '/info');
    expect(r.status).toBe(200);
    expect(r.contentType).toBe('application/json');
    expect(text(r)).toBe('{"version":"Guest Components Version: test","feature":"resource"}');
    expect(aa.calls).toEqual([]);
  });

  it('adds tee from the AA and omits an empty additional_tees', async () => {
    const { router } = setup('all');
    expect(text(await route(router, 'GET', '/info'))).toBe(
      '{"version":"Guest Components Version: test","tee":"sample","feature":"all"}',
    );
  });

  it('adds additional_tees when the AA has some, in upstream member order', async () => {
    const { router, aa } = setup('attestation');
    aa.tee = 'tdx';
    aa.additionalTees = ['nvidia', 'sampledevice'];
    expect(text(await route(router, 'GET', '/info?ignored=1'))).toBe(
      '{"version":"Guest Components Version: test","tee":"tdx","additional_tees":["nvidia","sampledevice"],"feature":"attestation"}',
    );
  });

  it.each(['POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS'])('answers %s with 405', async (method) => {
    const { router } = setup();
    const r = await route(router, method, '/info');
    expect(r.status).toBe(405);
    expect(text(r)).toBe('Method Not Allowed');
  });

  it('answers 500 with the AA error when the AA fails', async () => {
    const { router, aa } = setup('all');
    aa.failure = new BackendError('ttrpc connect to Attestation Agent addr: unix:///x failed: ENOENT');
    const r = await route(router, 'GET', '/info');
    expect(r.status).toBe(500);
    expect(text(r)).toBe('ttrpc connect to Attestation Agent addr: unix:///x failed: ENOENT');
  });

  it('matches /info exactly', async () => {
    const { router } = setup();
    expect(text(await route(router, 'GET', '/info/'))).toBe('URL NOT FOUND');
    expect(text(await route(router, 'GET', '/INFO'))).toBe('URL NOT FOUND');
  });
});

describe('unknown paths', () => {
  it.each([
    '/',
    '/unknown',
    '/foo/bar',
    '',
    '*',
    '/aa',
    '/cdh',
    '/infox',
    '/cdh/resource',
    '/cdh/resources/a/b/c',
  ])('%j → 404 URL NOT FOUND', async (path) => {
    const { router } = setup();
    const r = await route(router, 'GET', path);
    expect(r.status).toBe(404);
    expect(text(r)).toBe('URL NOT FOUND');
  });

  it('answers a known AA path with the wrong method as URL NOT FOUND, as upstream', async () => {
    const { router, aa } = setup();
    for (const [m, p] of [
      ['POST', '/aa/token?token_type=kbs'],
      ['HEAD', '/aa/evidence?runtime_data=x'],
      ['PUT', '/aa/additional-evidence?runtime_data=x'],
      ['GET', '/aa/aael'],
      ['GET', '/aa/unknown-route'],
      ['GET', '/aa/token/'],
    ] as const) {
      const r = await route(router, m, p);
      expect([m, p, r.status, text(r)]).toEqual([m, p, 404, 'URL NOT FOUND']);
    }
    expect(aa.calls).toEqual([]);
  });
});

describe('feature switches', () => {
  it.each([
    ['GET', '/aa/token?token_type=kbs'],
    ['GET', '/aa/evidence?runtime_data=aGVsbG8'],
    ['GET', '/aa/additional-evidence?runtime_data=aGVsbG8'],
    ['GET', '/aa/aael'],
    ['POST', '/aa/aael'],
    ['GET', '/aa/unknown-route'],
    ['GET', '/aa/'],
  ])('resource only: %s %s → 404 Attestation Feature Not Enabled', async (method, target) => {
    const { router } = setup('resource');
    const r = await route(router, method, target);
    expect(r.status).toBe(404);
    expect(text(r)).toBe('Attestation Feature Not Enabled');
  });

  it.each(['/cdh/resource/default/key/test', '/cdh/resource', '/cdh/unknown/foo/bar', '/cdh/'])(
    'attestation only: %s → 404 Resource Feature Not Enabled',
    async (target) => {
      const { router } = setup('attestation');
      const r = await route(router, 'GET', target);
      expect(r.status).toBe(404);
      expect(text(r)).toBe('Resource Feature Not Enabled');
    },
  );

  it('isFeature accepts exactly resource, attestation and all', () => {
    expect(['resource', 'attestation', 'all'].every(isFeature)).toBe(true);
    expect(['', 'ALL', 'resources', 'attestation,resource'].some(isFeature)).toBe(false);
  });
});

describe('/cdh/resource', () => {
  it('fetches kbs:///<rest of path> as octets', async () => {
    const { router, cdh } = setup('resource');
    const r = await route(router, 'GET', '/cdh/resource/default/key/1');
    expect(r.status).toBe(200);
    expect(r.contentType).toBe('application/octet-stream');
    expect(text(r)).toBe('secret-bytes');
    expect(cdh.calls).toEqual(['kbs:///default/key/1']);
  });

  it('accepts any method', async () => {
    const { router, cdh } = setup('resource');
    for (const m of ['POST', 'PUT', 'DELETE', 'HEAD', 'PATCH', 'OPTIONS', 'BREW']) {
      expect((await route(router, m, '/cdh/resource/default/key/1')).status).toBe(200);
    }
    expect(cdh.calls).toHaveLength(7);
  });

  it('passes the raw path (no decoding, no normalisation, no query) to the data hub', async () => {
    const { router, cdh } = setup('resource');
    const paths = [
      '/cdh/resource/default/../1',
      '/cdh/resource/default/%2e%2e/1',
      '/cdh/resource/%2E%2E/%2F/x',
      '/cdh/resource/',
      '/cdh/resource//x',
      '/cdh/resource/a',
      '/cdh/resource/a/b/c/d/e',
      '/cdh/resource/a%zz/b%/c',
    ];
    for (const p of paths) {
      const r = await route(router, 'GET', `${p}?q=1`);
      expect(r.status).toBe(500);
    }
    expect(cdh.calls).toEqual(paths.map((p) => `kbs://${p.slice('/cdh/resource'.length)}`));
  });

  it('answers 500 with the data hub error text', async () => {
    const { router, cdh } = setup('resource');
    cdh.failure = new BackendError(
      'ttrpc request error: INTERNAL: [CDH] [ERROR]: get resource failed: KBS resource Not Found (Error 404)',
    );
    const r = await route(router, 'GET', '/cdh/resource/default/key/2');
    expect(r.status).toBe(500);
    expect(r.contentType).toBe('text/plain; charset=utf-8');
    expect(text(r)).toBe(
      'ttrpc request error: INTERNAL: [CDH] [ERROR]: get resource failed: KBS resource Not Found (Error 404)',
    );
    expect(r.error).toBe(text(r));
  });

  it('answers 500 with the message of an unexpected backend error', async () => {
    const { router, cdh } = setup('resource');
    cdh.failure = new TypeError('boom');
    const r = await route(router, 'GET', '/cdh/resource/default/key/1');
    expect([r.status, text(r)]).toEqual([500, 'boom']);
  });
});

describe('/aa/token', () => {
  it('returns the AA token bytes', async () => {
    const { router, aa } = setup('attestation');
    const r = await route(router, 'GET', '/aa/token?token_type=kbs');
    expect(r.status).toBe(200);
    expect(r.contentType).toBe('application/octet-stream');
    expect(JSON.parse(text(r))).toEqual({ token: 'token-kbs', tee_keypair: 'PEM' });
    expect(aa.calls).toEqual([['getToken', 'kbs']]);
  });

  it('passes any token type to the AA, decoded, last value winning', async () => {
    const { router, aa } = setup('attestation');
    await route(router, 'GET', '/aa/token?token_type=kbs&token_type=coco%5Fas');
    await route(router, 'GET', '/aa/token?token_type=');
    expect(aa.calls).toEqual([
      ['getToken', 'coco_as'],
      ['getToken', ''],
    ]);
  });

  it.each(['/aa/token', '/aa/token?', '/aa/token?tokentype=kbs', '/aa/token?TOKEN_TYPE=kbs'])(
    '%s → 400 BAD REQUEST',
    async (target) => {
      const { router, aa } = setup('attestation');
      const r = await route(router, 'GET', target);
      expect([r.status, text(r)]).toEqual([400, 'BAD REQUEST']);
      expect(aa.calls).toEqual([]);
    },
  );

  it('answers 500 with the AA error', async () => {
    const { router, aa } = setup('attestation');
    aa.failure = new BackendError(
      'ttrpc request error: INTERNAL: [ERROR:attestation-agent] AA-KBC get token failed: Unsupported token type',
    );
    const r = await route(router, 'GET', '/aa/token?token_type=foo');
    expect([r.status, text(r)]).toEqual([500, aa.failure.message]);
  });
});

describe.each([
  ['/aa/evidence', 'getEvidence'],
  ['/aa/additional-evidence', 'getAdditionalEvidence'],
])('%s', (path, method) => {
  it('uses the UTF-8 bytes of runtime_data by default', async () => {
    const { router, aa } = setup('attestation');
    const r = await route(router, 'GET', `${path}?runtime_data=xxxx`);
    expect(r.status).toBe(200);
    expect(r.contentType).toBe('application/octet-stream');
    await route(router, 'GET', `${path}?runtime_data=a%20b+c%C3%A9`);
    expect(aa.calls).toEqual([
      [method, utf8('xxxx')],
      [method, utf8('a b cé')],
    ]);
  });

  it('decodes encoding=base64 as URL-safe base64 without padding', async () => {
    const { router, aa } = setup('attestation');
    const r = await route(router, 'GET', `${path}?runtime_data=eHh4eA&encoding=base64`);
    expect(r.status).toBe(200);
    await route(router, 'GET', `${path}?encoding=base64&runtime_data=-_-_`);
    expect(aa.calls).toEqual([
      [method, utf8('xxxx')],
      [method, new Uint8Array([0xfb, 0xff, 0xbf])],
    ]);
  });

  it.each([
    ['no runtime_data', ''],
    ['runtime_data under another name', '?runtimedata=x'],
    ['padded base64', '?runtime_data=eHh4eA%3D%3D&encoding=base64'],
    ['standard base64 alphabet', '?runtime_data=ab%2Bc&encoding=base64'],
    ['+ decoded to a space', '?runtime_data=ab+c&encoding=base64'],
    ['a bad length', '?runtime_data=abcde&encoding=base64'],
    ['an unknown encoding', '?runtime_data=abcd&encoding=hex'],
    ['an empty encoding', '?runtime_data=abcd&encoding='],
    ['an upper-case encoding', '?runtime_data=abcd&encoding=BASE64'],
  ])('answers 400 BAD REQUEST for %s', async (_why, query) => {
    const { router, aa } = setup('attestation');
    const r = await route(router, 'GET', `${path}${query}`);
    expect([r.status, text(r)]).toEqual([400, 'BAD REQUEST']);
    expect(aa.calls).toEqual([]);
  });

  it('answers 500 with the AA error', async () => {
    const { router, aa } = setup('attestation');
    aa.failure = new BackendError('ttrpc request error: DEADLINE_EXCEEDED: context deadline exceeded');
    const r = await route(router, 'GET', `${path}?runtime_data=x`);
    expect([r.status, text(r)]).toEqual([
      500,
      'ttrpc request error: DEADLINE_EXCEEDED: context deadline exceeded',
    ]);
  });
});

it('/aa/evidence returns the evidence bytes verbatim (upstream README sample)', async () => {
  const { router } = setup('attestation');
  const r = await route(router, 'GET', '/aa/evidence?runtime_data=eHh4eA&encoding=base64');
  expect(text(r)).toBe('{"svn":"1","report_data":"eHh4eA=="}');
});

describe('POST /aa/aael', () => {
  const body = '{"domain":"test","operation":"test","content":"test"}';

  it('extends the event log and answers {"success":"true"}', async () => {
    const { router, aa } = setup('attestation');
    const r = await route(router, 'POST', '/aa/aael', { body });
    expect(r.status).toBe(200);
    expect(r.contentType).toBe('application/json');
    expect(text(r)).toBe('{"success":"true"}');
    expect(aa.calls).toEqual([['extendRuntimeMeasurement', 'test', 'test', 'test']]);
  });

  it.each([
    [
      ExtendResult.NOT_SUPPORTED,
      '{"success":"false","message": "The platform does not support runtime measurement"}',
    ],
    [
      ExtendResult.NOT_ENABLED,
      '{"success":"false","message": "Attestation Agent does not enable eventlog recording"}',
    ],
    [7, '{"success":"false","message": "Unknown runtime measurement result"}'],
  ])('reports result %i with upstream body', async (result, want) => {
    const { router, aa } = setup('attestation');
    aa.extendResult = result;
    const r = await route(router, 'POST', '/aa/aael', { body });
    expect([r.status, text(r)]).toEqual([200, want]);
    expect(JSON.parse(text(r)).success).toBe('false');
  });

  it('ignores extra members and keeps the content verbatim', async () => {
    const { router, aa } = setup('attestation');
    const content = '{"image":"docker.io/library/busybox:latest", "digest":"sha256:ab"}';
    await route(router, 'POST', '/aa/aael', {
      body: JSON.stringify({
        extra: 1,
        domain: 'github.com/confidential-containers',
        operation: 'PullImage',
        content,
      }),
    });
    expect(aa.calls).toEqual([
      ['extendRuntimeMeasurement', 'github.com/confidential-containers', 'PullImage', content],
    ]);
  });

  it.each([
    ['an empty body', ''],
    ['garbage', 'not json'],
    ['truncated JSON', '{"domain":"a","operation":"b","content":"c"'],
    ['an array', '["a","b","c"]'],
    ['null', 'null'],
    ['a missing member', '{"domain":"a","operation":"b"}'],
    ['a number member', '{"domain":"a","operation":"b","content":1}'],
    ['a null member', '{"domain":null,"operation":"b","content":"c"}'],
    ['trailing garbage', `${body}x`],
    ['a UTF-8 BOM', `\ufeff${body}`],
  ])('answers 500 for %s', async (_why, b) => {
    const { router, aa } = setup('attestation');
    const r = await route(router, 'POST', '/aa/aael', { body: b });
    expect(r.status).toBe(500);
    expect(text(r)).toMatch(/^Illegal AAEL eventry format: /);
    expect(aa.calls).toEqual([]);
  });

  it('answers 500 for invalid UTF-8', async () => {
    const { router } = setup('attestation');
    const bad = new Uint8Array([...utf8('{"domain":"'), 0xff, ...utf8('","operation":"b","content":"c"}')]);
    const r = await route(router, 'POST', '/aa/aael', { body: bad });
    expect([r.status, text(r)]).toEqual([500, 'Illegal AAEL eventry format: body is not valid UTF-8']);
  });

  it('answers 413 and closes when the body is over the cap', async () => {
    const { router, aa } = setup('attestation');
    const r = await route(router, 'POST', '/aa/aael', { body: new BodyTooLargeError(10) });
    expect([r.status, text(r), r.close]).toEqual([413, 'Payload Too Large', true]);
    expect(aa.calls).toEqual([]);
  });

  it('answers 500 when reading the body fails', async () => {
    const { router } = setup('attestation');
    const r = await route(router, 'POST', '/aa/aael', {
      body: new Error('reading the request body failed: x'),
    });
    expect([r.status, text(r)]).toEqual([500, 'reading the request body failed: x']);
  });

  it('answers 500 with the AA error', async () => {
    const { router, aa } = setup('attestation');
    aa.failure = new BackendError(
      'ttrpc request error: INTERNAL: [ERROR:attestation-agent] AA extend failed',
    );
    const r = await route(router, 'POST', '/aa/aael', { body });
    expect([r.status, text(r)]).toEqual([500, aa.failure.message]);
  });
});

describe('parseAaelEvent', () => {
  it('returns the three strings', () => {
    expect(parseAaelEvent(utf8('{"content":"c","operation":"o","domain":"d"}'))).toEqual({
      domain: 'd',
      operation: 'o',
      content: 'c',
    });
  });

  it('names the missing member', () => {
    expect(() => parseAaelEvent(utf8('{"domain":"d","content":"c"}'))).toThrow(
      new AaelEventError('Illegal AAEL eventry format: missing field `operation`'),
    );
  });

  it('does not take members from the prototype', () => {
    expect(() => parseAaelEvent(utf8('{"__proto__":{"domain":"d","operation":"o","content":"c"}}'))).toThrow(
      /missing field `domain`/,
    );
  });
});
