// Flow A with real processes: Debian's docker-registry on loopback holding images that our own tooling
// builds, pushes and signs (`image-policy generate-key` / `sign`), the KBS holding the spec's image
// policy and the public keys, and the guest components (attestation-agent, confidential-data-hub)
// started from initdata with `[image] image_security_policy_uri`. Each pull is a PullImage call on the
// CDH's ttrpc socket, as kata's agent makes it for a container image in the CVM.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataHubClient } from '@broker/guest-api';
import { type RunningRegistry, startDockerRegistry } from '@broker/image/testing';
import { TtrpcError } from '@broker/ttrpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishImage } from './helpers/images.js';
import { binary, runToEnd, start, waitForListen } from './helpers/process.js';
import {
  type GuestHandle,
  type KbsHandle,
  mustSucceed,
  prepareKbs,
  SAMPLE_REFERENCE_VALUES,
  startGuest,
} from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-image-e2e-'));
const keys = join(dir, 'keys');

const POLICY = 'default/image-policy/policy';
const SIGNATURE_KEY = 'default/signature-secret/pub-key';
const VENDOR_KEY = 'default/vendor-signature-secret/pub-key';
const APP_SECRET = 'default/app-secret/key';
const SIGSTORE_DENIAL = 'Image policy rejected: Denied by policy: rejected by `sigstoreSigned` rule';

let kbs: KbsHandle;
let guest: GuestHandle;
let hub: DataHubClient;
/** The workshop registry (its signed prefix, and vendor host 1 as `localhost:PORT`). */
let workshop: RunningRegistry;
/** A second registry: vendor host 2 as `127.0.0.1:PORT`, and an unlisted registry as `localhost:PORT`. */
let second: RunningRegistry;
const digests = new Map<string, string>();
const cleanups: (() => Promise<unknown>)[] = [];

const signedPrefix = () => `${workshop.host}/signed`;
const vendorHostA = () => `localhost:${workshop.port}`;
const vendorHostB = () => second.host;
const otherHost = () => `localhost:${second.port}`;

/** The spec's policy shape: default `reject`, the signed prefix with one key, two vendor hosts with another. */
function policy(defaultType: 'reject' | 'insecureAcceptAnything'): string {
  return JSON.stringify(
    {
      default: [{ type: defaultType }],
      transports: {
        docker: {
          [signedPrefix()]: [{ type: 'sigstoreSigned', keyPath: `kbs:///${SIGNATURE_KEY}` }],
          [vendorHostA()]: [{ type: 'sigstoreSigned', keyPath: `kbs:///${VENDOR_KEY}` }],
          [vendorHostB()]: [{ type: 'sigstoreSigned', keyPath: `kbs:///${VENDOR_KEY}` }],
        },
      },
    },
    null,
    2,
  );
}

/** cdh.toml's `[image]` table: the policy from the KBS, a work_dir of this guest, plain http to loopback. */
function imageToml(workDir: string): string {
  const registries = [workshop.host, vendorHostA(), second.host, otherHost()].map(
    (host) => `[[image.registry_config.registry]]\nlocation = "${host}"\ninsecure = true\n`,
  );
  return `[image]\nimage_security_policy_uri = "kbs:///${POLICY}"\nwork_dir = "${workDir}"\n\n${registries.join('\n')}`;
}

async function setResource(path: string, content: string | Buffer): Promise<void> {
  const file = join(dir, `resource-${path.replaceAll('/', '_')}`);
  writeFileSync(file, content);
  await mustSucceed(kbs.admin('set-resource', '--path', path, '--resource-file', file));
}

/** Builds and pushes an image holding `/app/hello`, signed with `signer` (a key file prefix) if given. */
async function publish(reference: string, signer?: string): Promise<void> {
  digests.set(reference, await publishImage(reference, { 'app/hello': `hello from ${reference}\n` }));
  if (signer !== undefined) {
    const out = await mustSucceed(
      runToEnd(binary('image-policy'), [
        'sign',
        '--key',
        join(keys, `${signer}.key`),
        '--plain-http',
        `docker://${reference}`,
      ]),
    );
    expect(out.trim()).toBe(digests.get(reference));
  }
}

/** KBS resource paths fetched so far, from the KBS's access log. */
function resourceGets(): string[] {
  return [...kbs.process.output().matchAll(/"method":"GET","path":"\/kbs\/v0\/resource\/([^ "?]+)/g)].map(
    (m) => m[1]!,
  );
}

/** Access-log lines of the KBS's health endpoint so far (the record leaves the query out). */
function healthzLines(): number {
  return (kbs.process.output().match(/"method":"GET","path":"\/healthz"/g) ?? []).length;
}

/**
 * Waits until the KBS has logged everything requested so far: a marker request to /healthz is answered
 * and logged after any request that completed before it was sent.
 */
async function kbsLogSettled(): Promise<void> {
  const before = healthzLines();
  await new Promise<void>((resolve, reject) => {
    const req = request(`${kbs.url}/healthz`, { ca: kbs.tls.certPem }, (res) => {
      res.resume();
      res.on('end', resolve);
    });
    req.on('error', reject);
    req.end();
  });
  while (healthzLines() <= before) await new Promise((r) => setTimeout(r, 20));
}

/** Resource paths the KBS served while `run` ran. */
async function resourcesDuring<T>(run: () => Promise<T>): Promise<{ result: T; fetched: string[] }> {
  await kbsLogSettled();
  const before = resourceGets().length;
  const result = await run();
  await kbsLogSettled();
  return { result, fetched: resourceGets().slice(before) };
}

async function refusal(p: Promise<unknown>): Promise<TtrpcError> {
  const e = await p.then(
    (digest) => new Error(`pulled (${String(digest)}) where a rejection was expected`),
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(TtrpcError);
  return e as TtrpcError;
}

/** The CDH's error for a rejected image, as kata reports it in the pod event. */
const rejection = (url: string, why: string) =>
  `[CDH] [ERROR]: Image Pull error: Failed to pull image ${url} from all mirror/mapping locations or original location: image: ${url}, error: ${why}`;

let bundles = 0;
const newBundle = () => join(dir, 'bundles', `pod-${++bundles}`);

beforeAll(async () => {
  kbs = await prepareKbs(dir);
  [workshop, second] = await Promise.all([startDockerRegistry(), startDockerRegistry(), kbs.start()]);
  cleanups.push(
    () => workshop.stop(),
    () => second.stop(),
  );
  mkdirSync(keys);
  await mustSucceed(runToEnd(binary('image-policy'), ['generate-key', join(keys, 'workshop')]));
  await mustSucceed(
    runToEnd(binary('image-policy'), ['generate-key', '--algorithm', 'ed25519', join(keys, 'vendor')]),
  );

  await publish(`${signedPrefix()}/app:v1`, 'workshop');
  await publish(`${signedPrefix()}/unsigned:v1`);
  await publish(`${signedPrefix()}/wrongkey:v1`, 'vendor');
  await publish(`${workshop.host}/other/app:v1`, 'workshop');
  await publish(`${vendorHostA()}/vendor/tool:v1`, 'vendor');
  await publish(`${vendorHostB()}/vendor/agent:v1`, 'vendor');
  await publish(`${vendorHostB()}/vendor/forged:v1`, 'workshop');
  await publish(`${otherHost()}/any/app:v1`);

  await setResource(POLICY, policy('reject'));
  await setResource(SIGNATURE_KEY, readFileSync(join(keys, 'workshop.pub')));
  await setResource(VENDOR_KEY, readFileSync(join(keys, 'vendor.pub')));
  await setResource(APP_SECRET, 'the pod secret');
  for (const rv of SAMPLE_REFERENCE_VALUES) await mustSucceed(kbs.admin('set-sample-reference-value', ...rv));
  await mustSucceed(kbs.admin('set-resource-policy', '--affirming'));

  const guestDir = join(dir, 'guest');
  guest = await startGuest(kbs, guestDir, { cdhTomlExtra: imageToml(join(guestDir, 'image-work')) });
  hub = await DataHubClient.connect(`unix://${guest.cdhSock}`, { timeoutMs: 60_000 });
}, 120_000);

afterAll(async () => {
  hub?.close();
  await guest?.stop();
  for (const c of cleanups.reverse()) await c();
  await kbs?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('flow A: PullImage through the CDH, with the image policy from the KBS', () => {
  // First pull of this CVM: it attests and fetches the policy; the order of these cases matters.
  it('an unsigned image under the signed prefix is rejected with the exact error, and no key or secret is requested', async () => {
    const url = `${signedPrefix()}/unsigned:v1`;
    const bundle = newBundle();
    const { result: e, fetched } = await resourcesDuring(() => refusal(hub.pullImage(url, bundle)));
    expect(e.codeName).toBe('INTERNAL');
    expect(e.message).toBe(rejection(url, SIGSTORE_DENIAL));
    expect(e.message).toContain('Image Pull error');
    // The policy only: an image without signatures needs no key, and the pod gets no secret.
    expect(fetched).toEqual([POLICY]);
    expect(existsSync(join(bundle, 'rootfs'))).toBe(false);
  });

  it('a signed image under the prefix is pulled: manifest digest returned, rootfs unpacked', async () => {
    const url = `${signedPrefix()}/app:v1`;
    const bundle = newBundle();
    const { result: digest, fetched } = await resourcesDuring(() => hub.pullImage(url, bundle));
    expect(digest).toBe(digests.get(url));
    expect(readFileSync(join(bundle, 'rootfs/app/hello'), 'utf8')).toBe(`hello from ${url}\n`);
    // The policy is cached from the first pull; the key is fetched now, to check the signature.
    expect(fetched).toEqual([SIGNATURE_KEY]);
    expect(guest.cdh.output()).toContain('image pulled');
  });

  it('images on both vendor hosts, signed with the vendor key, are pulled', async () => {
    for (const url of [`${vendorHostA()}/vendor/tool:v1`, `${vendorHostB()}/vendor/agent:v1`]) {
      const bundle = newBundle();
      expect(await hub.pullImage(url, bundle)).toBe(digests.get(url));
      expect(readFileSync(join(bundle, 'rootfs/app/hello'), 'utf8')).toBe(`hello from ${url}\n`);
    }
    expect(resourceGets()).toContain(VENDOR_KEY);
  });

  it('a signature made with the wrong key is rejected, under the prefix and on a vendor host', async () => {
    for (const url of [`${signedPrefix()}/wrongkey:v1`, `${vendorHostB()}/vendor/forged:v1`]) {
      const bundle = newBundle();
      const e = await refusal(hub.pullImage(url, bundle));
      expect(e.message).toBe(rejection(url, SIGSTORE_DENIAL));
      expect(existsSync(join(bundle, 'rootfs'))).toBe(false);
    }
  });

  it('another registry, and a path outside the signed prefix, fall to the default reject', async () => {
    // Signed with the workshop key, but outside the prefix: the signature does not matter.
    for (const url of [`${workshop.host}/other/app:v1`, `${otherHost()}/any/app:v1`]) {
      const { result: e, fetched } = await resourcesDuring(() => refusal(hub.pullImage(url, newBundle())));
      expect(e.message).toBe(
        rejection(url, `Image policy rejected: Denied by policy: Policy \`reject\` rejects image ${url}`),
      );
      expect(fetched).toEqual([]);
    }
  });

  it('no pull ever requested the application secret', () => {
    expect(new Set(resourceGets())).toEqual(new Set([POLICY, SIGNATURE_KEY, VENDOR_KEY]));
    expect(resourceGets()).not.toContain(APP_SECRET);
  });

  describe('the operator relaxes the default to insecureAcceptAnything', () => {
    beforeAll(async () => {
      await setResource(POLICY, policy('insecureAcceptAnything'));
    });

    it('a running CDH, and one restarted on the same work_dir, keep the cached policy (upstream cache)', async () => {
      const url = `${otherHost()}/any/app:v1`;
      const running = await resourcesDuring(() => refusal(hub.pullImage(url, newBundle())));
      expect(running.result.message).toContain('Policy `reject` rejects image');
      expect(running.fetched).toEqual([]);

      // The same CVM's CDH restarted: the policy comes from <work_dir>/image-security/kbs, not the KBS.
      hub.close();
      await guest.cdh.stop();
      const cdh = start(binary('confidential-data-hub'), ['-c', join(dir, 'guest', 'initdata', 'cdh.toml')]);
      cleanups.push(() => cdh.stop());
      await waitForListen({ path: guest.cdhSock }, cdh);
      hub = await DataHubClient.connect(`unix://${guest.cdhSock}`, { timeoutMs: 60_000 });
      const restarted = await resourcesDuring(() => refusal(hub.pullImage(url, newBundle())));
      expect(restarted.result.message).toContain('Policy `reject` rejects image');
      expect(restarted.fetched).toEqual([]);
    });

    it('a new CVM gets the relaxed policy: other registries accepted, the signed prefix still enforced', async () => {
      const guestDir = join(dir, 'relaxed');
      const relaxed = await startGuest(kbs, guestDir, {
        cdhTomlExtra: imageToml(join(guestDir, 'image-work')),
      });
      cleanups.push(() => relaxed.stop());
      const client = await DataHubClient.connect(`unix://${relaxed.cdhSock}`, { timeoutMs: 60_000 });
      try {
        const url = `${otherHost()}/any/app:v1`;
        const bundle = newBundle();
        const { result: digest, fetched } = await resourcesDuring(() => client.pullImage(url, bundle));
        expect(digest).toBe(digests.get(url));
        expect(readFileSync(join(bundle, 'rootfs/app/hello'), 'utf8')).toBe(`hello from ${url}\n`);
        expect(fetched).toEqual([POLICY]);

        const unsigned = `${signedPrefix()}/unsigned:v1`;
        const e = await refusal(client.pullImage(unsigned, newBundle()));
        expect(e.message).toBe(rejection(unsigned, SIGSTORE_DENIAL));
        expect(await client.pullImage(`${signedPrefix()}/app:v1`, newBundle())).toBe(
          digests.get(`${signedPrefix()}/app:v1`),
        );
      } finally {
        client.close();
      }
    });
  });
});
