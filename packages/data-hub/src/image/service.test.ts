/**
 * Flow A through the hub: PullImage over ttrpc, the policy and public keys
 * from a real in-process KBS (tokens from a fake attestation agent), images
 * built and signed by @broker/image on Debian's docker-registry.
 */
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DataHubClient, RuntimeMeasurementResult, registerAttestationAgentService } from '@broker/guest-api';
import {
  buildImage,
  buildLayer,
  createSigstoreSignature,
  pushImage,
  pushSigstoreSignatures,
  RegistryClient,
} from '@broker/image';
import { type RunningRegistry, startDockerRegistry } from '@broker/image/testing';
import { TtrpcError, TtrpcServer } from '@broker/ttrpc';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type CdhConfig, parseCdhConfig } from '../config.js';
import { type RunningDataHub, startDataHub } from '../server.js';
import { captureLogger, FakeAa, startTestKbs, type TestKbs, tempDir } from '../testing/helpers.js';
import type { PullImageEvent } from './service.js';

const POLICY_URI = 'kbs:///default/image-policy/policy';
const SIGNATURE_KEY_URI = 'kbs:///default/signature-secret/pub-key';
const VENDOR_KEY_URI = 'kbs:///default/vendor-signature-secret/pub-key';

let kbs: TestKbs;
let registry: RunningRegistry;
let workshop: { publicKey: KeyObject; privateKey: KeyObject };
let vendor: { publicKey: KeyObject; privateKey: KeyObject };
const digests = new Map<string, string>();

const pem = (k: KeyObject) => k.export({ type: 'spki', format: 'pem' }).toString();
const localhost = () => `localhost:${registry.port}`;

function specPolicy(defaultType = 'reject'): string {
  return JSON.stringify({
    default: [{ type: defaultType }],
    transports: {
      docker: {
        [`${registry.host}/signed`]: [{ type: 'sigstoreSigned', keyPath: SIGNATURE_KEY_URI }],
        [localhost()]: [{ type: 'sigstoreSigned', keyPath: VENDOR_KEY_URI }],
      },
    },
  });
}

async function publish(
  client: RegistryClient,
  host: string,
  path: string,
  signer?: KeyObject,
): Promise<void> {
  const image = buildImage({
    layers: [
      await buildLayer([
        { name: 'app/hello', content: `hello from ${path}\n` },
        { name: 'bin/', type: 'directory' },
      ]),
    ],
  });
  const repo = { domain: host, path };
  const digest = await pushImage(client, repo, 'v1', image);
  digests.set(`${host}/${path}`, digest);
  if (signer !== undefined) {
    await pushSigstoreSignatures(client, repo, digest, [
      createSigstoreSignature(signer, { manifestDigest: digest, dockerReference: `${host}/${path}:v1` }),
    ]);
  }
}

beforeAll(async () => {
  [kbs, registry] = await Promise.all([startTestKbs(), startDockerRegistry()]);
  workshop = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  vendor = generateKeyPairSync('ec', { namedCurve: 'P-384' });
  await kbs.setResource('default/image-policy/policy', specPolicy());
  await kbs.setResource('default/signature-secret/pub-key', pem(workshop.publicKey));
  await kbs.setResource('default/vendor-signature-secret/pub-key', pem(vendor.publicKey));
  const client = new RegistryClient({ insecure: () => true });
  await publish(client, registry.host, 'signed/app', workshop.privateKey);
  await publish(client, registry.host, 'signed/unsigned');
  await publish(client, registry.host, 'signed/wrongkey', vendor.privateKey);
  await publish(client, registry.host, 'other/app');
  await publish(client, localhost(), 'vendor/app', vendor.privateKey);
  client.close();
}, 60_000);

afterAll(async () => {
  await Promise.all([kbs?.close(), registry?.stop()]);
});

let dir: string;
let cleanup: () => Promise<void>;
const stops: (() => Promise<void> | void)[] = [];
beforeEach(async () => {
  ({ dir, cleanup } = await tempDir('cdh-image-'));
});
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
  await cleanup();
});

function config(image: string, kbc = `name = "cc_kbc"\nurl = "${kbs.url}"`): CdhConfig {
  return parseCdhConfig(
    [
      `socket = "unix://${join(dir, 'cdh.sock')}"`,
      'credentials = []',
      '[aa]',
      `aa_socket = "unix://${join(dir, 'aa.sock')}"`,
      '[kbc]',
      kbc,
      '[image]',
      `work_dir = "${join(dir, 'work')}"`,
      image,
      // Loopback registries speak plain http: upstream's way is an insecure [[registry]].
      '[[image.registry_config.registry]]',
      `prefix = "${registry.host}"`,
      `location = "${registry.host}"`,
      'insecure = true',
      '[[image.registry_config.registry]]',
      `prefix = "${localhost()}"`,
      `location = "${localhost()}"`,
      'insecure = true',
      '',
    ].join('\n'),
  );
}

async function start(cfg: CdhConfig, events: PullImageEvent[] = []) {
  const aa = await FakeAa.start(join(dir, 'aa.sock'), kbs);
  stops.push(() => aa.close());
  const { logger, lines } = captureLogger();
  const hub: RunningDataHub = await startDataHub(cfg, {
    logger,
    imagePull: { extendMeasurement: async (e) => void events.push(e) },
  });
  stops.push(() => hub.close({ graceMs: 0 }));
  const client = await DataHubClient.connect(cfg.socket, { timeoutMs: 30_000 });
  stops.push(() => client.close());
  /** The KBS resources the hub asked for, from its log. */
  const asked = () =>
    lines
      .map((l) => JSON.parse(l) as { msg?: string; resource?: string })
      .filter((l) => l.msg === 'get resource called')
      .map((l) => l.resource);
  return { client, hub, lines, asked };
}

async function refusal(p: Promise<unknown>): Promise<string> {
  const e = await p.catch((x: unknown) => x);
  expect(e).toBeInstanceOf(TtrpcError);
  return (e as TtrpcError).message;
}

const rejected = (url: string, ref: string, why: string) =>
  `[CDH] [ERROR]: Image Pull error: Failed to pull image ${url} from all mirror/mapping locations or original location: image: ${ref}, error: ${why}`;
const SIGSTORE_DENIAL = 'Image policy rejected: Denied by policy: rejected by `sigstoreSigned` rule';

describe('PullImage with the policy from the KBS', () => {
  it('pulls a signed image, returns its manifest digest and records the event', async () => {
    const events: PullImageEvent[] = [];
    const { client, asked } = await start(config(`image_security_policy_uri = "${POLICY_URI}"`), events);
    const url = `${registry.host}/signed/app:v1`;
    const bundle = join(dir, 'bundle');
    const digest = await client.pullImage(url, bundle);
    expect(digest).toBe(digests.get(`${registry.host}/signed/app`));
    expect(readFileSync(join(bundle, 'rootfs/app/hello'), 'utf8')).toBe('hello from signed/app\n');
    expect(events).toEqual([
      {
        domain: 'github.com/confidential-containers',
        operation: 'PullImage',
        content: `{"image":"${url}", "digest":"${digest}"}`,
      },
    ]);
    expect(asked()).toEqual([POLICY_URI, SIGNATURE_KEY_URI]);
    // Both are cached on disk as upstream keeps them.
    expect(readdirSync(join(dir, 'work/image-security/kbs'))).toHaveLength(2);
  });

  it('an unsigned image under the signed prefix is rejected with the exact message and requests no key', async () => {
    const { client, asked } = await start(config(`image_security_policy_uri = "${POLICY_URI}"`));
    const url = `${registry.host}/signed/unsigned:v1`;
    const bundle = join(dir, 'bundle');
    expect(await refusal(client.pullImage(url, bundle))).toBe(rejected(url, url, SIGSTORE_DENIAL));
    expect(asked()).toEqual([POLICY_URI]);
    expect(existsSync(bundle)).toBe(false);
  });

  it('a wrong key, and an image from another registry path, are rejected', async () => {
    const { client } = await start(config(`image_security_policy_uri = "${POLICY_URI}"`));
    const wrong = `${registry.host}/signed/wrongkey:v1`;
    expect(await refusal(client.pullImage(wrong, join(dir, 'b1')))).toBe(
      rejected(wrong, wrong, SIGSTORE_DENIAL),
    );
    const other = `${registry.host}/other/app:v1`;
    expect(await refusal(client.pullImage(other, join(dir, 'b2')))).toBe(
      rejected(
        other,
        other,
        `Image policy rejected: Denied by policy: Policy \`reject\` rejects image ${other}`,
      ),
    );
  });

  it('a vendor host is verified with the vendor key (P-384)', async () => {
    const { client, asked } = await start(config(`image_security_policy_uri = "${POLICY_URI}"`));
    const digest = await client.pullImage(`${localhost()}/vendor/app:v1`, join(dir, 'bundle'));
    expect(digest).toBe(digests.get(`${localhost()}/vendor/app`));
    expect(asked()).toEqual([POLICY_URI, VENDOR_KEY_URI]);
  });

  it('an insecureAcceptAnything default accepts an unsigned image elsewhere (inline policy)', async () => {
    const inline = JSON.stringify(specPolicy('insecureAcceptAnything'));
    const { client } = await start(config(`image_security_policy = ${inline}`));
    const digest = await client.pullImage(`${registry.host}/other/app:v1`, join(dir, 'bundle'));
    expect(digest).toBe(digests.get(`${registry.host}/other/app`));
    const url = `${registry.host}/signed/unsigned:v1`;
    expect(await refusal(client.pullImage(url, join(dir, 'b2')))).toBe(rejected(url, url, SIGSTORE_DENIAL));
  });

  it('without any policy every image is accepted, with upstream warning', async () => {
    const { client, lines } = await start(config(''));
    await client.pullImage(`${registry.host}/signed/unsigned:v1`, join(dir, 'bundle'));
    expect(lines.some((l) => l.includes('No `image_security_policy` given'))).toBe(true);
  });

  it('a policy that does not parse fails the image client with upstream wording', async () => {
    await kbs.setResource('default/broken-policy/policy', '{"default":[]}');
    const { client } = await start(
      config('image_security_policy_uri = "kbs:///default/broken-policy/policy"'),
    );
    expect(await refusal(client.pullImage(`${registry.host}/other/app:v1`, join(dir, 'b')))).toBe(
      '[CDH] [ERROR]: Image Client error: Initialize signature validator failed: Invalid image policy file: List of verification policy requirements must not be empty',
    );
    expect(await refusal(client.pullImage('UPPER/x', join(dir, 'b')))).toMatch(/Invalid image policy file/);
  });

  it('a missing policy resource and a bad image reference', async () => {
    const { client } = await start(config('image_security_policy_uri = "kbs:///default/none/policy"'));
    expect(await refusal(client.pullImage(`${registry.host}/other/app:v1`, join(dir, 'b')))).toMatch(
      /^\[CDH\] \[ERROR\]: Image Client error: Initialize resource provider failed: Get resource failed: /,
    );
    const ok = await start(config(''));
    expect(await refusal(ok.client.pullImage('UPPER/x', join(dir, 'b')))).toBe(
      '[CDH] [ERROR]: Image Pull error: Illegal image reference',
    );
  }, 30_000);
});

describe('the runtime-measurement event through a real agent socket', () => {
  it('is sent as upstream sends it (offline KBC: no token needed)', async () => {
    const seen: [string, string, string][] = [];
    const server = new TtrpcServer();
    registerAttestationAgentService(server, {
      async extendRuntimeMeasurement(req) {
        seen.push([req.Domain, req.Operation, req.Content]);
        return RuntimeMeasurementResult.OK;
      },
    });
    await server.listen({ path: join(dir, 'aa.sock') });
    stops.push(() => server.close({ graceMs: 0 }));
    const resources = join(dir, 'offline.json');
    await writeFile(resources, JSON.stringify({}));
    const cfg = config('', 'name = "offline_fs_kbc"');
    const hub = await startDataHub(cfg, { offlineFsKbcFiles: [resources] });
    stops.push(() => hub.close({ graceMs: 0 }));
    const url = `${registry.host}/other/app:v1`;
    const digest = await hub.hub.pullImage(url, join(dir, 'bundle'));
    expect(seen).toEqual([
      ['github.com/confidential-containers', 'PullImage', `{"image":"${url}", "digest":"${digest}"}`],
    ]);
  });
});
