/**
 * Operator tools:
 *
 * - `image-policy check`: which scope of a policy applies to an image, what
 *   each requirement says, and the decision (exit 0 accepted, 1 rejected);
 * - `image-policy sign` / `generate-key`: cosign-compatible key-based
 *   signatures (`.sig` attachments in a registry, or `signature-N` in a
 *   `dir:` image), so that our own tooling can sign what it builds;
 * - `image-pull`: pull, verify and unpack into a bundle folder.
 *
 * `kbs:///` key paths resolve through a KBS (`--kbs-url`, `--kbs-cert`),
 * attesting with the detected TEE (the sample attester outside one). That
 * client is loaded only when asked for: the library itself never talks to a
 * KBS and takes a key reader instead.
 */
import { createPrivateKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import {
  describeError,
  describeFailure,
  hintOf,
  type OptionSpec,
  type OptionSpecs,
  type ParsedCommand,
  runCommand,
  UsageError,
} from '@broker/cli';
import {
  answerKeyProviderRequest,
  createSigstoreSignature,
  DEFAULT_INDEX_SIGNATURES,
  DEFAULT_POLICY_SEMANTICS,
  DecryptionKeyArgumentError,
  type DirImage,
  type DockerReference,
  digestOf,
  type ExpansionLimits,
  encryptRegistryImage,
  evaluatePolicy,
  formatPlatform,
  ImagePullError,
  type KeyReader,
  LIMIT_NAMES,
  loadAuthFile,
  loadPolicyFile,
  loadRegistriesD,
  MAX_KEY_PROVIDER_REQUEST_BYTES,
  openDirImage,
  openRegistryImage,
  type Platform,
  POLICY_SEMANTICS,
  type PolicyDecision,
  type PolicyRequirement,
  type PolicySemantics,
  parseImageReference,
  parseManifest,
  parsePlatform,
  progressPrinter,
  proxySettingsFromEnv,
  pullImage,
  pushSigstoreSignatures,
  type RegistriesD,
  RegistryClient,
  type RegistryClientOptions,
  readKeyFile,
  referenceName,
  referenceString,
  resolveProxies,
  signatureToBlob,
  unwrappersFromArguments,
  wrappersFromArguments,
} from '@broker/image';
import { ImageToolsError } from './errors.js';

export const IMAGE_TOOLS_VERSION = '0.1.0';

/** Process surroundings, injectable for tests. */
export interface ImageCliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Where progress goes (default process.stderr). */
  readonly progress?: { write(text: string): unknown; readonly isTTY?: boolean; readonly columns?: number };
  /** Replaces the KBS key reader (tests). */
  readonly kbsKeyReader?: KeyReader;
  /** Reads all of standard input (`keyprovider`; default process.stdin). */
  readonly stdin?: () => Promise<Uint8Array>;
}

function defaultIo(): ImageCliIo {
  return {
    stdout: (t) => process.stdout.write(t),
    stderr: (t) => process.stderr.write(t),
    env: process.env,
    progress: process.stderr,
  };
}

interface Parsed {
  readonly positional: string[];
  readonly values: Map<string, string[]>;
  readonly flags: Set<string>;
}

/** The option table of the shared layer for these value and flag names; values may repeat. */
function optionsOf(valued: readonly string[], booleans: readonly string[]): OptionSpecs {
  const options: Record<string, OptionSpec> = {};
  for (const name of valued) options[name] = { type: 'string', multiple: true };
  for (const name of booleans) options[name] = { type: 'boolean' };
  return options;
}

/** `--name value`, `--name=value`, repeatable values, boolean flags (the shared parseArgs layer). */
function parsed({ values, positionals }: ParsedCommand<OptionSpecs>): Parsed {
  const out: Parsed = { positional: positionals, values: new Map(), flags: new Set() };
  for (const [name, v] of Object.entries(values)) {
    if ((v as unknown) === true) out.flags.add(name);
    else if (Array.isArray(v)) out.values.set(name, v as string[]);
  }
  return out;
}

function one(p: Parsed, name: string): string | undefined {
  const v = p.values.get(name);
  if (v !== undefined && v.length > 1) throw new UsageError(`--${name} given more than once`);
  return v?.[0];
}

const REGISTRY_OPTIONS = ['authfile', 'insecure-registry', 'registry-ca'];
const KBS_OPTIONS = ['kbs-url', 'kbs-cert'];

async function registryOptions(p: Parsed, io: ImageCliIo): Promise<RegistryClientOptions> {
  const authfile = one(p, 'authfile') ?? io.env.REGISTRY_AUTH_FILE;
  const insecure = new Set(p.values.get('insecure-registry') ?? []);
  const plain = p.flags.has('plain-http');
  const ca = await Promise.all((p.values.get('registry-ca') ?? []).map((f) => readFile(f, 'utf8')));
  const proxy = proxySettingsFromEnv(io.env);
  if (proxy !== undefined) resolveProxies(proxy);
  return {
    ...(authfile !== undefined ? { credentials: await loadAuthFile(authfile) } : {}),
    insecure: (host) => plain || insecure.has(host),
    ...(ca.length > 0 ? { ca } : {}),
    // HTTPS_PROXY, HTTP_PROXY and NO_PROXY, as skopeo reads them.
    ...(proxy !== undefined ? { proxy } : {}),
    userAgent: `broker-image/${IMAGE_TOOLS_VERSION}`,
  };
}

/** `--policy-semantics image-rs|containers-image` (default image-rs). */
function semanticsOf(p: Parsed): PolicySemantics {
  const v = one(p, 'policy-semantics');
  if (v === undefined) return DEFAULT_POLICY_SEMANTICS;
  const known = POLICY_SEMANTICS.find((s) => s === v);
  if (known === undefined)
    throw new UsageError(
      `--policy-semantics takes ${POLICY_SEMANTICS.join(' or ')}, got ${JSON.stringify(v)}`,
    );
  return known;
}

/** `--no-index-signatures` (containers/image's rule) or the default (image-rs'). */
function indexSignaturesOf(p: Parsed): boolean {
  if (p.flags.has('no-index-signatures')) {
    if (p.flags.has('index-signatures'))
      throw new UsageError('--index-signatures and --no-index-signatures contradict each other');
    return false;
  }
  return DEFAULT_INDEX_SIGNATURES;
}

/** A key reader for `kbs:///` paths through a KBS, and local files otherwise. */
async function keyReader(p: Parsed, io: ImageCliIo): Promise<{ read: KeyReader; close(): void }> {
  const url = one(p, 'kbs-url');
  const certFile = one(p, 'kbs-cert');
  if (url === undefined) {
    if (certFile !== undefined) throw new UsageError('--kbs-cert needs --kbs-url');
    const noKbs: KeyReader = async (path) => {
      if (path.startsWith('kbs:')) {
        if (io.kbsKeyReader !== undefined) return io.kbsKeyReader(path);
        throw new ImageToolsError(`key ${path} is a KBS resource: give --kbs-url`, {
          code: 'KBS_URL_MISSING',
        });
      }
      return readKeyFile(path);
    };
    return { read: noKbs, close() {} };
  }
  if (io.kbsKeyReader !== undefined) {
    const injected = io.kbsKeyReader;
    return { read: (path) => (path.startsWith('kbs:') ? injected(path) : readKeyFile(path)), close() {} };
  }
  const [{ KbsClient }, attester] = await Promise.all([
    import('@broker/kbs-client'),
    import('@broker/attester'),
  ]);
  const certPem = certFile !== undefined ? await readFile(certFile, 'utf8') : undefined;
  const opts = { env: io.env };
  const tee = await attester.detectTee(opts);
  const devices = await attester.detectAdditionalDevices(opts);
  const client = new KbsClient({
    url,
    ...(certPem !== undefined ? { certPem } : {}),
    attester: attester.getAttester(tee, opts),
    additionalAttesters: devices.map((d) => attester.getAttester(d, opts)),
  });
  const cache = new Map<string, Promise<Uint8Array>>();
  return {
    read: (path) => {
      if (!path.startsWith('kbs:')) return readKeyFile(path);
      let hit = cache.get(path);
      if (hit === undefined) {
        hit = client.getResource(path);
        cache.set(path, hit);
      }
      return hit;
    },
    close: () => client.close(),
  };
}

type ImageArg = { kind: 'docker'; ref: DockerReference } | { kind: 'dir'; path: string };

function imageArg(s: string): ImageArg {
  if (s.startsWith('docker://'))
    return { kind: 'docker', ref: parseImageReference(s.slice('docker://'.length)) };
  if (s.startsWith('dir:')) return { kind: 'dir', path: s.slice('dir:'.length) };
  throw new UsageError(`IMAGE must be docker://REFERENCE or dir:PATH, not ${JSON.stringify(s)}`);
}

function platformOf(p: Parsed): Platform | undefined {
  const v = one(p, 'platform');
  if (v === undefined) return undefined;
  try {
    return parsePlatform(v);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

/** `--registries.d DIR`: the lookaside signature stores (none configured without it). */
async function registriesDOf(p: Parsed): Promise<{ registriesD?: RegistriesD }> {
  const dir = one(p, 'registries.d');
  return dir !== undefined ? { registriesD: await loadRegistriesD(dir) } : {};
}

function describeRequirement(r: PolicyRequirement): string {
  switch (r.type) {
    case 'insecureAcceptAnything':
    case 'reject':
      return r.type;
    case 'signedBaseLayer':
      return `signedBaseLayer (baseLayerIdentity ${r.baseLayerIdentity.type})`;
    case 'signedBy':
    case 'sigstoreSigned': {
      const k = r.keySource;
      const keys =
        k.kind === 'keyPath'
          ? `keyPath ${k.path}`
          : k.kind === 'keyPaths'
            ? `keyPaths ${k.paths.join(', ')}`
            : k.kind === 'keyData'
              ? `keyData (${k.data.byteLength} bytes)`
              : `keyDatas (${k.datas.length} keys)`;
      return `${r.type} (${keys}; signedIdentity ${r.signedIdentity.type})`;
    }
  }
}

function report(
  decision: PolicyDecision,
  imageName: string,
  manifestDigest: string | undefined,
  io: ImageCliIo,
): void {
  io.stdout(`image: ${imageName}\n`);
  if (manifestDigest !== undefined) io.stdout(`manifest: ${manifestDigest}\n`);
  io.stdout(
    `scope: ${decision.scope === null ? 'default' : `transports.${decision.transport}[${JSON.stringify(decision.scope)}]`}\n`,
  );
  for (const v of decision.verdicts) {
    const reason = v.reason !== undefined ? `: ${v.reason}` : '';
    const signed = v.signature !== undefined ? ` (signature for ${v.signature.dockerReference})` : '';
    io.stdout(
      `requirement ${v.index + 1}: ${describeRequirement(v.requirement)}: ${v.outcome}${signed}${reason}\n`,
    );
  }
  io.stdout(`decision: ${decision.allowed ? 'accepted' : 'rejected'}\n`);
}

const POLICY_HELP = `Check images against a containers-policy.json signature policy, and sign images.

Usage:
  image-policy check --policy FILE [--reference HOST/REPO[:TAG]] [options] IMAGE
  image-policy sign --key PRIVATE.pem [--identity REFERENCE] [options] IMAGE
  image-policy generate-key [--algorithm p256|p384|ed25519|rsa] PREFIX
  image-policy encrypt --encryption-key KEY [--encryption-key KEY]... [options] docker://SRC docker://DEST
  image-policy keyprovider    (ocicrypt key-provider protocol on stdin/stdout, provider attestation-agent)

IMAGE is docker://REFERENCE (a registry) or dir:PATH (containers/image's directory
layout: manifest.json, signature-1, ...). For dir: images, --reference gives the
docker reference the image stands for; without it the policy's "dir" scopes apply.

check exits 0 when the policy accepts the image, 1 when it rejects it, 2 on a usage
error or when the policy or image cannot be read.

Options:
  --policy FILE              the policy (check)
  --reference REF            docker reference of a dir: image (check)
  --platform OS/ARCH[/VAR]   platform to choose from an index (default: this machine)
  --no-index-signatures      containers/image's rule for an index: only the platform manifest's own
                             signatures count (default: when it has none, the index's do, as image-rs)
  --index-signatures         the default, kept for scripts that name it
  --policy-semantics S       image-rs (default) or containers-image: how sigstoreSigned rules read
                             keyData (PEM text or base64, or base64 only) and a missing
                             signedIdentity (no identity check, or matchRepoDigestOrExact)
  --registries.d DIR         lookaside stores of GPG signatures (containers-registries.d(5))
  --kbs-url URL              resolve kbs:/// key paths through this KBS
  --kbs-cert FILE            PEM certificate to trust for an https KBS
  --authfile FILE            registry credentials (containers-auth.json); default $REGISTRY_AUTH_FILE
  --insecure-registry HOST   reach HOST[:PORT] over plain http (repeatable)
  --plain-http               reach every registry over plain http
  --registry-ca FILE         PEM certificate to trust for registries (repeatable)
  --encryption-key KEY       (encrypt) jwe:PUBLIC.pem, pgp:KEYRING.gpg (or pgp:NAME from gpg's
                             keyring, as skopeo), pkcs7:CERT.pem, or
                             provider:attestation-agent:keyid=kbs:///R/T/G::keypath=KEK32.bin
  --key FILE                 PEM private key: EC P-256/P-384, Ed25519 or RSA (sign)
  --identity REF             docker-reference to sign (default: the reference as given, as skopeo)
  --repository-identity      sign the repository only, as cosign does (accepted by a rule without
                             signedIdentity under image-rs semantics; under containers-image semantics
                             it needs signedIdentity matchRepository for images pulled by tag)
  -h, --help                 print help
  --version                  print version
`;

const PULL_HELP = `Pull, verify and unpack an image into DEST/rootfs.

Usage:
  image-pull [--policy FILE] [--authfile FILE] [--platform OS/ARCH[/VARIANT]] [options] IMAGE DEST

IMAGE is docker://REFERENCE, a bare reference (as the CDH receives it), or dir:PATH.
Without --policy every image is accepted. Prints the manifest digest on success.
Exits 0 on success, 1 when the pull fails or the policy rejects the image, 2 on a
usage error.

Options:
  --policy FILE              containers-policy.json to enforce
  --platform OS/ARCH[/VAR]   platform to choose from an index (default: this machine)
  --no-index-signatures      containers/image's rule for an index: only the platform manifest's own
                             signatures count (default: when it has none, the index's do, as image-rs)
  --index-signatures         the default, kept for scripts that name it
  --policy-semantics S       image-rs (default) or containers-image: how sigstoreSigned rules read
                             keyData (PEM text or base64, or base64 only) and a missing
                             signedIdentity (no identity check, or matchRepoDigestOrExact)
  --registries.d DIR         lookaside stores of GPG signatures (containers-registries.d(5))
  --kbs-url URL / --kbs-cert FILE   resolve kbs:/// key paths through a KBS
  --authfile FILE            registry credentials (containers-auth.json); default $REGISTRY_AUTH_FILE
  --insecure-registry HOST   reach HOST[:PORT] over plain http (repeatable)
  --plain-http               reach every registry over plain http
  --registry-ca FILE         PEM certificate to trust for registries (repeatable)
  --max-layer-bytes N        expanded (tar) bytes of one layer, at most (default 8 GiB)
  --max-layer-entries N      tar entries of one layer, at most (default 1000000)
  --max-image-bytes N        expanded bytes of all layers, at most (default 8 GiB)
  --max-image-entries N      tar entries of all layers, at most (default 1000000)
  --decryption-key jwe:FILE  private key (PEM, DER or JWK) for ocicrypt-encrypted layers (repeatable)
  --decryption-key pgp:FILE  OpenPGP secret key (gpg --export-secret-keys; a bare FILE works too)
  --decryption-key pkcs7:FILE  RSA private key for pkcs7 layers (a bare RSA key serves jwe and pkcs7)
  --decryption-key provider:attestation-agent
                             layer keys wrapped by the CoCo key provider: KEKs from --kbs-url by kid
  --no-progress              no progress output
  -h, --help, --version
`;

const POLICY_EXIT_STATUS = [
  [0, 'check: the policy accepts the image; sign, generate-key, encrypt: done'],
  [1, 'check: the policy rejects the image; or a runtime failure (file, registry, KBS)'],
] as const;

const POLICY_TOP = {
  name: 'image-policy',
  version: IMAGE_TOOLS_VERSION,
  help: POLICY_HELP,
  subcommands: ['check', 'sign', 'generate-key', 'encrypt', 'keyprovider'],
  exitStatus: POLICY_EXIT_STATUS,
} as const;

function policyCommand(command: string, valued: readonly string[], booleans: readonly string[]) {
  return {
    name: `image-policy ${command}`,
    version: IMAGE_TOOLS_VERSION,
    help: POLICY_HELP,
    options: optionsOf(valued, booleans),
    positionals: ['[ARGS...]'],
    exitStatus: POLICY_EXIT_STATUS,
  };
}

const CHECK = policyCommand(
  'check',
  [
    'policy',
    'policy-semantics',
    'reference',
    'platform',
    'registries.d',
    ...KBS_OPTIONS,
    ...REGISTRY_OPTIONS,
  ],
  ['index-signatures', 'no-index-signatures', 'plain-http'],
);
const SIGN = policyCommand(
  'sign',
  ['key', 'identity', ...REGISTRY_OPTIONS],
  ['plain-http', 'repository-identity'],
);
const GENERATE_KEY = policyCommand('generate-key', ['algorithm'], []);
const KEYPROVIDER = policyCommand('keyprovider', [], []);
const ENCRYPT = policyCommand('encrypt', ['encryption-key', 'platform', ...REGISTRY_OPTIONS], ['plain-http']);

/** `image-policy` main; resolves to the exit status. */
export function imagePolicyMain(argv: readonly string[], io: ImageCliIo = defaultIo()): Promise<number> {
  const cio = { out: io.stdout, err: io.stderr, env: io.env };
  return runCommand(
    POLICY_TOP,
    argv,
    ({ command, rest }) => {
      if (command === 'check') return runCommand(CHECK, rest, (a) => checkCommand(parsed(a), io), cio);
      if (command === 'sign') return runCommand(SIGN, rest, (a) => signCommand(parsed(a), io), cio);
      if (command === 'encrypt') return runCommand(ENCRYPT, rest, (a) => encryptCommand(parsed(a), io), cio);
      if (command === 'keyprovider') return runCommand(KEYPROVIDER, rest, () => keyProviderCommand(io), cio);
      return runCommand(GENERATE_KEY, rest, (a) => generateKeyCommand(parsed(a), io), cio);
    },
    cio,
  );
}

async function checkCommand(p: Parsed, io: ImageCliIo): Promise<number> {
  const policyFile = one(p, 'policy');
  if (policyFile === undefined) throw new UsageError('check needs --policy FILE');
  if (p.positional.length !== 1) throw new UsageError('check takes exactly one IMAGE');
  const image = imageArg(p.positional[0] as string);
  const policy = await loadPolicyFile(policyFile, { semantics: semanticsOf(p) });
  const reference = one(p, 'reference');
  if (reference !== undefined && image.kind !== 'dir')
    throw new UsageError('--reference applies to dir: images only');
  const keys = await keyReader(p, io);
  let client: RegistryClient | undefined;
  try {
    let decision: PolicyDecision;
    let name: string;
    let digest: string | undefined;
    if (image.kind === 'dir') {
      const dir = await openDirImage(image.path, reference !== undefined ? { reference } : {});
      decision = await evaluatePolicy(policy, dir, { readKey: keys.read });
      name = dir.imageName;
      digest = await dir.manifest().then(
        (m) => digestOf(m),
        () => undefined,
      );
    } else {
      client = new RegistryClient(await registryOptions(p, io));
      const platform = platformOf(p);
      const source = await openRegistryImage(client, image.ref, {
        ...(platform !== undefined ? { platform } : {}),
        indexSignatures: indexSignaturesOf(p),
        ...(await registriesDOf(p)),
      });
      decision = await evaluatePolicy(policy, source.policyImage, { readKey: keys.read });
      name = source.policyImage.imageName;
      digest = source.manifestDigest;
    }
    report(decision, name, digest, io);
    return decision.allowed ? 0 : 1;
  } finally {
    keys.close();
    client?.close();
  }
}

async function loadPrivateKey(file: string): Promise<KeyObject> {
  const pem = await readFile(file, 'utf8');
  if (pem.includes('ENCRYPTED'))
    throw new ImageToolsError(
      `${file}: encrypted keys (cosign's own format included) are not supported; give an unencrypted PEM key`,
      { code: 'SIGNING_KEY_UNUSABLE' },
    );
  try {
    return createPrivateKey(pem);
  } catch (e) {
    throw new ImageToolsError(`${file}: ${(e as Error).message}`, { code: 'SIGNING_KEY_UNUSABLE' });
  }
}

/** `keyprovider`: one ocicrypt key-provider request on stdin, the answer on stdout. */
async function keyProviderCommand(io: ImageCliIo): Promise<number> {
  const readAll = async () => {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of process.stdin) {
      size += (chunk as Buffer).byteLength;
      chunks.push(chunk as Buffer);
      // Past the limit the request is refused as too large; nothing more is read.
      if (size > MAX_KEY_PROVIDER_REQUEST_BYTES) break;
    }
    return Buffer.concat(chunks);
  };
  try {
    const answer = await answerKeyProviderRequest(await (io.stdin ?? readAll)());
    io.stdout(Buffer.from(answer).toString('utf8'));
    return 0;
  } catch (e) {
    io.stderr(`image-policy keyprovider: ${describeFailure(e)}\n`);
    return 1;
  }
}

/** `encrypt`: every layer of SRC encrypted for the `--encryption-key` recipients, pushed as DEST. */
async function encryptCommand(p: Parsed, io: ImageCliIo): Promise<number> {
  if (p.positional.length !== 2) throw new UsageError('encrypt takes docker://SRC and docker://DEST');
  const [src, dest] = p.positional.map((s) => imageArg(s));
  if (src?.kind !== 'docker' || dest?.kind !== 'docker')
    throw new UsageError('encrypt copies docker:// images');
  const values = p.values.get('encryption-key') ?? [];
  if (values.length === 0) throw new UsageError('encrypt needs --encryption-key');
  let wrappers: Awaited<ReturnType<typeof wrappersFromArguments>>;
  try {
    wrappers = await wrappersFromArguments(values);
  } catch (e) {
    if (!(e instanceof DecryptionKeyArgumentError)) throw e;
    io.stderr(`image-policy encrypt: ${describeFailure(e)}\n`);
    return 1;
  }
  const platform = platformOf(p);
  const client = new RegistryClient(await registryOptions(p, io));
  try {
    const digest = await encryptRegistryImage(client, src.ref, dest.ref, wrappers, {
      ...(platform !== undefined ? { platform } : {}),
    });
    io.stdout(`${digest}\n`);
    return 0;
  } finally {
    client.close();
  }
}

async function signCommand(p: Parsed, io: ImageCliIo): Promise<number> {
  const keyFile = one(p, 'key');
  if (keyFile === undefined) throw new UsageError('sign needs --key FILE');
  if (p.positional.length !== 1) throw new UsageError('sign takes exactly one IMAGE');
  const image = imageArg(p.positional[0] as string);
  const key = await loadPrivateKey(keyFile);
  const identity = one(p, 'identity');
  if (image.kind === 'dir') {
    if (identity === undefined) throw new UsageError('signing a dir: image needs --identity');
    const dir: DirImage = await openDirImage(image.path, { reference: identity });
    const manifestDigest = digestOf(await dir.manifest());
    const existing = await dir.signatures();
    const sig = createSigstoreSignature(key, { manifestDigest, dockerReference: identity });
    await writeFile(`${dir.path}/signature-${existing.length + 1}`, signatureToBlob(sig));
    io.stdout(`${manifestDigest}\n`);
    return 0;
  }
  const client = new RegistryClient(await registryOptions(p, io));
  try {
    const repo = { domain: image.ref.domain, path: image.ref.path };
    const top = await client.getManifest(repo, image.ref.digest ?? image.ref.tag ?? 'latest');
    const digests = [top.digest];
    const parsed = parseManifest(top.bytes, top.contentType);
    // As `cosign sign --recursive`: an index and each of its manifests.
    if (parsed.kind === 'index') digests.push(...parsed.manifests.map((m) => m.digest));
    // containers/image (skopeo) signs the reference as given; cosign signs the repository only.
    const dockerReference =
      identity ??
      (p.flags.has('repository-identity') ? referenceName(image.ref) : referenceString(image.ref));
    for (const manifestDigest of digests) {
      await pushSigstoreSignatures(client, repo, manifestDigest, [
        createSigstoreSignature(key, { manifestDigest, dockerReference }),
      ]);
      io.stdout(`${manifestDigest}\n`);
    }
    return 0;
  } finally {
    client.close();
  }
}

async function generateKeyCommand(p: Parsed, io: ImageCliIo): Promise<number> {
  if (p.positional.length !== 1) throw new UsageError('generate-key takes exactly one PREFIX');
  const prefix = p.positional[0] as string;
  const algorithm = one(p, 'algorithm') ?? 'p256';
  let pair: { publicKey: KeyObject; privateKey: KeyObject };
  switch (algorithm) {
    case 'p256':
      pair = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      break;
    case 'p384':
      pair = generateKeyPairSync('ec', { namedCurve: 'P-384' });
      break;
    case 'ed25519':
      pair = generateKeyPairSync('ed25519');
      break;
    case 'rsa':
      pair = generateKeyPairSync('rsa', { modulusLength: 3072 });
      break;
    default:
      throw new UsageError(`unknown --algorithm ${JSON.stringify(algorithm)} (p256, p384, ed25519, rsa)`);
  }
  await writeFile(`${prefix}.key`, pair.privateKey.export({ type: 'pkcs8', format: 'pem' }), {
    mode: 0o600,
    flag: 'wx',
  });
  await writeFile(`${prefix}.pub`, pair.publicKey.export({ type: 'spki', format: 'pem' }), { flag: 'wx' });
  io.stdout(`${prefix}.key\n${prefix}.pub\n`);
  return 0;
}

/** `--max-layer-bytes N` and the other caps on what layers expand to. */
function limitsOf(p: Parsed): Partial<ExpansionLimits> {
  const limits: Partial<Record<keyof ExpansionLimits, number>> = {};
  for (const [key, name] of Object.entries(LIMIT_NAMES) as [keyof ExpansionLimits, string][]) {
    const text = one(p, name);
    if (text === undefined) continue;
    const n = Number(text);
    if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(n) || n < 1) {
      throw new UsageError(`--${name} takes a positive integer, got ${JSON.stringify(text)}`);
    }
    limits[key] = n;
  }
  return limits;
}

const PULL = {
  name: 'image-pull',
  version: IMAGE_TOOLS_VERSION,
  help: PULL_HELP,
  options: optionsOf(
    [
      'policy',
      'policy-semantics',
      'platform',
      'decryption-key',
      'registries.d',
      ...KBS_OPTIONS,
      ...REGISTRY_OPTIONS,
      ...Object.values(LIMIT_NAMES),
    ],
    ['index-signatures', 'no-index-signatures', 'plain-http', 'no-progress'],
  ),
  positionals: ['IMAGE', 'DEST'],
  exitStatus: [[1, 'the pull failed: refused by the policy, registry or KBS unreachable, bad layer']],
} as const;

/** `image-pull` main; resolves to the exit status. */
export function imagePullMain(argv: readonly string[], io: ImageCliIo = defaultIo()): Promise<number> {
  const cio = { out: io.stdout, err: io.stderr, env: io.env };
  return runCommand(PULL, argv, (a) => pull(parsed(a), io), cio);
}

async function pull(p: Parsed, io: ImageCliIo): Promise<number> {
  try {
    if (p.positional.length !== 2) throw new UsageError('image-pull takes IMAGE and DEST');
    const [imageText, dest] = p.positional as [string, string];
    const policyFile = one(p, 'policy');
    const semantics = semanticsOf(p);
    if (policyFile === undefined && one(p, 'policy-semantics') !== undefined)
      throw new UsageError('--policy-semantics needs --policy');
    const policy = policyFile !== undefined ? await loadPolicyFile(policyFile, { semantics }) : null;
    const platform = platformOf(p);
    const limits = limitsOf(p);
    const keys = await keyReader(p, io);
    let decryption: Awaited<ReturnType<typeof unwrappersFromArguments>>;
    try {
      // provider:attestation-agent fetches each layer's KEK by its kbs:/// kid through --kbs-url.
      decryption = await unwrappersFromArguments(p.values.get('decryption-key') ?? [], keys.read);
    } catch (e) {
      keys.close();
      if (!(e instanceof DecryptionKeyArgumentError)) throw e;
      io.stderr(`image-pull: ${describeFailure(e)}\n`);
      return 1;
    }
    const progress = p.flags.has('no-progress')
      ? undefined
      : progressPrinter(io.progress ?? { write: io.stderr });
    try {
      const common = {
        policy,
        readKey: keys.read,
        ...(platform !== undefined ? { platform } : {}),
        indexSignatures: indexSignaturesOf(p),
        ...(progress !== undefined ? { onProgress: progress } : {}),
        limits,
        decryption,
      };
      let result: Awaited<ReturnType<typeof pullImage>>;
      if (imageText.startsWith('dir:')) {
        result = await pullImage(await openDirImage(imageText.slice(4)), dest, common);
      } else {
        result = await pullImage(imageText.replace(/^docker:\/\//, ''), dest, {
          ...common,
          ...(await registriesDOf(p)),
          registry: await registryOptions(p, io),
        });
      }
      io.stdout(`${result.manifestDigest}\n`);
      io.stderr(
        `unpacked ${result.reference !== '' ? result.reference : imageText}${platform !== undefined ? ` (${formatPlatform(platform)})` : ''} to ${result.rootfs}: ${result.stats.files} files, ${result.stats.directories} folders, ${result.stats.symlinks} symlinks\n`,
      );
      return 0;
    } finally {
      keys.close();
    }
  } catch (e) {
    if (e instanceof ImagePullError) {
      // One line: the failure, its reason when the message does not end with it, what to do.
      const reason =
        e.detail !== '' && !e.message.endsWith(e.detail) ? ` (reason: ${e.detail.split('\n')[0]})` : '';
      const text = `${describeError(e)}${reason}`;
      const hint = hintOf(e);
      io.stderr(`image-pull: ${hint === undefined || text.includes(hint) ? text : `${text}; ${hint}`}\n`);
      return 1;
    }
    throw e;
  }
}
