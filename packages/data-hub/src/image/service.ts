/**
 * `api.ImagePullService/PullImage(image_url, bundle_path)`, as the CDH
 * serves it with image-rs, on `@broker/image`:
 *
 * 1. On the first call, the "image client" is set up (and set up again after
 *    a failure): the signature policy from `image_security_policy_uri`
 *    (through the KBS, cached on disk like upstream) or the inline
 *    `image_security_policy`, registry credentials and registry settings.
 *    Without a policy every image is accepted, with upstream's warning.
 * 2. Each pull evaluates the policy for the image before any layer is
 *    fetched. `keyPath` keys (`kbs:///…` or files) are fetched only when a
 *    signature has to be checked, so a rejected unsigned image requests no
 *    secret at all.
 * 3. The image is pulled, verified and unpacked to `<bundle_path>/rootfs`,
 *    trying mirrors and remapped locations in image-rs' order.
 * 4. The pull is recorded as a `PullImage` runtime-measurement event through
 *    the attestation agent (when its socket exists), as upstream does.
 * 5. The manifest digest is returned.
 *
 * Every pull is judged afresh: image-rs skips the signature check when the
 * image's config digest is already in its meta store (so an image accepted
 * once, by any reference, is later bundled without a check); here nothing is
 * reused between pulls.
 */
import { existsSync } from 'node:fs';
import { messageOf } from '@broker/cli';
import {
  attestationAgentUnwrapper,
  type DockerReference,
  ImagePullError,
  type KeyUnwrapper,
  type Platform,
  type Policy,
  parseAuthFile,
  parseImageReference,
  parsePolicy,
  parseRegistriesDFile,
  pullImage,
  type RegistriesD,
  RegistryClient,
  type RegistryClientOptions,
  resolveProxies,
} from '@broker/image';
import type { Logger } from 'pino';
import { type CdhConfig, parseRegistryConfiguration, type RegistryConfig } from '../config.js';
import { DataHubError, GetResourceFailed } from '../errors.js';
import { decryptionKeyUnwrappers } from './decryption-keys.js';
import { ImageClientFailed, ImagePullFailed } from './errors.js';
import { pullAttempts, tidyRegistryConfig } from './registries.js';
import { ResourceProvider } from './resources.js';

/** A runtime-measurement event (the Confidential Containers event log format). */
export interface PullImageEvent {
  readonly domain: string;
  readonly operation: string;
  readonly content: string;
}

export interface ImagePullServiceOptions {
  /** Registry client settings on top of the config's (tests). */
  readonly registry?: Partial<RegistryClientOptions>;
  /** Platform to choose from an index (default this machine's). */
  readonly platform?: Platform;
  /** Records a pull; default: the attestation agent's ExtendRuntimeMeasurement. */
  readonly extendMeasurement?: (event: PullImageEvent) => Promise<void>;
}

interface ImageClient {
  readonly policy: Policy | null;
  /** `[image] decryption_keys` (jwe, pgp, pkcs7), then the attestation-agent key provider. */
  readonly decryption: readonly KeyUnwrapper[];
  readonly registryConfig: RegistryConfig | null;
  readonly client: RegistryClient;
  /** Lookaside stores of GPG signatures (`sigstore_config[_uri]`), for `signedBy`. */
  readonly registriesD?: RegistriesD;
}

/** `AA` measurement timeout of upstream (10 s). */
const MEASUREMENT_TIMEOUT_MS = 10_000;

export class ImagePullService {
  readonly #config: CdhConfig;
  readonly #resources: ResourceProvider;
  /** Fetches a KBS resource without caching it on disk (layer KEKs are never written). */
  readonly #getResource: (uri: string) => Promise<Uint8Array>;
  readonly #log: Logger | undefined;
  readonly #options: ImagePullServiceOptions;
  #client: Promise<ImageClient> | undefined;

  constructor(
    config: CdhConfig,
    deps: { getResource: (uri: string) => Promise<Uint8Array>; logger?: Logger },
    options: ImagePullServiceOptions = {},
  ) {
    this.#config = config;
    this.#log = deps.logger;
    this.#options = options;
    this.#getResource = deps.getResource;
    this.#resources = new ResourceProvider({ workDir: config.image.workDir, getResource: deps.getResource });
  }

  close(): void {
    const c = this.#client;
    this.#client = undefined;
    c?.then((x) => x.client.close()).catch(() => undefined);
  }

  #imageClient(): Promise<ImageClient> {
    this.#client ??= this.#setUp().catch((e: unknown) => {
      this.#client = undefined;
      throw e;
    });
    return this.#client;
  }

  async #setUp(): Promise<ImageClient> {
    const image = this.#config.image;
    const resource = async (uri: string) => {
      try {
        return await this.#resources.get(uri);
      } catch (e) {
        throw new ImageClientFailed(`Initialize resource provider failed: ${messageOf(e)}`, { cause: e });
      }
    };

    let credentials: RegistryClientOptions['credentials'];
    if (image.authenticatedRegistryCredentialsUri !== null) {
      this.#log?.info({ resource: image.authenticatedRegistryCredentialsUri }, 'getting registry auth');
      const bytes = await resource(image.authenticatedRegistryCredentialsUri);
      try {
        credentials = parseAuthFile(Buffer.from(bytes).toString('utf8'));
      } catch (e) {
        throw new ImageClientFailed(`Initialize auth module failed: ${messageOf(e)}`, { cause: e });
      }
    }

    let policy: Policy | null = null;
    let policyText: Uint8Array | string | null = image.imageSecurityPolicy;
    if (image.imageSecurityPolicyUri !== null) {
      this.#log?.info({ resource: image.imageSecurityPolicyUri }, 'getting image security policy');
      policyText = await resource(image.imageSecurityPolicyUri);
    }
    if (policyText !== null) {
      try {
        policy = parsePolicy(policyText, { semantics: image.policySemantics });
      } catch (e) {
        throw new ImageClientFailed(
          `Initialize signature validator failed: Invalid image policy file: ${messageOf(e)}`,
          {
            cause: e,
          },
        );
      }
    } else {
      this.#log?.warn(
        'No `image_security_policy` given, thus all images can be pulled by the image client without filtering.',
      );
    }

    // image-rs: one registries.d-style YAML file naming the GPG signature stores (`signedBy`).
    let registriesD: RegistriesD | undefined;
    let sigstoreText: Uint8Array | string | null = image.sigstoreConfig;
    if (image.sigstoreConfigUri !== null) sigstoreText = await resource(image.sigstoreConfigUri);
    if (sigstoreText !== null) {
      try {
        registriesD = parseRegistriesDFile(Buffer.from(sigstoreText).toString('utf8'), 'sigstore_config');
      } catch (e) {
        throw new ImageClientFailed(
          `Initialize signature validator failed: Invalid simple signing sigstore config: ${messageOf(e)}`,
          { cause: e },
        );
      }
    }

    let registryConfig = image.registryConfig;
    if (registryConfig === null && image.registryConfigurationUri !== null) {
      const bytes = await resource(image.registryConfigurationUri);
      try {
        registryConfig = parseRegistryConfiguration(Buffer.from(bytes).toString('utf8'));
      } catch (e) {
        throw new ImageClientFailed(`Malwared registry configuration: ${messageOf(e)}`, { cause: e });
      }
    }
    if (registryConfig !== null) {
      try {
        registryConfig = tidyRegistryConfig(registryConfig);
      } catch (e) {
        throw new ImageClientFailed(`Malwared registry configuration: ${messageOf(e)}`, { cause: e });
      }
    }
    // `[image.image_pull_proxy]` (or `agent.https_proxy` & co.): every registry request, signatures included.
    const proxy = image.imagePullProxy ?? undefined;
    if (proxy !== undefined) {
      try {
        resolveProxies(proxy);
      } catch (e) {
        throw new ImageClientFailed(`Invalid image pull proxy: ${messageOf(e)}`, { cause: e });
      }
      this.#log?.info(
        { https: proxy.httpsProxy !== null, http: proxy.httpProxy !== null, noProxy: proxy.noProxy },
        'pulling images through a proxy',
      );
    }

    // Plain http where the registry settings say `insecure`; image-rs decides per attempt, by the same entries.
    const insecureHosts = new Set<string>();
    for (const r of registryConfig?.registry ?? []) {
      if (r.insecure && r.location !== '') insecureHosts.add(r.location.split('/')[0] ?? '');
      for (const m of r.mirror) if (m.insecure) insecureHosts.add(m.location.split('/')[0] ?? '');
    }
    const extra = this.#options.registry ?? {};
    const client = new RegistryClient({
      ...(credentials !== undefined ? { credentials } : {}),
      ...(image.extraRootCertificates.length > 0 ? { ca: image.extraRootCertificates } : {}),
      ...(proxy !== undefined ? { proxy } : {}),
      ...extra,
      insecure: (host) => insecureHosts.has(host) || (extra.insecure?.(host) ?? false),
    });
    const decryption = [
      ...(await this.#decryptionKeys()),
      attestationAgentUnwrapper((kid) => this.#kek(kid)),
    ];
    return {
      policy,
      registryConfig,
      client,
      decryption,
      ...(registriesD !== undefined ? { registriesD } : {}),
    };
  }

  /** Pulls `imageUrl` into `<bundlePath>/rootfs`; resolves with the manifest digest. */
  async pullImage(imageUrl: string, bundlePath: string): Promise<string> {
    this.#log?.info({ image: imageUrl.slice(0, 512), bundle: bundlePath.slice(0, 512) }, 'pull image called');
    const { policy, registryConfig, client, registriesD, decryption } = await this.#imageClient();
    let ref: DockerReference;
    try {
      ref = parseImageReference(imageUrl);
    } catch (e) {
      throw new ImagePullFailed('Illegal image reference', { cause: e });
    }
    let attempts: ReturnType<typeof pullAttempts>;
    try {
      const suffix = ref.digest !== undefined ? `@${ref.digest}` : `:${ref.tag ?? 'latest'}`;
      attempts = pullAttempts({ domain: ref.domain, path: ref.path, suffix }, registryConfig);
    } catch (e) {
      throw new ImagePullFailed(
        `failed to compose a legal image reference with given registry configuration: ${messageOf(e)}`,
        {
          cause: e,
        },
      );
    }
    const failures: string[] = [];
    for (const attempt of attempts) {
      try {
        const result = await pullImage(attempt.reference, bundlePath, {
          client,
          policy,
          readKey: (uri) => this.#resources.get(uri),
          ...(this.#options.platform !== undefined ? { platform: this.#options.platform } : {}),
          limits: this.#config.image.expansionLimits,
          // A signature on the index counts (image-rs) unless `[image] index_signatures = false`.
          indexSignatures: this.#config.image.indexSignatures,
          ...(registriesD !== undefined ? { registriesD } : {}),
          // Encrypted layers: jwe keys from the config; the attestation-agent provider's KEKs from the KBS by kid.
          decryption,
        });
        this.#log?.info(
          {
            image: imageUrl.slice(0, 512),
            from: attempt.reference,
            digest: result.manifestDigest,
            scope: result.decision?.scope,
          },
          'image pulled',
        );
        await this.#measure(imageUrl, result.manifestDigest);
        return result.manifestDigest;
      } catch (e) {
        if (e instanceof ImagePullFailed) throw e;
        const text = messageOf(e);
        const detail = e instanceof ImagePullError ? e.detail : text;
        this.#log?.warn(
          {
            image: imageUrl.slice(0, 512),
            from: attempt.reference,
            err: text,
            reason: detail.slice(0, 2048),
          },
          'image pull failed',
        );
        failures.push(`image: ${attempt.reference}, error: ${text}`);
      }
    }
    throw new ImagePullFailed(
      `Failed to pull image ${imageUrl} from all mirror/mapping locations or original location: ${failures.join('\n')}`,
    );
  }

  /** `[image] decryption_keys`: private keys from files or (never cached on disk) from the KBS. */
  async #decryptionKeys(): Promise<KeyUnwrapper[]> {
    try {
      return await decryptionKeyUnwrappers(this.#config.image.decryptionKeys, (uri) => this.#kek(uri));
    } catch (e) {
      throw new ImageClientFailed(`Initialize decryption keys failed: ${messageOf(e)}`, { cause: e });
    }
  }

  async #kek(kid: string): Promise<Uint8Array> {
    try {
      return await this.#getResource(kid);
    } catch (e) {
      throw new DataHubError(
        `Get resource failed: ${e instanceof GetResourceFailed ? e.reason : messageOf(e)}`,
        { cause: e, code: 'RESOURCE_UNAVAILABLE' },
      );
    }
  }

  async #measure(imageUrl: string, digest: string): Promise<void> {
    // The content is upstream's format string, byte for byte (not JSON-escaped).
    const event: PullImageEvent = {
      domain: 'github.com/confidential-containers',
      operation: 'PullImage',
      content: `{"image":"${imageUrl}", "digest":"${digest}"}`,
    };
    try {
      if (this.#options.extendMeasurement !== undefined) {
        await this.#options.extendMeasurement(event);
        return;
      }
      const address = this.#config.aa.aaAddress;
      if ('path' in address && !existsSync(address.path)) {
        this.#log?.warn(
          'Attestation Agent socket file not found, so all runtime measurement extension will be skipped.',
        );
        return;
      }
      const { AttestationAgentClient, RuntimeMeasurementResult } = await import('@broker/guest-api');
      const aa = await AttestationAgentClient.connect(address, {
        connectTimeoutMs: 5_000,
        timeoutMs: MEASUREMENT_TIMEOUT_MS,
      });
      try {
        const result = await aa.extendRuntimeMeasurement(event);
        if (result === RuntimeMeasurementResult.NOT_SUPPORTED) {
          this.#log?.warn(
            'Current platform does not support runtime measurement, skipping runtime measurement extension.',
          );
        } else if (result === RuntimeMeasurementResult.NOT_ENABLED) {
          this.#log?.warn(
            'Runtime measurement is not enabled in Attestation Agent configuration, skipping runtime measurement extension.',
          );
        }
      } finally {
        aa.close();
      }
    } catch (e) {
      throw new DataHubError(
        `Attestation Agent client error: failed to extend runtime measurement: ${messageOf(e)}`,
        { cause: e, code: 'AA_CLIENT_FAILED' },
      );
    }
  }
}
