// Policy evaluation bounds against dist/bin/kbs over HTTPS (the real executable, with the heap capped at
// 1 GiB so that an unbounded evaluation ends it quickly): a dry run that builds a million distinct 8 KiB
// strings is refused and the KBS keeps serving guests; policies that exceed a limit on the representative
// input, or lack the rule their kind needs, are refused at upload with 400; a stored policy that exceeds a
// limit on a guest's claims is evaluated once and then refused from memory until it changes.
import { sign } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binary, type Running, start, waitForListen } from './helpers/process.js';
import { call, type HttpResult, sampleGuest } from './helpers/replicas.js';
import { type KbsHandle, prepareKbs } from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-policy-bounds-'));
let kbs: KbsHandle;
let proc: Running;

/** The operator console README's read-only role: it cannot dry run. */
const VIEWER =
  '^/kbs/v0/admin/(verdicts(/[0-9]+)?|console/session|resources|resource-policy|attestation-policy(/[A-Za-z0-9_.]+)?|reference-values|health)$';
/** A role allowed to dry run (and so to send any policy text to the evaluator). */
const DRY_RUNNER =
  '^/kbs/v0/admin/(verdicts(/[0-9]+)?|console/session|resources|resource-policy(/dry-run)?|attestation-policy(/[^/]+)?|reference-values|health)$';

/** Builds a million distinct 8 KiB strings (8 GiB) when nothing bounds it. */
const BOMB_SET = `pad := sprintf("%08192d", [0])
bomb := {s | some i in numbers.range(1, 1000000); s := sprintf("%d%s", [i, pad])}`;
const RESOURCE_BOMB = `package policy\n${BOMB_SET}\nallow if count(bomb) > 0\n`;
const ATTESTATION_BOMB = `package policy\n${BOMB_SET}\ntrust_claims := {"executables": count(bomb)}\n`;
/** Allows every resource, except that the sample TEE's svn 1 makes it build the bomb. */
const BOMB_ON_SAMPLE = `package policy
default allow := false
${BOMB_SET}
svn := input.submods.cpu0["ear.veraison.annotated-evidence"].sample.svn
allow if { svn == "1"; count(bomb) > 0 }
allow if { not svn }
`;
const ALLOW_ALL = 'package policy\ndefault allow := false\nallow if data.plugin == "resource"\n';

function jwt(role: string): string {
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const input = `${b64({ alg: 'EdDSA' })}.${b64({ role, exp: Math.floor(Date.now() / 1000) + 600 })}`;
  const key = readFileSync(join(dir, 'admin.key'));
  return `${input}.${sign(null, Buffer.from(input), key).toString('base64url')}`;
}

function as(role: string, method: string, path: string, body?: unknown): Promise<HttpResult> {
  return call(
    kbs.tls.certPem,
    `${kbs.url}/kbs/v0/${path}`,
    method,
    { authorization: `Bearer ${jwt(role)}` },
    body === undefined ? undefined : JSON.stringify(body),
  );
}

const b64url = (text: string) => Buffer.from(text).toString('base64url');
const setResourcePolicy = (text: string) => as('admin', 'POST', 'resource-policy', { policy: b64url(text) });
const healthz = () => call(kbs.tls.certPem, `${kbs.url}/healthz`, 'GET');

const guest = () => sampleGuest(kbs.tls.certPem);
/** Attests a fresh sample guest and fetches the test resource with its session. */
async function guestFetch(): Promise<HttpResult> {
  const g = guest();
  const auth = await g.auth(kbs.url);
  const attest = await g.attest(kbs.url, auth.cookie, auth.nonce);
  expect(attest.status, attest.body).toBe(200);
  return g.resource(kbs.url, 'default/key/one', { cookie: auth.cookie });
}

async function metric(name: string): Promise<string> {
  const r = await call(kbs.tls.certPem, `${kbs.url}/metrics`, 'GET');
  return r.body
    .split('\n')
    .filter((l) => l.startsWith(name))
    .join('\n');
}

let verdictId: number;

beforeAll(async () => {
  kbs = await prepareKbs(dir);
  const text = readFileSync(kbs.configPath, 'utf8');
  const acls = 'acls = [{ role = "admin", allowed_endpoints = "^/kbs/v0/.+$" }]';
  expect(text).toContain(acls);
  expect(text).toContain('[admin]\n');
  writeFileSync(
    kbs.configPath,
    text.replace('[admin]\n', '[admin]\nconsole = true\nverdict_log_size = 50\n').replace(
      acls,
      `acls = [
  { role = "admin", allowed_endpoints = "^/kbs/v0/.+$" },
  { role = "viewer", allowed_endpoints = "${VIEWER.replaceAll('\\', '\\\\')}" },
  { role = "dryrunner", allowed_endpoints = "${DRY_RUNNER.replaceAll('\\', '\\\\')}" },
]`,
    ),
  );
  proc = start(binary('kbs'), ['--config-file', kbs.configPath], {
    env: { ...process.env, NODE_OPTIONS: '--max-old-space-size=1024' },
  });
  await waitForListen({ port: kbs.port }, proc);
  expect((await setResourcePolicy(ALLOW_ALL)).status).toBe(200);
  const put = await call(
    kbs.tls.certPem,
    `${kbs.url}/kbs/v0/resource/default/key/one`,
    'POST',
    { authorization: `Bearer ${jwt('admin')}`, 'content-type': 'application/octet-stream' },
    'secret',
  );
  expect(put.status, put.body).toBe(200);
  expect((await guestFetch()).status).toBe(200);
  const listed = JSON.parse((await as('admin', 'GET', 'admin/verdicts?kind=attestation')).body) as {
    verdicts: { id: number }[];
  };
  verdictId = listed.verdicts[0]?.id as number;
  expect(verdictId).toBeTypeOf('number');
}, 60_000);

afterAll(async () => {
  await proc?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('policy evaluation bounds, dist/bin/kbs', () => {
  it('refuses the README viewer a dry run', async () => {
    const r = await as('viewer', 'POST', 'admin/attestation-policy/dry-run', {
      policy: ATTESTATION_BOMB,
      verdict: verdictId,
    });
    expect(r.status).toBe(401);
    expect((await as('viewer', 'GET', 'admin/attestation-policy/default_cpu')).status).toBe(200);
  });

  it('stops a dry run at the memory limit; the KBS answers /healthz and releases to a guest after', async () => {
    const r = await as('dryrunner', 'POST', 'admin/attestation-policy/dry-run', {
      policy: ATTESTATION_BOMB,
      verdict: verdictId,
    });
    expect(r.status, r.body).toBe(400);
    expect(JSON.parse(r.body)).toMatchObject({ submod: 'cpu0', limit: 'memory' });
    expect(JSON.parse(r.body).error).toMatch(/memory limit/);
    // The same again is refused from memory.
    const again = await as('dryrunner', 'POST', 'admin/attestation-policy/dry-run', {
      policy: ATTESTATION_BOMB,
      verdict: verdictId,
    });
    expect(again.status).toBe(400);
    expect(JSON.parse(again.body).error).toMatch(/remembered/);
    // Three at once (resource policy dry runs this time) are all answered, and so is /healthz meanwhile.
    const runs = [1, 2, 3].map((i) =>
      as('dryrunner', 'POST', 'admin/resource-policy/dry-run', {
        policy: `${RESOURCE_BOMB}# ${i}\n`,
        verdict: verdictId,
        resource: 'default/key/one',
      }),
    );
    const health = await healthz();
    expect(health.status).toBe(200);
    for (const run of await Promise.all(runs)) {
      expect(run.status, run.body).toBe(400);
      expect(JSON.parse(run.body)).toMatchObject({ allow: false, limit: 'memory' });
    }
    expect(proc.child.exitCode).toBeNull();
    expect((await healthz()).status).toBe(200);
    expect((await guestFetch()).status).toBe(200);
  }, 60_000);

  it('refuses at upload, with 400 naming the limit, policies that exceed it on the representative input', async () => {
    const resource = await setResourcePolicy(RESOURCE_BOMB);
    expect(resource.status, resource.body).toBe(400);
    expect(JSON.parse(resource.body)).toMatchObject({
      type: expect.stringMatching(/PolicyEngineError$/),
      detail: expect.stringMatching(/limit of policy evaluation \(memory\)/),
    });
    const attestation = await as('admin', 'POST', 'attestation-policy', {
      policy_id: 'bomb_cpu',
      policy: b64url(ATTESTATION_BOMB),
    });
    expect(attestation.status, attestation.body).toBe(400);
    expect(JSON.parse(attestation.body).detail).toMatch(/limit of policy evaluation \(memory\)/);
    expect((await as('admin', 'GET', 'admin/attestation-policy/bomb_cpu')).status).toBe(404);
    // The stored policy is unchanged: the guest still gets its resource.
    expect((await guestFetch()).status).toBe(200);
  }, 60_000);

  it('refuses a resource policy without `allow` and an attestation policy without `trust_claims`', async () => {
    const resource = await setResourcePolicy('package policy\n');
    expect(resource.status, resource.body).toBe(400);
    expect(JSON.parse(resource.body).detail).toMatch(/no `allow` rule/);
    const attestation = await as('admin', 'POST', 'attestation-policy', {
      policy_id: 'empty_cpu',
      policy: b64url('package policy\nx := 1\n'),
    });
    expect(attestation.status, attestation.body).toBe(400);
    expect(JSON.parse(attestation.body).detail).toMatch(/no `trust_claims` rule/);
    expect((await guestFetch()).status).toBe(200);
  }, 60_000);

  it('evaluates a policy that exceeds a limit on a guest once, then refuses from memory until it changes', async () => {
    // The representative input has no sample evidence: the upload check passes.
    expect((await setResourcePolicy(BOMB_ON_SAMPLE)).status).toBe(200);
    const first = await guestFetch();
    expect(first.status, first.body).toBe(401);
    expect(JSON.parse(first.body)).toMatchObject({ type: expect.stringMatching(/PolicyEngineError$/) });
    const second = await guestFetch();
    expect(second.status).toBe(401);
    expect(await metric('kbs_policy_limit_refusals_total')).toBe(
      [
        'kbs_policy_limit_refusals_total{policy="resource",remembered="false"} 1',
        'kbs_policy_limit_refusals_total{policy="resource",remembered="true"} 1',
      ].join('\n'),
    );
    expect((await healthz()).status).toBe(200);
    // A new policy text is evaluated afresh.
    expect((await setResourcePolicy(ALLOW_ALL)).status).toBe(200);
    expect((await guestFetch()).status).toBe(200);
  }, 60_000);

  it('evaluates an attestation policy that exceeds a limit on a guest once, then refuses from memory', async () => {
    const original = JSON.parse((await as('admin', 'GET', 'admin/attestation-policy/default_cpu')).body)
      .policy as string;
    // The representative evidence has empty report data: the upload check passes.
    const late = `package policy\n${BOMB_SET}\ndefault executables := 3\nexecutables := count(bomb) if input.report_data != ""\ntrust_claims := {"executables": executables}\n`;
    const set = (text: string) =>
      as('admin', 'POST', 'attestation-policy', { policy_id: 'default_cpu', policy: b64url(text) });
    expect((await set(late)).status).toBe(200);
    const attest = async () => {
      const g = guest();
      const auth = await g.auth(kbs.url);
      return g.attest(kbs.url, auth.cookie, auth.nonce);
    };
    const first = await attest();
    expect(first.status, first.body).toBe(401);
    expect(JSON.parse(first.body)).toMatchObject({ type: expect.stringMatching(/AttestationError$/) });
    expect((await attest()).status).toBe(401);
    expect(await metric('kbs_policy_limit_refusals_total{policy="attestation"')).toBe(
      [
        'kbs_policy_limit_refusals_total{policy="attestation",remembered="false"} 1',
        'kbs_policy_limit_refusals_total{policy="attestation",remembered="true"} 1',
      ].join('\n'),
    );
    expect((await set(original)).status).toBe(200);
    expect((await guestFetch()).status).toBe(200);
  }, 60_000);
});
