// `reference-values`: RVPS reference values for a pod-VM image and an initdata file.
import { createPublicKey, type KeyObject } from 'node:crypto';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { UsageError as CliUsageError, makeDirectorySync, type OptionValues, runCommand } from '@broker/cli';
import { loadAuthFile, type ProgressOutput, progressPrinter, RegistryClient } from '@broker/image';
import { pullMeasurementArtifact } from './artifact.js';
import { ANNOTATION_PREFIX, configMapName, configMapYaml, referenceValuesConfigMap } from './configmap.js';
import { ArtifactError, ReferenceValuesError, UsageError } from './errors.js';
import { MAX_MANIFEST_BYTES, parseMeasurementManifest } from './manifest.js';
import { parseRekorPublicKey } from './rekor.js';
import { messageProvenance, rvpsSampleMessage } from './rvps.js';
import {
  type BareMetalTee,
  bareMetalInitData,
  bareMetalReferenceValues,
  checkPlatformTee,
  computeReferenceValues,
  initDataPcr8,
  isBareMetalTee,
  type ReferenceValues,
} from './values.js';

export const REFERENCE_VALUES_USAGE = `Usage:
  reference-values --platform azure|libvirt --tee az-snp-vtpm|az-tdx-vtpm|tpm
                   --initdata FILE (--measurements FILE | --image REGISTRY/REPO[:TAG]) [--image-tag TAG]
                   [--name CONFIG --namespace NS] [--format configmap|rvps-message|both] [--output-dir DIR]
                   [--truncate]
  reference-values --platform baremetal --tee snp|tdx --initdata FILE [--launch-measurement HEX]
                   [--name CONFIG --namespace NS] [--format configmap|rvps-message|both] [--output-dir DIR]
  with --image:    --signature-key FILE... | --allow-unsigned
                   [--authfile FILE] [--rekor-pub-key-url URL] [--rekor-url URL]
                   [--registry-ca FILE] [--plain-http HOST[:PORT]]...

  Reads the pod-VM image's measurement manifest (a file, or the OCI artifact pulled by tag and checked
  against its cosign signature), computes PCR8 = sha256(32 zero bytes || sha256(initdata)), and writes
  the RVPS sample message and/or the ConfigMap <CONFIG>-rvps-reference-values. The manifest must
  describe --image-tag and give PCR 03, 09, 11 and 12.

  Bare metal: the initdata digest as kata binds it (cut or zero-padded at the end) becomes
  snp_host_data (HOSTDATA, 32 bytes) or tdx_mr_config_id (MRCONFIGID, 48 bytes), and
  --launch-measurement (48 bytes in hex) snp_launch_measurement or mr_td.

Options:
  -h, --help     Print help
  -V, --version  Print version
`;

const MAX_KEY_BYTES = 64 * 1024;
const MAX_INITDATA_FILE_BYTES = 1024 * 1024;

export interface ReferenceValuesIo {
  readonly out: (s: string) => void;
  readonly err: (s: string) => void;
  readonly readFile: (path: string, maxBytes: number) => Buffer;
  readonly writeFile: (path: string, data: string) => void;
  readonly mkdir: (path: string) => void;
  /** Fetches a small text document (the Rekor public key). */
  readonly fetchText: (url: string, maxBytes: number) => Promise<string>;
  /** Where --image's progress goes, on a terminal only (image-pull's lines); none when absent. */
  readonly progress?: ProgressOutput;
  /** A registry client for --image; tests substitute one. */
  readonly registryClient?: (options: ConstructorParameters<typeof RegistryClient>[0]) => RegistryClient;
}

function readLimited(path: string, maxBytes: number): Buffer {
  let size: number;
  try {
    size = statSync(path).size;
  } catch (e) {
    throw new ReferenceValuesError(
      `cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
    );
  }
  if (size > maxBytes) throw new ReferenceValuesError(`${path} is larger than ${maxBytes} bytes`);
  const bytes = readFileSync(path);
  if (bytes.length > maxBytes) throw new ReferenceValuesError(`${path} is larger than ${maxBytes} bytes`);
  return bytes;
}

async function fetchText(url: string, maxBytes: number): Promise<string> {
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(30_000), redirect: 'follow' });
  } catch (e) {
    throw new ArtifactError(`fetching ${url}: ${(e as Error).message}`, { cause: e });
  }
  if (res.status !== 200) throw new ArtifactError(`fetching ${url}: HTTP ${res.status}`);
  const declared = Number(res.headers.get('content-length') ?? '0');
  if (declared > maxBytes) throw new ArtifactError(`${url}: larger than ${maxBytes} bytes`);
  const body = Buffer.from(await res.arrayBuffer());
  if (body.length > maxBytes) throw new ArtifactError(`${url}: larger than ${maxBytes} bytes`);
  return body.toString('utf8');
}

export const nodeReferenceValuesIo: ReferenceValuesIo = {
  out: (s) => process.stdout.write(s),
  err: (s) => process.stderr.write(s),
  readFile: readLimited,
  writeFile: (path, data) => writeFileSync(path, data),
  // Not Node's recursive mkdir, which never returns under /proc or /sys.
  mkdir: (path) => makeDirectorySync(path),
  fetchText,
  progress: process.stderr,
};

const OPTIONS = {
  platform: { type: 'string' },
  tee: { type: 'string' },
  initdata: { type: 'string' },
  'image-tag': { type: 'string' },
  measurements: { type: 'string' },
  image: { type: 'string' },
  'signature-key': { type: 'string', multiple: true },
  'allow-unsigned': { type: 'boolean' },
  authfile: { type: 'string' },
  'rekor-url': { type: 'string' },
  'rekor-pub-key-url': { type: 'string' },
  'registry-ca': { type: 'string', multiple: true },
  'plain-http': { type: 'string', multiple: true },
  name: { type: 'string' },
  namespace: { type: 'string' },
  format: { type: 'string' },
  'output-dir': { type: 'string' },
  truncate: { type: 'boolean' },
  'launch-measurement': { type: 'string' },
} as const;

type Values = OptionValues<typeof OPTIONS>;

const SPEC = {
  name: 'reference-values',
  version: '0.1.0',
  help: REFERENCE_VALUES_USAGE,
  options: OPTIONS,
  exitStatus: [
    [1, 'the inputs are refused (unreadable file, manifest, signature, initdata) or a write failed'],
  ],
} as const;

function required(values: Values, name: 'platform' | 'tee' | 'initdata'): string {
  const v = values[name];
  if (v === undefined || v === '') throw new UsageError(`--${name} is required`);
  return v;
}

const FORMATS = ['configmap', 'rvps-message', 'both'] as const;
type Format = (typeof FORMATS)[number];

/** Where Rekor's public key comes from: --rekor-pub-key-url, else the log's own key endpoint. */
async function rekorKey(values: Values, io: ReferenceValuesIo): Promise<KeyObject | undefined> {
  const keyUrl = values['rekor-pub-key-url'];
  const logUrl = values['rekor-url'];
  if (keyUrl === undefined && logUrl === undefined) return undefined;
  const url = keyUrl ?? `${(logUrl as string).replace(/\/+$/, '')}/api/v1/log/publicKey`;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(
      `${keyUrl !== undefined ? '--rekor-pub-key-url' : '--rekor-url'} ${url} is not a URL`,
    );
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:' && parsed.protocol !== 'file:') {
    throw new UsageError(`the Rekor key URL ${url} must be https:, http: or file:`);
  }
  const pem =
    parsed.protocol === 'file:'
      ? io.readFile(decodeURIComponent(parsed.pathname), MAX_KEY_BYTES).toString('utf8')
      : await io.fetchText(url, MAX_KEY_BYTES);
  return parseRekorPublicKey(pem);
}

function signatureKeys(values: Values, io: ReferenceValuesIo): KeyObject[] {
  return (values['signature-key'] ?? []).map((path) => {
    try {
      return createPublicKey(io.readFile(path, MAX_KEY_BYTES));
    } catch (e) {
      if (e instanceof ReferenceValuesError) throw e;
      throw new UsageError(`--signature-key ${path} is not a PEM public key: ${(e as Error).message}`);
    }
  });
}

async function run(values: Values, io: ReferenceValuesIo): Promise<number> {
  const tee = checkPlatformTee(required(values, 'platform'), required(values, 'tee'));
  const initDataPath = required(values, 'initdata');
  const format = (values.format ?? 'configmap') as Format;
  if (!FORMATS.includes(format)) throw new UsageError(`--format must be ${FORMATS.join(', ')}`);
  if (format === 'both' && values['output-dir'] === undefined) {
    throw new UsageError('--format both writes two files: give --output-dir');
  }
  const wantsConfigMap = format !== 'rvps-message';
  if (wantsConfigMap && (values.name === undefined || values.namespace === undefined)) {
    throw new UsageError(
      'the ConfigMap needs --name (the BrokerConfig name) and --namespace (where the KBS runs)',
    );
  }
  if (isBareMetalTee(tee)) return bareMetal(tee, values, io, format);
  if (values['launch-measurement'] !== undefined) {
    throw new UsageError(
      '--launch-measurement is for --platform baremetal (vTPM guests are appraised by PCRs)',
    );
  }
  const fromFile = values.measurements;
  const fromImage = values.image;
  if ((fromFile === undefined) === (fromImage === undefined)) {
    throw new UsageError('give exactly one of --measurements FILE and --image REFERENCE');
  }
  if (fromFile !== undefined) {
    for (const flag of [
      'authfile',
      'rekor-url',
      'rekor-pub-key-url',
      'signature-key',
      'allow-unsigned',
      'registry-ca',
      'plain-http',
    ] as const) {
      if (values[flag] !== undefined) {
        throw new UsageError(
          `--${flag} applies to an artifact pulled with --image; a --measurements file carries no signature to check`,
        );
      }
    }
  }
  const initData = initDataPcr8(io.readFile(initDataPath, MAX_INITDATA_FILE_BYTES), {
    truncate: values.truncate === true,
  });
  if (initData.algorithm !== 'sha256') {
    io.err(
      `reference-values: warning: initdata algorithm ${initData.algorithm}: PCR8 uses the first 32 bytes of its digest, as a peer-pod guest extends it\n`,
    );
  }

  let imageTag = values['image-tag'];
  let measurements: ReturnType<typeof parseMeasurementManifest>;
  let tagFromSource = false;
  let source: string;
  let pulledImage: { reference: string; digest: string } | undefined;
  if (fromFile !== undefined) {
    if (imageTag === undefined) throw new UsageError('--image-tag is required with --measurements');
    measurements = parseMeasurementManifest(io.readFile(fromFile, MAX_MANIFEST_BYTES));
    source = fromFile;
  } else {
    const keys = signatureKeys(values, io);
    const allowUnsigned = values['allow-unsigned'] === true;
    if (
      allowUnsigned &&
      (keys.length > 0 || values['rekor-url'] !== undefined || values['rekor-pub-key-url'] !== undefined)
    ) {
      throw new UsageError('--allow-unsigned cannot be combined with --signature-key or --rekor-*');
    }
    if (!allowUnsigned && keys.length === 0) {
      throw new UsageError(
        '--image needs --signature-key FILE (the cosign public key the artifact is signed with); --allow-unsigned skips the check, for local tests only',
      );
    }
    const rekor = await rekorKey(values, io);
    const credentials = values.authfile !== undefined ? await loadAuthFile(values.authfile) : undefined;
    const plainHttp = new Set(values['plain-http'] ?? []);
    const ca = (values['registry-ca'] ?? []).map((f) => io.readFile(f, MAX_KEY_BYTES).toString('utf8'));
    const options = {
      ...(credentials !== undefined && { credentials }),
      ...(ca.length > 0 && { ca }),
      insecure: (host: string) => plainHttp.has(host),
      userAgent: 'broker-reference-values',
    };
    const client = io.registryClient?.(options) ?? new RegistryClient(options);
    try {
      const pulled = await pullMeasurementArtifact({
        client,
        reference: fromImage as string,
        ...(imageTag !== undefined && { imageTag }),
        signatureKeys: keys,
        ...(rekor !== undefined && { rekorKey: rekor }),
        allowUnsigned,
        // As image-pull draws it, on a terminal; a log or a pipe gets only the summary line below.
        ...(io.progress?.isTTY === true && { onProgress: progressPrinter(io.progress) }),
      });
      measurements = pulled.measurements;
      imageTag = pulled.tag;
      tagFromSource = true;
      source = `${pulled.reference}@${pulled.manifestDigest}`;
      pulledImage = { reference: pulled.reference, digest: pulled.manifestDigest };
      io.err(
        `reference-values: pulled ${source} (${pulled.verification === 'unsigned-allowed' ? 'signature NOT checked: --allow-unsigned' : pulled.verification === 'signature' ? 'cosign signature verified' : `cosign signature and Rekor SET verified, logged ${pulled.integratedTime?.toISOString()}`})\n`,
      );
    } finally {
      client.close();
    }
  }

  const values_ = computeReferenceValues({
    tee,
    measurements,
    imageTag: imageTag as string,
    tagFromSource,
    initData,
  });
  return write(
    values_,
    values,
    io,
    format,
    {
      [`${ANNOTATION_PREFIX}/pod-vm-image-tag`]: imageTag as string,
      [`${ANNOTATION_PREFIX}/tee`]: tee,
      [`${ANNOTATION_PREFIX}/initdata-${initData.algorithm}`]: initData.digest,
      [`${ANNOTATION_PREFIX}/measurements`]: source.slice(0, 1024),
    },
    messageProvenance({
      image_tag: imageTag,
      image: pulledImage?.reference,
      image_digest: pulledImage?.digest,
      tee,
      initdata_digest: initData.digest,
      initdata_algorithm: initData.algorithm,
    }),
  );
}

/**
 * A bare-metal SNP or TDX guest: no PCR manifest; the initdata as kata binds it (HOSTDATA,
 * MRCONFIGID) and, with --launch-measurement, the launch measurement.
 */
function bareMetal(tee: BareMetalTee, values: Values, io: ReferenceValuesIo, format: Format): number {
  for (const flag of [
    'measurements',
    'image',
    'image-tag',
    'truncate',
    'authfile',
    'rekor-url',
    'rekor-pub-key-url',
    'signature-key',
    'allow-unsigned',
    'registry-ca',
    'plain-http',
  ] as const) {
    if (values[flag] !== undefined) {
      throw new UsageError(
        `--${flag}: a bare-metal ${tee.toUpperCase()} guest has no vTPM PCRs; give --initdata and, for its launch measurement, --launch-measurement`,
      );
    }
  }
  const initData = bareMetalInitData(io.readFile(required(values, 'initdata'), MAX_INITDATA_FILE_BYTES), tee);
  const values_ = bareMetalReferenceValues(tee, initData, values['launch-measurement']);
  return write(
    values_,
    values,
    io,
    format,
    {
      [`${ANNOTATION_PREFIX}/tee`]: tee,
      [`${ANNOTATION_PREFIX}/initdata-${initData.algorithm}`]: initData.digest,
    },
    messageProvenance({ tee, initdata_digest: initData.digest, initdata_algorithm: initData.algorithm }),
  );
}

function write(
  values_: ReferenceValues,
  values: Values,
  io: ReferenceValuesIo,
  format: Format,
  annotations: Record<string, string>,
  provenance: Readonly<Record<string, string>> | undefined,
): number {
  const wantsConfigMap = format !== 'rvps-message';
  const outputs: [string, string][] = [];
  if (format !== 'configmap') {
    outputs.push(['rvps-message.json', `${JSON.stringify(rvpsSampleMessage(values_, provenance))}\n`]);
  }
  if (wantsConfigMap) {
    const cm = referenceValuesConfigMap(values_, {
      config: values.name as string,
      namespace: values.namespace as string,
      annotations,
      ...(provenance !== undefined && { provenance }),
    });
    outputs.push([`${configMapName(values.name as string)}.yaml`, configMapYaml(cm)]);
  }
  const dir = values['output-dir'];
  if (dir === undefined) {
    io.out(outputs[0]?.[1] ?? '');
  } else {
    io.mkdir(dir);
    for (const [file, text] of outputs) {
      io.writeFile(join(dir, file), text);
      io.err(`reference-values: wrote ${join(dir, file)}\n`);
    }
  }
  return 0;
}

/** The CLI: 0 on success, 2 on a usage error, 1 when the inputs are refused. */
export function referenceValuesMain(
  argv: readonly string[],
  io: ReferenceValuesIo = nodeReferenceValuesIo,
): Promise<number> {
  return runCommand(
    SPEC,
    argv,
    async ({ values }) => {
      try {
        return await run(values, io);
      } catch (e) {
        // This package's UsageError: the dialect's exit 2 and pointer to --help.
        if (e instanceof UsageError) throw new CliUsageError(e.message);
        throw e;
      }
    },
    io,
  );
}
