import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KbsAdminClient, sampleReferenceValueMessage } from './admin.js';
import { InvalidResourcePath, KbsBadResponse, KbsRejected } from './errors.js';
import { errorBody, FakeKbs } from './testing/fake-kbs.js';

let kbs: FakeKbs;
let admin: KbsAdminClient;

beforeEach(async () => {
  kbs = await new FakeKbs().start();
  admin = new KbsAdminClient({ url: kbs.url, adminToken: 'admin.jwt.token' });
});
afterEach(async () => {
  admin.close();
  await kbs.stop();
});

function only() {
  expect(kbs.requests).toHaveLength(1);
  const r = kbs.requests[0]!;
  return {
    method: r.method,
    url: r.url,
    body: r.body,
    type: r.headers['content-type'],
    auth: r.headers.authorization,
    ua: r.headers['user-agent'],
  };
}

describe('KbsAdminClient requests', () => {
  it('set-resource: POST the raw bytes as octet-stream with the bearer token', async () => {
    await admin.setResource('default/key/one', new Uint8Array([0, 1, 2, 255]));
    const r = only();
    expect(r).toMatchObject({
      method: 'POST',
      url: '/kbs/v0/resource/default/key/one',
      type: 'application/octet-stream',
    });
    expect(r.body).toEqual(Buffer.from([0, 1, 2, 255]));
    expect(r.auth).toBe('Bearer admin.jwt.token');
    expect(r.ua).toBe('kbs-client/0.1.0');
  });

  it('delete-resource: DELETE with no body', async () => {
    await admin.deleteResource('default/key/one');
    const r = only();
    expect(r).toMatchObject({ method: 'DELETE', url: '/kbs/v0/resource/default/key/one' });
    expect(r.body.length).toBe(0);
  });

  it('resource policy: POST {"policy": base64url without padding}; GET returns the ids', async () => {
    await admin.setResourcePolicy('package policy\n\ndefault allow = true\n?>');
    const r = only();
    expect(r).toMatchObject({ method: 'POST', url: '/kbs/v0/resource-policy', type: 'application/json' });
    const body = JSON.parse(r.body.toString());
    expect(Object.keys(body)).toEqual(['policy']);
    expect(body.policy).not.toMatch(/[=+/]/);
    expect(Buffer.from(body.policy, 'base64url').toString()).toBe(
      'package policy\n\ndefault allow = true\n?>',
    );
    kbs.requests.length = 0;
    expect(await admin.getResourcePolicyIds()).toEqual(['resource-policy']);
    expect(only()).toMatchObject({ method: 'GET', url: '/kbs/v0/resource-policy' });
  });

  it('attestation policy: {"type","policy_id","policy"} with defaults rego/default_cpu', async () => {
    await admin.setAttestationPolicy({ policy: 'package policy\n' });
    let body = JSON.parse(only().body.toString());
    expect(body).toEqual({
      type: 'rego',
      policy_id: 'default_cpu',
      policy: Buffer.from('package policy\n').toString('base64url'),
    });
    kbs.requests.length = 0;
    await admin.setAttestationPolicy({ policy: new Uint8Array([0xfb, 0xff]), id: 'my', type: 'rego' });
    body = JSON.parse(only().body.toString());
    expect(body).toEqual({ type: 'rego', policy_id: 'my', policy: '-_8' });
    expect(only().url).toBe('/kbs/v0/attestation-policy');
  });

  it('sample reference value: the RVPS message with a standard-base64 JSON payload', async () => {
    await admin.setSampleReferenceValue('svn', ['1']);
    const r = only();
    expect(r).toMatchObject({ method: 'POST', url: '/kbs/v0/reference-value', type: 'application/json' });
    const msg = JSON.parse(r.body.toString());
    expect(msg).toEqual({
      version: '0.1.0',
      type: 'sample',
      payload: Buffer.from('{"svn":["1"]}').toString('base64'),
    });
    expect(sampleReferenceValueMessage('launch_digest', 'abcde').payload).toBe(
      Buffer.from('{"launch_digest":"abcde"}').toString('base64'),
    );
  });

  it('get reference value: GET by id, body returned as text', async () => {
    expect(await admin.getReferenceValue('svn')).toBe('["1.0.0","a\\"b"]');
    expect(only()).toMatchObject({ method: 'GET', url: '/kbs/v0/reference-value/svn' });
  });
});

describe('KbsAdminClient failures and auth', () => {
  it('surfaces the KBS error type and detail on any non-200', async () => {
    kbs.override = () => ({
      status: 401,
      body: errorBody('AdminAuthAccess', 'admin access denied for endpoint /kbs/v0/resource-policy'),
    });
    const err = await admin.setResourcePolicy('x').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KbsRejected);
    expect(err).toMatchObject({ status: 401, kind: 'AdminAuthAccess' });
    kbs.override = () => ({ status: 204 });
    expect(await admin.deleteResource('a/b/c').catch((e: unknown) => e)).toBeInstanceOf(KbsRejected);
  });

  it('refuses a resource path before sending anything', async () => {
    for (const bad of ['a/b', '../b/c', 'a/b/c/d', 'a/b/c?x=1']) {
      await expect(admin.setResource(bad, 'x')).rejects.toBeInstanceOf(InvalidResourcePath);
    }
    expect(kbs.requests).toHaveLength(0);
  });

  it('rejects a policy-id list that is not a JSON array of strings', async () => {
    kbs.override = () => ({ status: 200, body: '{"a":1}' });
    await expect(admin.getResourcePolicyIds()).rejects.toBeInstanceOf(KbsBadResponse);
    kbs.override = () => ({ status: 200, body: 'nope' });
    await expect(admin.getResourcePolicyIds()).rejects.toBeInstanceOf(KbsBadResponse);
  });

  it('sends no Authorization without a token and warns once', async () => {
    const warnings: string[] = [];
    const anon = new KbsAdminClient({ url: kbs.url, logger: { warn: (m) => warnings.push(m) } });
    try {
      await anon.deleteResource('a/b/c');
      await anon.deleteResource('a/b/c');
    } finally {
      anon.close();
    }
    expect(kbs.requests.map((r) => r.headers.authorization)).toEqual([undefined, undefined]);
    expect(warnings).toEqual(['No admin token provided; sending anonymous request']);
  });

  it('calls a token function for each request', async () => {
    let n = 0;
    const minted = new KbsAdminClient({ url: kbs.url, adminToken: async () => `t${++n}` });
    try {
      await minted.deleteResource('a/b/c');
      await minted.deleteResource('a/b/c');
    } finally {
      minted.close();
    }
    expect(kbs.requests.map((r) => r.headers.authorization)).toEqual(['Bearer t1', 'Bearer t2']);
  });
});
