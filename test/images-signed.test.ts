// The signed images end to end: `make images --sign-key` builds the tools image signed in cosign's format
// for a local docker-registry's repository; skopeo publishes the image index, both platforms and the
// signature manifests from the `.attached` layout; openssl checks the signatures; `image-policy check`
// and the confidential data hub's PullImage (policy and key served by a KBS) accept the image with the
// right key and refuse it with another.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataHubClient } from '@broker/guest-api';
import { MEDIA_TYPE, RegistryClient } from '@broker/image';
import { type RunningRegistry, startDockerRegistry } from '@broker/image/testing';
import { TtrpcError } from '@broker/ttrpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binary, ROOT, runToEnd } from './helpers/process.js';
import {
  type GuestHandle,
  type KbsHandle,
  mustSucceed,
  openssl,
  prepareKbs,
  SAMPLE_REFERENCE_VALUES,
  startGuest,
} from './helpers/stack.js';

interface Summary {
  name: string;
  indexDigest: string;
  platforms: { architecture: string; manifestDigest: string }[];
  signatures: string[];
}

interface Manifest {
  mediaType: string;
  manifests?: { digest: string; platform?: { architecture: string }; artifactType?: string }[];
  layers?: { mediaType: string; digest: string; annotations?: Record<string, string> }[];
}

const VERSION = '0.1.0';
const REF_NAME = 'org.opencontainers.image.ref.name';
const COSIGN_SIGNATURE = 'dev.cosignproject.cosign/signature';
const SIGSTORE_DENIAL = 'Image policy rejected: Denied by policy: rejected by `sigstoreSigned` rule';
const POLICY = 'default/image-policy/policy';
const OTHER_POLICY = 'default/image-policy/other-key';
const SIGNATURE_KEY = 'default/broker-images/pub-key';
const OTHER_KEY = 'default/other-signature/pub-key';
/** This machine's platform, the one the data hub and `image-policy check` choose from the index. */
const HOST_ARCH = process.arch === 'x64' ? 'amd64' : process.arch;

const work = mkdtempSync(join(tmpdir(), 'broker-images-signed-'));
const out = join(work, 'images');
const layout = join(out, 'tools');
const attached = join(out, 'tools.attached');
const key = (name: string) => join(work, name);

let registry: RunningRegistry;
let tools: Summary;
const repository = () => `${registry.host}/broker/tools`;
/** The same image under a second name that holds only the index's signature. */
const indexOnly = () => `${registry.host}/broker/tools-index-only`;
const sha256 = (b: Buffer | string) => `sha256:${createHash('sha256').update(b).digest('hex')}`;
const sigTag = (digest: string) => `sha256-${digest.slice('sha256:'.length)}.sig`;
const platformDigest = (arch: string) => tools.platforms.find((p) => p.architecture === arch)!.manifestDigest;

function skopeo(...args: string[]): string {
  return execFileSync('skopeo', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** What the registry serves for `repo:tag`, as skopeo reads it. */
function served(repo: string, tag: string): Buffer {
  return execFileSync('skopeo', ['inspect', '--raw', '--tls-verify=false', `docker://${repo}:${tag}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** The layout's `index.json` entries by tag. */
function layoutTags(dir: string): Map<string, { digest: string; mediaType: string }> {
  const index = JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8')) as {
    manifests: { digest: string; mediaType: string; annotations: Record<string, string> }[];
  };
  return new Map(index.manifests.map((m) => [m.annotations[REF_NAME]!, m]));
}

function policy(keyResource: string): string {
  return JSON.stringify({
    default: [{ type: 'reject' }],
    transports: {
      docker: {
        // cosign signs the repository (`critical.identity.docker-reference` without a tag): a pull
        // by tag is accepted under matchRepository, not under the default matchRepoDigestOrExact.
        [repository()]: [
          {
            type: 'sigstoreSigned',
            keyPath: `kbs:///${keyResource}`,
            signedIdentity: { type: 'matchRepository' },
          },
        ],
        [indexOnly()]: [
          {
            type: 'sigstoreSigned',
            keyPath: `kbs:///${keyResource}`,
            signedIdentity: { type: 'exactRepository', dockerRepository: repository() },
          },
        ],
      },
    },
  });
}

describe('signed images: built, published with skopeo, verified by image-policy and the data hub', () => {
  beforeAll(async () => {
    binary('broker-tools');
    for (const name of ['signer', 'other']) {
      openssl(
        'genpkey',
        '-algorithm',
        'EC',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-out',
        key(`${name}.pem`),
      );
      openssl('pkey', '-in', key(`${name}.pem`), '-pubout', '-out', key(`${name}.pub`));
    }
    registry = await startDockerRegistry();
    execFileSync(
      process.execPath,
      [
        join(ROOT, 'scripts/images.mjs'),
        '--out',
        out,
        '--cache',
        join(ROOT, 'dist', 'image-cache'),
        '--image',
        'tools',
        '--sign-key',
        key('signer.pem'),
        '--repository',
        `${registry.host}/broker`,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const summaries = JSON.parse(readFileSync(join(out, 'images.json'), 'utf8')) as Summary[];
    expect(summaries.map((s) => s.name)).toEqual(['tools']);
    tools = summaries[0]!;
  }, 600_000);

  afterAll(async () => {
    await registry?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it('signs the index and both platform manifests, tagged sha256-<hex>.sig in the attached layout', () => {
    expect(tools.platforms.map((p) => p.architecture)).toEqual(['amd64', 'arm64']);
    const signed = [tools.indexDigest, platformDigest('amd64'), platformDigest('arm64')];
    expect(tools.signatures).toEqual(signed.map(sigTag));
    const tags = layoutTags(attached);
    for (const tag of tools.signatures) expect(tags.get(tag)?.mediaType).toBe(MEDIA_TYPE.ociManifest);
    // Beside them, the SBOM's referrers index under OCI distribution's fallback tag.
    expect(tags.get(`sha256-${tools.indexDigest.slice(7)}`)?.mediaType).toBe(MEDIA_TYPE.ociIndex);
  });

  it('skopeo copies the index, both platforms and the three signature manifests to the registry unchanged', () => {
    skopeo(
      'copy',
      '--all',
      '--dest-tls-verify=false',
      `oci:${layout}:${VERSION}`,
      `docker://${repository()}:${VERSION}`,
    );
    const tags = layoutTags(attached);
    for (const tag of tools.signatures)
      skopeo('copy', '--dest-tls-verify=false', `oci:${attached}:${tag}`, `docker://${repository()}:${tag}`);

    const index = served(repository(), VERSION);
    expect(sha256(index)).toBe(tools.indexDigest);
    expect(
      (JSON.parse(index.toString()) as Manifest).manifests?.map((m) => [m.platform?.architecture, m.digest]),
    ).toEqual(tools.platforms.map((p) => [p.architecture, p.manifestDigest]));
    for (const tag of tools.signatures) {
      const bytes = served(repository(), tag);
      expect(sha256(bytes)).toBe(tags.get(tag)?.digest);
      const sig = JSON.parse(bytes.toString()) as Manifest;
      expect(sig.layers?.[0]?.mediaType).toBe('application/vnd.dev.cosign.simplesigning.v1+json');
      expect(sig.layers?.[0]?.annotations?.[COSIGN_SIGNATURE]).toMatch(/^[A-Za-z0-9+/]+=*$/);
    }
    // A digest nobody signed has no signature tag.
    expect(() => served(repository(), sigTag(sha256('unsigned')))).toThrow(/manifest unknown/i);
  });

  it('skopeo rewrites the SBOM referrers index (artifactType dropped); our registry client pushes it as built', async () => {
    const tag = `sha256-${tools.indexDigest.slice(7)}`;
    const built = layoutTags(attached).get(tag)!;
    skopeo(
      'copy',
      '--all',
      '--dest-tls-verify=false',
      `oci:${attached}:${tag}`,
      `docker://${repository()}:${tag}`,
    );
    const copied = served(repository(), tag);
    expect(sha256(copied)).not.toBe(built.digest);
    const [entry] = (JSON.parse(copied.toString()) as Manifest).manifests ?? [];
    expect(entry?.artifactType).toBeUndefined();
    // The referrer manifest itself (with its subject and the SBOM) was copied unchanged, so only the
    // index's exact bytes need to be put again.
    const bytes = readFileSync(join(attached, 'blobs', 'sha256', built.digest.slice(7)));
    const client = new RegistryClient({ insecure: () => true });
    try {
      await client.putManifest(
        { domain: registry.host, path: 'broker/tools' },
        tag,
        bytes,
        MEDIA_TYPE.ociIndex,
      );
    } finally {
      client.close();
    }
    const pushed = served(repository(), tag);
    expect(sha256(pushed)).toBe(built.digest);
    expect((JSON.parse(pushed.toString()) as Manifest).manifests?.[0]?.artifactType).toBe(
      'application/spdx+json',
    );
  });

  it('openssl verifies each served signature over its payload, which names the digest and the repository', async () => {
    for (const digest of [tools.indexDigest, ...tools.platforms.map((p) => p.manifestDigest)]) {
      const layer = (JSON.parse(served(repository(), sigTag(digest)).toString()) as Manifest).layers![0]!;
      const res = await fetch(`http://${registry.host}/v2/broker/tools/blobs/${layer.digest}`);
      const payload = Buffer.from(await res.arrayBuffer());
      expect(sha256(payload)).toBe(layer.digest);
      expect(JSON.parse(payload.toString())).toMatchObject({
        critical: {
          type: 'cosign container image signature',
          image: { 'docker-manifest-digest': digest },
          identity: { 'docker-reference': repository() },
        },
      });
      writeFileSync(key('payload'), payload);
      writeFileSync(key('payload.sig'), Buffer.from(layer.annotations![COSIGN_SIGNATURE]!, 'base64'));
      const verify = (pub: string) =>
        runToEnd('openssl', [
          'dgst',
          '-sha256',
          '-verify',
          key(pub),
          '-signature',
          key('payload.sig'),
          key('payload'),
        ]);
      expect(await verify('signer.pub')).toMatchObject({ code: 0, stdout: 'Verified OK\n' });
      expect(await verify('other.pub')).toMatchObject({ code: 1, stdout: 'Verification failure\n' });
    }
  });

  describe('image-policy check with a sigstoreSigned keyPath policy', () => {
    const check = (pub: string, identity: object | undefined, ...args: string[]) => {
      const file = key(`policy-${pub}-${identity === undefined ? 'default' : 'repository'}.json`);
      writeFileSync(
        file,
        JSON.stringify({
          default: [{ type: 'reject' }],
          transports: {
            docker: {
              [`${registry.host}/broker`]: [
                { type: 'sigstoreSigned', keyPath: key(pub), ...(identity && { signedIdentity: identity }) },
              ],
            },
          },
        }),
      );
      return runToEnd(binary('image-policy'), ['check', '--policy', file, '--plain-http', ...args]);
    };
    const tag = () => `docker://${repository()}:${VERSION}`;

    it('accepts the image on both platforms with the public key, checking each platform manifest', async () => {
      for (const arch of ['amd64', 'arm64']) {
        const r = await check(
          'signer.pub',
          { type: 'matchRepository' },
          '--platform',
          `linux/${arch}`,
          tag(),
        );
        expect(r.code).toBe(0);
        expect(r.stdout).toContain(`manifest: ${platformDigest(arch)}\n`);
        expect(r.stdout).toContain(
          `requirement 1: sigstoreSigned (keyPath ${key('signer.pub')}; signedIdentity matchRepository): accepted (signature for ${repository()})\n`,
        );
        expect(r.stdout).toMatch(/decision: accepted\n$/);
      }
    });

    it('rejects it with another key, with containers/image reason', async () => {
      const r = await check('other.pub', { type: 'matchRepository' }, tag());
      expect(r.code).toBe(1);
      expect(r.stdout).toContain(
        'rejected: cryptographic signature verification failed: invalid signature when validating ASN.1 encoded signature\n',
      );
      expect(r.stdout).toMatch(/decision: rejected\n$/);
    });

    it("containers/image's default signedIdentity refuses the repository-only identity cosign signs, by tag and by digest", async () => {
      for (const image of [tag(), `docker://${repository()}@${platformDigest(HOST_ARCH)}`]) {
        const r = await check('signer.pub', undefined, '--policy-semantics', 'containers-image', image);
        expect(r.code).toBe(1);
        expect(r.stdout).toContain(`rejected: Signature for identity "${repository()}" is not accepted\n`);
      }
    });
  });

  describe('the data hub pulls it, with the policy and the public key from a KBS', () => {
    const dir = join(work, 'stack');
    let kbs: KbsHandle;
    const guests: GuestHandle[] = [];
    const hubs: DataHubClient[] = [];

    const setResource = async (path: string, content: string | Buffer) => {
      const file = join(work, `resource-${path.replaceAll('/', '_')}`);
      writeFileSync(file, content);
      await mustSucceed(kbs.admin('set-resource', '--path', path, '--resource-file', file));
    };

    /** A CVM's guest components whose data hub takes its image policy from the KBS resource `policyResource`. */
    const guest = async (
      name: string,
      policyResource: string,
    ): Promise<{ g: GuestHandle; hub: DataHubClient }> => {
      const guestDir = join(dir, name);
      const g = await startGuest(kbs, guestDir, {
        cdhTomlExtra: `[image]\nimage_security_policy_uri = "kbs:///${policyResource}"\nwork_dir = "${join(guestDir, 'image-work')}"\n\n[[image.registry_config.registry]]\nlocation = "${registry.host}"\ninsecure = true\n`,
      });
      guests.push(g);
      const hub = await DataHubClient.connect(`unix://${g.cdhSock}`, { timeoutMs: 120_000 });
      hubs.push(hub);
      return { g, hub };
    };

    const refusal = async (p: Promise<unknown>): Promise<TtrpcError> => {
      const e = await p.then(
        (digest) => new Error(`pulled (${String(digest)}) where a rejection was expected`),
        (x: unknown) => x,
      );
      expect(e).toBeInstanceOf(TtrpcError);
      return e as TtrpcError;
    };
    const rejection = (url: string, why: string) =>
      `[CDH] [ERROR]: Image Pull error: Failed to pull image ${url} from all mirror/mapping locations or original location: image: ${url}, error: ${why}`;

    beforeAll(async () => {
      // The image once more under a second name, with only the index's signature.
      skopeo(
        'copy',
        '--all',
        '--dest-tls-verify=false',
        `oci:${layout}:${VERSION}`,
        `docker://${indexOnly()}:${VERSION}`,
      );
      const indexSig = sigTag(tools.indexDigest);
      skopeo(
        'copy',
        '--dest-tls-verify=false',
        `oci:${attached}:${indexSig}`,
        `docker://${indexOnly()}:${indexSig}`,
      );

      mkdirSync(dir, { recursive: true });
      kbs = await prepareKbs(dir);
      await kbs.start();
      await setResource(POLICY, policy(SIGNATURE_KEY));
      await setResource(OTHER_POLICY, policy(OTHER_KEY));
      await setResource(SIGNATURE_KEY, readFileSync(key('signer.pub')));
      await setResource(OTHER_KEY, readFileSync(key('other.pub')));
      for (const rv of SAMPLE_REFERENCE_VALUES)
        await mustSucceed(kbs.admin('set-sample-reference-value', ...rv));
      await mustSucceed(kbs.admin('set-resource-policy', '--affirming'));
    }, 120_000);

    afterAll(async () => {
      for (const h of hubs) h.close();
      for (const g of guests) await g.stop();
      await kbs?.stop();
    });

    it('PullImage returns the platform manifest digest and unpacks /usr/local/bin/broker-tools', async () => {
      const { g, hub } = await guest('signer', POLICY);
      const url = `${repository()}:${VERSION}`;
      const bundle = join(dir, 'bundles', 'signed');
      // The data hub chooses this machine's platform from the index and checks that manifest's signature.
      expect(await hub.pullImage(url, bundle)).toBe(platformDigest(HOST_ARCH));
      const exe = join(bundle, 'rootfs/usr/local/bin/broker-tools');
      expect(lstatSync(exe).isFile()).toBe(true);
      expect(lstatSync(exe).mode & 0o777).toBe(0o755);
      expect(readlinkSync(join(bundle, 'rootfs/usr/local/bin/secret'))).toBe('broker-tools');
      // The unpacked executable runs, and is the build's multi-call executable.
      expect(execFileSync(exe, ['--list-commands'], { encoding: 'utf8' })).toBe(
        execFileSync(binary('broker-tools'), ['--list-commands'], { encoding: 'utf8' }),
      );
      expect(g.cdh.output()).toContain('image pulled');
    }, 180_000);

    it('the index signature alone does: the data hub accepts a signature on the index by default (image-rs)', async () => {
      const hub = hubs[0]!;
      const url = `${indexOnly()}:${VERSION}`;
      const bundle = join(dir, 'bundles', 'index-only');
      expect(await hub.pullImage(url, bundle)).toBe(platformDigest(HOST_ARCH));
      expect(existsSync(join(bundle, 'rootfs/usr/local/bin/broker-tools'))).toBe(true);
      // image-rs' newer behaviour, `image-policy check --index-signatures`, accepts the index's signature.
      const file = key('index-only-policy.json');
      writeFileSync(file, policy(SIGNATURE_KEY).replaceAll(`kbs:///${SIGNATURE_KEY}`, key('signer.pub')));
      const r = await runToEnd(binary('image-policy'), [
        'check',
        '--policy',
        file,
        '--plain-http',
        '--index-signatures',
        `docker://${url}`,
      ]);
      expect(r.stdout).toMatch(/decision: accepted\n$/);
      expect(r.code).toBe(0);
    });

    it('a policy naming another key refuses the pull with the upstream error, and unpacks nothing', async () => {
      const { g, hub } = await guest('other', OTHER_POLICY);
      const url = `${repository()}:${VERSION}`;
      const bundle = join(dir, 'bundles', 'other-key');
      const e = await refusal(hub.pullImage(url, bundle));
      expect(e.codeName).toBe('INTERNAL');
      expect(e.message).toBe(rejection(url, SIGSTORE_DENIAL));
      expect(g.cdh.output()).toContain('cryptographic signature verification failed');
      expect(existsSync(join(bundle, 'rootfs'))).toBe(false);
    }, 120_000);
  });
});
