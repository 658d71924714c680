// `kbs+<plugin>://` resource URIs from the guest, all as real processes: the KBS with trustee's built-in
// `nebula-ca` and `sample` plugins next to `resource`, its `external` plugin forwarding to a gRPC backend
// (our example plugin, over kbs.plugin.v1), and a guest (attestation-agent, confidential-data-hub)
// configured by initdata. guest-components maps `kbs+<plugin>:///<path>?<query>` to
// `GET /kbs/v0/<plugin>/<path>?<query>` on the configured KBS, under the same attestation token and resource
// policy as `kbs:///` resources. Through api-server-rest (:8006 in the guest) a plugin answers only when that
// server was started with it in `--plugins`: the guest's default one refuses.
import { execFile, execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { DataHubClient } from '@broker/guest-api';
import { type RunningExamplePlugin, startExamplePlugin } from '@broker/kbs';
import { afterAll, beforeAll, beforeEach, describe, expect, it, onTestFailed } from 'vitest';
import { binary, freePort, type Running, start, waitForListen } from './helpers/process.js';
import {
  type GuestHandle,
  type KbsHandle,
  mustSucceed,
  prepareKbs,
  SAMPLE_REFERENCE_VALUES,
  startGuest,
} from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-plugin-uri-'));
let kbs: KbsHandle;
let guest: GuestHandle;
let hub: DataHubClient;
let backend: RunningExamplePlugin;
/** api-server-rest in front of the same guest, started with `--plugins nebula-ca`. */
let pluginRest: Running;
let pluginRestPort: number;

// Releases resources and Nebula credentials to an affirming TEE; a credential only for the node name
// `pod-1` (the query reaches the policy as data.query).
const POLICY = `package policy
import rego.v1

default allow := false

affirming if {
  count(input.submods) > 0
  every _, submod in input.submods {
    submod["ear.status"] == "affirming"
  }
}

allow if {
  affirming
  data.plugin == "resource"
}

allow if {
  affirming
  data.plugin == "nebula-ca"
  data["resource-path"] == ["credential"]
  data.query.name == "pod-1"
}

allow if {
  affirming
  data.plugin == "external"
  data["resource-path"][0] == "echo"
}
`;

/** A refused GetResource: upstream's text for the caller; the reason is in the hub's log. */
async function refused(uri: string): Promise<string> {
  const err = (await hub.getResource(uri).then(
    () => undefined,
    (e: unknown) => e,
  )) as Error | undefined;
  expect(err, uri).toBeInstanceOf(Error);
  return (err as Error).message;
}

beforeAll(async () => {
  kbs = await prepareKbs(dir);
  // The external plugin's backend: it echoes each GET's path and query, and asks the KBS to encrypt its
  // replies to the TEE key, as the guest expects every resource to come.
  backend = await startExamplePlugin({ address: '127.0.0.1:0', encryptGet: true });
  const nebulaDir = join(dir, 'nebula-ca');
  mkdirSync(nebulaDir, { recursive: true });
  appendFileSync(
    kbs.configPath,
    `
[[plugins]]
name = "sample"
item = "unused"

[[plugins]]
name = "nebula-ca"
work_dir = "${nebulaDir}"

[plugins.ca_config]
name = "plugin URI test CA"

[[plugins]]
name = "external"

[[plugins.backends]]
name = "echo"
endpoint = "http://127.0.0.1:${backend.port}"

[[plugins.backends]]
name = "unreleased"
endpoint = "http://127.0.0.1:${backend.port}"
`,
  );
  await kbs.start();
  writeFileSync(join(dir, 'key.bin'), 'resource bytes');
  await mustSucceed(
    kbs.admin('set-resource', '--path', 'default/app/key', '--resource-file', join(dir, 'key.bin')),
  );
  for (const rv of SAMPLE_REFERENCE_VALUES) await mustSucceed(kbs.admin('set-sample-reference-value', ...rv));
  writeFileSync(join(dir, 'policy.rego'), POLICY);
  await mustSucceed(kbs.admin('set-resource-policy', '--policy-file', join(dir, 'policy.rego')));
  guest = await startGuest(kbs, dir);
  hub = await DataHubClient.connect(`unix://${guest.cdhSock}`, { timeoutMs: 60_000 });
  pluginRestPort = await freePort();
  pluginRest = start(binary('api-server-rest'), [
    '--features',
    'all',
    '--cdh_addr',
    `unix://${guest.cdhSock}`,
    '--aa_addr',
    `unix://${guest.aaSock}`,
    '--bind',
    `127.0.0.1:${pluginRestPort}`,
    '--plugins',
    'nebula-ca',
  ]);
  await waitForListen({ port: pluginRestPort }, pluginRest);
});

afterAll(async () => {
  hub?.close();
  await pluginRest?.stop();
  await guest?.stop();
  await kbs?.stop();
  await backend?.close();
});

/** Waits (up to 10 s) for the KBS's log to show `re`: an access line is written after its answer. */
async function logged(re: RegExp): Promise<void> {
  for (let i = 0; i < 200 && !re.test(kbs.process.output()); i++) await new Promise((r) => setTimeout(r, 50));
  expect(kbs.process.output()).toMatch(re);
}

describe('kbs+<plugin>:// URIs through the data hub', () => {
  beforeEach(() =>
    onTestFailed(() => {
      for (const [name, p] of [
        ['kbs', kbs?.process],
        ['attestation-agent', guest?.aa],
        ['confidential-data-hub', guest?.cdh],
        ['api-server-rest', guest?.rest],
        ['api-server-rest --plugins nebula-ca', pluginRest],
      ] as const) {
        console.error(`--- ${name} ---\n${p?.output().slice(-6000) ?? '(not started)'}`);
      }
    }),
  );

  it('kbs+resource:// is kbs://', async () => {
    expect(Buffer.from(await hub.getResource('kbs:///default/app/key')).toString()).toBe('resource bytes');
    expect(Buffer.from(await hub.getResource('kbs+resource:///default/app/key')).toString()).toBe(
      'resource bytes',
    );
  });

  it('kbs+nebula-ca:///credential?name=…&ip=… gets a Nebula credential signed by the KBS CA', async () => {
    const bytes = await hub.getResource('kbs+nebula-ca:///credential?name=pod-1&ip=10.9.0.2/24');
    const reply = JSON.parse(Buffer.from(bytes).toString('utf8')) as Record<string, number[]>;
    expect(Object.keys(reply).sort()).toEqual(['ca_crt', 'node_crt', 'node_key']);
    const out = join(dir, 'node');
    mkdirSync(out, { recursive: true });
    for (const [k, v] of Object.entries(reply)) writeFileSync(join(out, k), Buffer.from(v));
    // The CA the KBS made in its work directory signed the node certificate handed to the guest.
    expect(readFileSync(join(out, 'ca_crt'))).toEqual(readFileSync(join(dir, 'nebula-ca', 'ca', 'ca.crt')));
    execFileSync('nebula-cert', ['verify', '-ca', join(out, 'ca_crt'), '-crt', join(out, 'node_crt')]);
    const details = JSON.parse(
      execFileSync('nebula-cert', ['print', '-json', '-path', join(out, 'node_crt')], { encoding: 'utf8' }),
    ) as { details: { name: string; ips: string[] } };
    expect(details.details.name).toBe('pod-1');
    expect(details.details.ips).toEqual(['10.9.0.2/24']);
    // The request the KBS saw is the URI's plugin, path and query.
    await logged(/"path":"\/kbs\/v0\/nebula-ca\/credential/);
  });

  it('the query reaches the resource policy: another node name is refused', async () => {
    expect(await refused('kbs+nebula-ca:///credential?name=pod-2&ip=10.9.0.3/24')).toContain(
      'Get Resource failed',
    );
    expect(guest.cdh.output()).toMatch(/PolicyDeny|denied/i);
  });

  it('kbs+sample:/// reaches the sample plugin, which answers admins only, as in trustee', async () => {
    expect(await refused('kbs+sample:///anything')).toContain('Get Resource failed');
    await logged(/"path":"\/kbs\/v0\/sample\/anything/);
    expect(guest.cdh.output()).toMatch(/AdminAuth|unauthorized/i);
  });

  it('kbs+external:///<backend>/… goes through the external plugin to that backend, whose bytes the hub returns', async () => {
    const bytes = await hub.getResource('kbs+external:///echo/app/config?name=pod-1');
    // The backend's own answer: it saw a GET of the path after the backend name, with the URI's query.
    expect(Buffer.from(bytes).toString('utf8')).toBe(
      'Echo: method=GET, path=["app","config"], query={"name": "pod-1"}, body_len=0',
    );
    await logged(/"path":"\/kbs\/v0\/external\/echo\/app\/config/);
    // A backend the resource policy does not release is refused: that backend is never asked for bytes.
    expect(await refused('kbs+external:///unreleased/app/config')).toContain('Get Resource failed');
    await logged(/"path":"\/kbs\/v0\/external\/unreleased\/app\/config/);
    expect(kbs.process.output()).toMatch(/"kind":"PolicyDeny","plugin":"external"/);
  });

  it('an unknown plugin is the KBS 404, an illegal plugin URI never leaves the guest', async () => {
    expect(await refused('kbs+nosuch:///x')).toContain('Get Resource failed');
    expect(guest.cdh.output()).toMatch(/PluginNotFound|not found/i);
    // The access line of the refused request above is written after its answer: wait for it.
    await logged(/"path":"\/kbs\/v0\/nosuch\/x"/);
    const before = (kbs.process.output().match(/"path":"\/kbs\/v0\//g) ?? []).length;
    for (const uri of ['kbs+:///x', 'kbs+sample:///a/../b', 'kbs+Sample:///x', 'kbs+sample:///%2e%2e']) {
      expect(await refused(uri)).toContain('Get Resource failed');
    }
    expect(guest.cdh.output()).toMatch(/illegal kbs resource uri/);
    expect((kbs.process.output().match(/"path":"\/kbs\/v0\//g) ?? []).length).toBe(before);
  });
});

const run = promisify(execFile);

/** Debian's curl, as a container of the pod calls :8006: status and body (saved to `out`). */
async function curl(port: number, path: string, out: string): Promise<{ status: number; body: Buffer }> {
  const { stdout } = await run('curl', [
    '-sS',
    '--max-time',
    '60',
    '-o',
    out,
    '-w',
    '%{http_code}',
    `http://127.0.0.1:${port}${path}`,
  ]);
  return { status: Number(stdout), body: readFileSync(out) };
}

describe('kbs+<plugin>:// through api-server-rest (:8006)', () => {
  beforeEach(() =>
    onTestFailed(() => {
      for (const [name, p] of [
        ['kbs', kbs?.process],
        ['confidential-data-hub', guest?.cdh],
        ['api-server-rest', guest?.rest],
        ['api-server-rest --plugins nebula-ca', pluginRest],
      ] as const) {
        console.error(`--- ${name} ---\n${p?.output().slice(-6000) ?? '(not started)'}`);
      }
    }),
  );

  it('with --plugins nebula-ca, curl gets a credential from /cdh/plugin/nebula-ca/credential?name=…&ip=…', async () => {
    const r = await curl(
      pluginRestPort,
      '/cdh/plugin/nebula-ca/credential?name=pod-1&ip=10.9.0.4/24',
      join(dir, 'rest-credential.json'),
    );
    expect(r.status, r.body.toString()).toBe(200);
    const reply = JSON.parse(r.body.toString('utf8')) as Record<string, number[]>;
    expect(Object.keys(reply).sort()).toEqual(['ca_crt', 'node_crt', 'node_key']);
    const out = join(dir, 'rest-node');
    mkdirSync(out, { recursive: true });
    for (const [k, v] of Object.entries(reply)) writeFileSync(join(out, k), Buffer.from(v));
    execFileSync('nebula-cert', [
      'verify',
      '-ca',
      join(dir, 'nebula-ca', 'ca', 'ca.crt'),
      '-crt',
      join(out, 'node_crt'),
    ]);
    const details = JSON.parse(
      execFileSync('nebula-cert', ['print', '-json', '-path', join(out, 'node_crt')], { encoding: 'utf8' }),
    ) as { details: { name: string; ips: string[] } };
    // The query reached the plugin: the certificate is for the name and address asked for.
    expect(details.details).toMatchObject({ name: 'pod-1', ips: ['10.9.0.4/24'] });
    await logged(/"path":"\/kbs\/v0\/nebula-ca\/credential/);
    // The hub logs the URI it was asked for, query included (the next test relies on that log).
    const asked = /kbs\+nebula-ca:\/\/\/credential\?name=pod-1&ip=10\.9\.0\.4\/24/;
    for (let i = 0; i < 200 && !asked.test(guest.cdh.output()); i++)
      await new Promise((r) => setTimeout(r, 50));
    expect(guest.cdh.output()).toMatch(asked);
    // The resource policy still sees the query: another node name is refused (500, upstream's text).
    const denied = await curl(
      pluginRestPort,
      '/cdh/plugin/nebula-ca/credential?name=pod-2&ip=10.9.0.5/24',
      join(dir, 'rest-denied'),
    );
    expect([denied.status, denied.body.toString()]).toEqual([
      500,
      'ttrpc request error: INTERNAL: [CDH] [ERROR]: Get Resource failed',
    ]);
  });

  it('without the plugin in --plugins, curl gets 403 saying how to enable it, and the data hub is not asked', async () => {
    // The guest's api-server-rest, started without --plugins (the default).
    const r = await curl(
      guest.restPort,
      '/cdh/plugin/nebula-ca/credential?name=pod-1&ip=10.9.0.6/24',
      join(dir, 'rest-default'),
    );
    expect([r.status, r.body.toString()]).toEqual([
      403,
      'KBS plugin "nebula-ca" is not enabled on this API: start api-server-rest with --plugins nebula-ca to allow it',
    ]);
    // A plugin left out of the list is refused too.
    const other = await curl(
      pluginRestPort,
      '/cdh/plugin/external/echo/rest-refused?name=pod-1',
      join(dir, 'rest-other'),
    );
    expect(other.status).toBe(403);
    expect(other.body.toString()).toMatch(/--plugins external to allow it$/);
    // Resources are still served, as upstream, on both.
    for (const port of [guest.restPort, pluginRestPort]) {
      const res = await curl(port, '/cdh/resource/default/app/key', join(dir, 'rest-resource'));
      expect([res.status, res.body.toString()]).toEqual([200, 'resource bytes']);
    }
    // The hub logs every GetResource with its URI as it starts: neither refused call reached it.
    expect(guest.cdh.output()).not.toMatch(/10\.9\.0\.6|echo\/rest-refused/);
  });
});
