/**
 * `secret`: guest-components' sealed-secret tool (`hub/src/bin/secret_cli.rs`)
 * on our library. Commands, flags and output lines follow upstream so its
 * documented command lines work unchanged; additions are marked in the help.
 *
 * Differences from upstream, on purpose:
 * - `seal … vault` prints its warning on stderr, so stdout is the pointer
 *   alone (`$(secret seal …)` works); upstream prints both on stdout.
 * - `--format k8s|k8s-data` prints a Kubernetes Secret manifest instead.
 * - envelopes use our `kbs` key provider (a KEK resource in the KBS);
 *   the cloud KMS providers are not built in, and say so.
 * - `unseal` reaches the KBS through a data hub (`--cdh-socket`), through
 *   the attestation agent (`--aa-kbc-params cc_kbc::<url>`, upstream's), or
 *   by attesting itself (`--kbs-url`).
 * - failures exit with status 1 and one `Error: …` line (upstream panics,
 *   status 101); usage errors with status 2, as clap.
 * - the private key file of `keygen` is written with mode 0600.
 */

import { constants } from 'node:fs';
import { access, open, writeFile } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import type { Attester } from '@broker/attester';
import {
  backtraceOf,
  describeFailure,
  messageOf,
  reportUsageError,
  runCommand,
  wantsBacktrace,
} from '@broker/cli';
import { splitAaKbcParams } from '@broker/guest-api';
import { parseKbsUri } from '@broker/protocol';
import { type OptionSpec, type ParsedArgs, parseArgs, refuseOptions, required, UsageError } from './args.js';
import { kbsEnvelopePayload } from './envelope.js';
import { SealedSecretError } from './errors.js';
import { isJsonMap, type JsonMap } from './json.js';
import { DEFAULT_SIGNING_KID, formatJwkFile, generateSigningKey, MAX_JWK_BYTES } from './jwk.js';
import { k8sSecretManifest } from './k8s.js';
import { type SealedSecretPayload, vaultPayload, WRAP_TYPES, type WrapType } from './payload.js';
import { MAX_SEALED_SECRET_BYTES, sealSecret } from './pointer.js';
import { unsealSecret } from './unseal.js';

export const SECRET_CLI_VERSION = '0.1.0';
const VAULT_WARNING = 'Warning: Secrets must be provisioned to provider separately.';
const DEFAULT_AA_SOCKET = 'unix:///run/confidential-containers/attestation-agent/attestation-agent.sock';
/** A secret to seal in an envelope must leave room for the pointer's base64 and JSON. */
const MAX_ENVELOPE_INPUT_BYTES = 512 * 1024;
const MAX_CERT_BYTES = 1024 * 1024;

/** Process surroundings; tests replace them. */
export interface SecretCliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
  /** Attester for `unseal --kbs-url` instead of the detected TEE (tests). */
  readonly attester?: Attester;
}

function defaultIo(): SecretCliIo {
  return {
    stdout: (t) => process.stdout.write(t),
    stderr: (t) => process.stderr.write(t),
    env: process.env,
    cwd: process.cwd(),
  };
}

const USAGE = `Usage: secret <COMMAND>

Commands:
  seal    Seal the secret
  unseal  Unseal the given secret
  keygen  Generate a P-256 EC signing keypair in JWK format
  help    Print this message

Options:
  -h, --help     Print help
  -V, --version  Print version
`;

const KEYGEN_USAGE = `Generate a P-256 EC signing keypair in JWK format

Usage: secret keygen [OPTIONS]

Options:
      --kid <KID>                Key ID to embed in the JWK [default: ${DEFAULT_SIGNING_KID}]
      --output-dir <OUTPUT_DIR>  Directory to write the key files to [default: .]
  -h, --help                     Print help
`;

const SEAL_USAGE = `Seal the secret

Usage: secret seal --signing-kid <SIGNING_KID> --signing-jwk-path <SIGNING_JWK_PATH> <vault|envelope> [OPTIONS]

  secret seal … vault -r <RESOURCE_URI> -p <PROVIDER> [--provider-settings <JSON>] [-a <JSON>]
  secret seal … envelope -k <KEY_ID> -f <FILE_PATH> kbs --kek-path <FILE> [--wrap-type A256GCM|A256CTR]

Options:
      --signing-kid <SIGNING_KID>          The kid of the signing key (a kbs:///… URI of the public JWK)
      --signing-jwk-path <PATH>            A file containing the private JWK used to sign
      --format <pointer|k8s|k8s-data>      Output: the pointer, or a Kubernetes Secret with stringData
                                           or base64 data [default: pointer] (addition)
      --name <NAME>                        Secret name for --format k8s* (addition)
      --namespace <NAMESPACE>              Secret namespace for --format k8s* (addition)
      --key <KEY>                          Data key (file name in the volume) for --format k8s* (addition)
vault:
  -r, --resource-uri <RESOURCE_URI>        The URI of the resource that the secret points to
  -p, --provider <PROVIDER>                The provider that will fulfill the secret, e.g. kbs
      --provider-settings <JSON>           Additional settings for the provider (JSON object)
  -a, --annotations <JSON>                 Additional fields specific to the secret (JSON object)
envelope:
  -k, --key-id <KEY_ID>                    Key id in the key provider (kbs: the KEK's kbs:///… URI)
  -f, --file-path <FILE_PATH>              File with the content to be sealed
  kbs --kek-path <FILE>                    The 32-byte KEK, the same bytes as the KBS resource (addition)
      --wrap-type <A256GCM|A256CTR>        Data encryption [default: A256GCM] (addition)
  -h, --help                               Print help
`;

const UNSEAL_USAGE = `Unseal the given secret

Usage: secret unseal --file-path <FILE_PATH> <--cdh-socket <ADDR>|--aa-kbc-params <PARAMS>|--kbs-url <URL>> [OPTIONS]

Writes the secret to <FILE_PATH>.unsealed.

Options:
  -f, --file-path <FILE_PATH>          Path of the file which contains the content to be unsealed
  -k, --key-path <KEY_PATH>            Credential files of cloud KMS providers (none is built in)
  -a, --aa-kbc-params <PARAMS>         cc_kbc::<KBS URL>: tokens from the attestation agent
                                       (--aa-socket, else AA_SOCKET, else the default socket)
  -s, --skip-verification              Skip validating the signature of the sealed secret
      --cdh-socket <ADDR>              Ask a confidential data hub (its config decides verification) (addition)
      --kbs-url <URL>                  Attest to this KBS with the detected TEE (addition)
      --kbs-cert <FILE>                PEM certificate(s) to trust for the KBS (else KBS_CERT, as upstream) (addition)
      --aa-socket <ADDR>               The attestation agent's socket for --aa-kbc-params (addition)
      --signing-key-dir <DIR>          Key files for a kid that is not a KBS URI
                                       [default: /run/confidential-containers/cdh/sealed-secret] (addition)
  -h, --help                           Print help
`;

class CliFailure extends SealedSecretError {
  override readonly name: string = 'CliFailure';
  override readonly code = 'CLI_FAILED';
}

async function readBounded(path: string, max: number, what: string): Promise<Buffer> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, 'r');
  } catch (e) {
    throw new CliFailure(`cannot read ${what} ${path}: ${messageOf(e)}`);
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw new CliFailure(`${what} ${path} is not a regular file`);
    const buf = Buffer.alloc(max + 1);
    let n = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buf, n, buf.length - n, null);
      if (bytesRead === 0) break;
      n += bytesRead;
      if (n > max) throw new CliFailure(`${what} ${path} is larger than ${max} bytes`);
    }
    return buf.subarray(0, n);
  } finally {
    await handle.close();
  }
}

function resolvePath(io: SecretCliIo, p: string): string {
  return isAbsolute(p) ? p : join(io.cwd, p);
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path, constants.F_OK);
    return true;
  } catch {
    return false;
  }
}

// ----------------------------------------------------------------------------------------------
// keygen

const KEYGEN_OPTS: OptionSpec[] = [
  { name: 'kid', value: true },
  { name: 'output-dir', value: true },
];

async function keygen(io: SecretCliIo, args: ParsedArgs): Promise<void> {
  if (args.positionals.length > 0) throw new UsageError(`unexpected argument '${args.positionals[0]}' found`);
  const kid = args.values.get('kid') ?? DEFAULT_SIGNING_KID;
  if (kid === '' || kid.includes('/') || kid.includes('\0')) {
    throw new UsageError('--kid must be a non-empty file name component (no `/`)');
  }
  const dir = args.values.get('output-dir') ?? '.';
  const privatePath = join(dir, `${kid}-private.json`);
  const publicPath = join(dir, `${kid}-public.json`);
  for (const p of [privatePath, publicPath]) {
    if (await exists(resolvePath(io, p))) throw new CliFailure(`${JSON.stringify(p)} already exists`);
  }
  const { privateJwk, publicJwk } = generateSigningKey(kid);
  try {
    await writeFile(resolvePath(io, privatePath), formatJwkFile(privateJwk), { flag: 'wx', mode: 0o600 });
    await writeFile(resolvePath(io, publicPath), formatJwkFile(publicJwk), { flag: 'wx', mode: 0o644 });
  } catch (e) {
    throw new CliFailure(`Failed to write the key files: ${messageOf(e)}`);
  }
  io.stdout(`Generated ${privatePath} and ${publicPath}\n`);
}

// ----------------------------------------------------------------------------------------------
// seal

const SEAL_OPTS: OptionSpec[] = [
  { name: 'signing-kid', value: true },
  { name: 'signing-jwk-path', value: true },
  { name: 'format', value: true },
  { name: 'name', value: true },
  { name: 'namespace', value: true },
  { name: 'key', value: true },
  { name: 'resource-uri', short: 'r', value: true },
  { name: 'provider', short: 'p', value: true },
  { name: 'provider-settings', value: true },
  { name: 'annotations', short: 'a', value: true },
  { name: 'key-id', short: 'k', value: true },
  { name: 'file-path', short: 'f', value: true },
  { name: 'kek-path', value: true },
  { name: 'wrap-type', value: true },
];
const spec = (name: string): OptionSpec => SEAL_OPTS.find((s) => s.name === name) as OptionSpec;
const VAULT_ONLY = ['resource-uri', 'provider', 'provider-settings', 'annotations'];
const ENVELOPE_ONLY = ['key-id', 'file-path', 'kek-path', 'wrap-type'];
const ENVELOPE_PROVIDERS = ['kbs', 'ali', 'ehsm', 'aws', 'dummy'];

function jsonObjectOption(text: string | undefined, what: string): JsonMap {
  if (text === undefined) return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new CliFailure(`${what} Malformed: not JSON`);
  }
  if (!isJsonMap(value)) throw new CliFailure(`${what} Malformed: not a JSON object`);
  return value;
}

function checkKbsUri(uri: string, what: string): void {
  try {
    parseKbsUri(uri);
  } catch (e) {
    throw new CliFailure(
      `${what} is not a kbs:///repository/type/tag or kbs+<plugin>:///<path> URI: ${messageOf(e)}`,
    );
  }
}

async function vaultContent(args: ParsedArgs): Promise<SealedSecretPayload> {
  refuseOptions(args, ENVELOPE_ONLY, 'vault');
  if (args.positionals.length > 1) throw new UsageError(`unexpected argument '${args.positionals[1]}' found`);
  const resourceUri = required(args, spec('resource-uri'));
  const provider = required(args, spec('provider'));
  if (provider.toLowerCase() === 'kbs') checkKbsUri(resourceUri, 'the resource URI');
  return vaultPayload(resourceUri, {
    provider,
    providerSettings: jsonObjectOption(args.values.get('provider-settings'), 'Provider Settings'),
    annotations: jsonObjectOption(args.values.get('annotations'), 'Annotations'),
  });
}

async function envelopeContent(io: SecretCliIo, args: ParsedArgs): Promise<SealedSecretPayload> {
  refuseOptions(args, VAULT_ONLY, 'envelope');
  const provider = args.positionals[1];
  if (provider === undefined) {
    throw new UsageError(
      `'secret seal envelope' requires a subcommand but one was not provided\n  [subcommands: ${ENVELOPE_PROVIDERS.join(', ')}]`,
    );
  }
  if (args.positionals.length > 2) throw new UsageError(`unexpected argument '${args.positionals[2]}' found`);
  if (!ENVELOPE_PROVIDERS.includes(provider)) throw new UsageError(`unrecognized subcommand '${provider}'`);
  const keyId = required(args, spec('key-id'));
  const filePath = required(args, spec('file-path'));
  if (provider === 'dummy')
    throw new CliFailure('no kms provider is supported, please rebuild the secret cli tool!');
  if (provider !== 'kbs') {
    throw new CliFailure(
      `the \`${provider}\` key provider is not built into this tool; seal envelopes with \`kbs\` (a KEK resource in the KBS)`,
    );
  }
  checkKbsUri(keyId, 'the key id');
  const kek = await readBounded(resolvePath(io, required(args, spec('kek-path'))), 4096, 'the KEK file');
  if (kek.length !== 32)
    throw new CliFailure(`the KEK file must hold exactly 32 bytes, it holds ${kek.length}`);
  const wrapType = args.values.get('wrap-type') ?? 'A256GCM';
  if (!(WRAP_TYPES as readonly string[]).includes(wrapType)) {
    throw new UsageError(`invalid value '${wrapType}' for '--wrap-type': expected A256GCM or A256CTR`);
  }
  const blob = await readBounded(resolvePath(io, filePath), MAX_ENVELOPE_INPUT_BYTES, 'the secret file');
  try {
    return kbsEnvelopePayload(blob, { keyId, kek, wrapType: wrapType as WrapType });
  } finally {
    kek.fill(0);
    blob.fill(0);
  }
}

async function seal(io: SecretCliIo, args: ParsedArgs): Promise<void> {
  const type = args.positionals[0];
  if (type === undefined) {
    throw new UsageError(
      "'secret seal' requires a subcommand but one was not provided\n  [subcommands: envelope, vault]",
    );
  }
  if (type !== 'vault' && type !== 'envelope') throw new UsageError(`unrecognized subcommand '${type}'`);
  const signingKid = required(args, spec('signing-kid'));
  const jwkPath = required(args, spec('signing-jwk-path'));
  const format = args.values.get('format') ?? 'pointer';
  if (format !== 'pointer' && format !== 'k8s' && format !== 'k8s-data') {
    throw new UsageError(
      `invalid value '${format}' for '--format <FORMAT>': expected pointer, k8s or k8s-data`,
    );
  }
  if (format === 'pointer') refuseOptions(args, ['name', 'namespace', 'key'], '--format pointer');
  const k8s =
    format === 'pointer'
      ? undefined
      : {
          name: required(args, spec('name')),
          key: required(args, spec('key')),
          namespace: args.values.get('namespace'),
          field: format === 'k8s' ? ('stringData' as const) : ('data' as const),
        };
  const content = type === 'vault' ? await vaultContent(args) : await envelopeContent(io, args);
  if (type === 'vault') io.stderr(`${VAULT_WARNING}\n`);

  const jwkText = await readBounded(resolvePath(io, jwkPath), MAX_JWK_BYTES, 'the signing JWK');
  let jwk: unknown;
  try {
    jwk = JSON.parse(jwkText.toString('utf8'));
  } catch {
    throw new CliFailure(`Could not parse signing JWK ${jwkPath}: not JSON`);
  } finally {
    jwkText.fill(0);
  }
  const pointer = sealSecret(content, { kid: signingKid, privateJwk: jwk });
  if (k8s === undefined) {
    io.stdout(`${pointer}\n`);
    return;
  }
  io.stdout(
    k8sSecretManifest(pointer, {
      name: k8s.name,
      key: k8s.key,
      field: k8s.field,
      ...(k8s.namespace !== undefined ? { namespace: k8s.namespace } : {}),
    }),
  );
}

// ----------------------------------------------------------------------------------------------
// unseal

const UNSEAL_OPTS: OptionSpec[] = [
  { name: 'file-path', short: 'f', value: true },
  { name: 'key-path', short: 'k', value: true },
  { name: 'aa-kbc-params', short: 'a', value: true },
  { name: 'skip-verification', short: 's', value: false },
  { name: 'cdh-socket', value: true },
  { name: 'kbs-url', value: true },
  { name: 'kbs-cert', value: true },
  { name: 'aa-socket', value: true },
  { name: 'signing-key-dir', value: true },
];

async function kbsCert(io: SecretCliIo, args: ParsedArgs): Promise<string | undefined> {
  const file = args.values.get('kbs-cert');
  if (file !== undefined)
    return (await readBounded(resolvePath(io, file), MAX_CERT_BYTES, 'the KBS certificate')).toString('utf8');
  const env = io.env.KBS_CERT;
  return env !== undefined && env !== '' ? env : undefined;
}

/** `<kbc>::<url>`, as the AA's `aa_kbc_params`. */
function kbcParams(text: string): string {
  const params = splitAaKbcParams(text);
  if (params === undefined) {
    throw new UsageError(`invalid value '${text}' for '--aa-kbc-params': expected <kbc>::<url>`);
  }
  const { kbc: name, uri: url } = params;
  if (name !== 'cc_kbc') {
    throw new CliFailure(
      `the KBC \`${name}\` is not supported here; use cc_kbc::<url>, or --cdh-socket with a hub configured for it`,
    );
  }
  if (url === '') throw new UsageError('--aa-kbc-params needs a KBS URL after `::`');
  return url;
}

async function unseal(io: SecretCliIo, args: ParsedArgs): Promise<void> {
  if (args.positionals.length > 0) throw new UsageError(`unexpected argument '${args.positionals[0]}' found`);
  const filePath = required(args, UNSEAL_OPTS[0] as OptionSpec);
  const routes = ['cdh-socket', 'aa-kbc-params', 'kbs-url'].filter((n) => args.values.has(n));
  if (routes.length === 0) {
    throw new UsageError('one of --cdh-socket, --aa-kbc-params or --kbs-url is required to reach the secret');
  }
  if (routes.length > 1) {
    throw new UsageError(
      `the arguments ${routes.map((r) => `'--${r}'`).join(' and ')} cannot be used together`,
    );
  }
  const route = routes[0] as string;
  if (route === 'cdh-socket') {
    refuseOptions(args, ['skip-verification', 'signing-key-dir', 'kbs-cert', 'aa-socket'], '--cdh-socket');
  }
  if (route !== 'aa-kbc-params') refuseOptions(args, ['aa-socket'], `--${route}`);

  const input = resolvePath(io, filePath);
  const outputName = `${filePath}.unsealed`;
  const output = resolvePath(io, outputName);
  if (await exists(output)) throw new CliFailure(`${JSON.stringify(outputName)} already exists`);
  const pointer = (await readBounded(input, MAX_SEALED_SECRET_BYTES + 4096, 'the sealed secret'))
    .toString('utf8')
    .trim();

  const remote = await import('./remote.js');
  let plaintext: Uint8Array;
  if (route === 'cdh-socket') {
    const hub = remote.dataHubUnsealer(args.values.get('cdh-socket') as string);
    try {
      plaintext = await hub.unseal(pointer);
    } finally {
      hub.close();
    }
  } else {
    const certPem = await kbsCert(io, args);
    const base = { ...(certPem !== undefined ? { certPem } : {}) };
    const getter =
      route === 'kbs-url'
        ? await remote.attestingKbsGetter({
            url: args.values.get('kbs-url') as string,
            ...base,
            env: io.env,
            ...(io.attester !== undefined ? { attester: io.attester, additionalAttesters: [] } : {}),
          })
        : remote.aaKbsGetter({
            url: kbcParams(args.values.get('aa-kbc-params') as string),
            ...base,
            aaSocket: args.values.get('aa-socket') ?? io.env.AA_SOCKET ?? DEFAULT_AA_SOCKET,
          });
    try {
      const dir = args.values.get('signing-key-dir');
      plaintext = await unsealSecret(pointer, {
        getResource: getter.getResource,
        skipVerification: args.flags.has('skip-verification'),
        ...(dir !== undefined ? { signingKeyDir: resolvePath(io, dir) } : {}),
      });
    } finally {
      getter.close();
    }
  }
  try {
    await writeFile(output, plaintext, { flag: 'wx', mode: 0o600 });
  } catch (e) {
    throw new CliFailure(`failed to write the unsealed secret: ${messageOf(e)}`);
  } finally {
    plaintext.fill(0);
  }
  io.stdout(`unseal success, secret is saved in newly generated file: '${JSON.stringify(outputName)}'\n`);
}

// ----------------------------------------------------------------------------------------------

const COMMANDS: Record<
  string,
  { opts: OptionSpec[]; usage: string; run: (io: SecretCliIo, a: ParsedArgs) => Promise<void> }
> = {
  keygen: { opts: KEYGEN_OPTS, usage: KEYGEN_USAGE, run: keygen },
  seal: { opts: SEAL_OPTS, usage: SEAL_USAGE, run: seal },
  unseal: { opts: UNSEAL_OPTS, usage: UNSEAL_USAGE, run: unseal },
};

const TOP = {
  name: 'secret',
  version: SECRET_CLI_VERSION,
  help: USAGE,
  subcommands: Object.keys(COMMANDS),
  exitStatus: [[1, 'the command failed: one `Error: …` line on stderr, as upstream words it']],
} as const;

/** Runs `secret` with `argv` (without the program name); resolves with the exit status. */
export function main(argv: readonly string[], ioOverrides: Partial<SecretCliIo> = {}): Promise<number> {
  const io: SecretCliIo = { ...defaultIo(), ...ioOverrides };
  const cio = { out: io.stdout, err: io.stderr, env: io.env };
  return runCommand(
    TOP,
    argv,
    async ({ command, rest }) => {
      const cmd = COMMANDS[command] as (typeof COMMANDS)[string];
      const spec = {
        name: `secret ${command}`,
        version: SECRET_CLI_VERSION,
        help: cmd.usage,
        exitStatus: TOP.exitStatus,
      };
      try {
        const args = parseArgs(rest, cmd.opts);
        if (args.help || args.version)
          return runCommand(spec, [args.help ? '--help' : '--version'], () => 0, cio);
        await cmd.run(io, args);
        return 0;
      } catch (e) {
        if (e instanceof UsageError) return reportUsageError(spec.name, e.message, cio);
        // Upstream's `Error: …` line, in words and with what to do; the stack only when asked for.
        io.stderr(`Error: ${describeFailure(e)}\n`);
        if (wantsBacktrace(io.env)) io.stderr(backtraceOf(e));
        return 1;
      }
    },
    cio,
  );
}
