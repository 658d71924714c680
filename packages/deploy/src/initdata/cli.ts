// `initdata`: build, inspect and deliver the initdata of confidential pods.
import {
  encodeInitDataAnnotation,
  type HashAlgorithm,
  initDataDigest,
  initDataReportField,
  isHashAlgorithm,
  MAX_INITDATA_BYTES,
  parseInitData,
  pcr8FromInitDataDigest,
} from '@broker/protocol';
import {
  answeredHelp,
  type CliIO,
  MAX_INPUT_BYTES,
  nodeIO,
  type ParsedArgs,
  parseArgs,
  runDeployTool,
} from '../cli-io.js';
import { InitDataInputError, UsageError } from '../errors.js';
import { stringifyYamlDocuments } from '../yaml-io.js';
import { buildInitData } from './build.js';
import {
  annotateWorkloads,
  DEFAULT_INITDATA_ANNOTATION,
  DEFAULT_PEER_PODS_PROVIDER,
  initDataAnnotationName,
  isPeerPodsProvider,
  KATA_INITDATA_ANNOTATION,
  PEER_PODS_PROVIDERS,
  peerPodsConfigMap,
  SPEC_INITDATA_ANNOTATION,
} from './deliver.js';
import { validateAaToml, validateAgentPolicy, validateCdhToml } from './validate.js';

export const INITDATA_USAGE = `Usage:
  initdata build --aa aa.toml --cdh cdh.toml [--policy policy.rego] [--algorithm sha256|sha384|sha512] [--out FILE]
      The initdata TOML (version 0.1.0); the service URLs and certificates are checked first.
  initdata check FILE        parse FILE and check the aa.toml, cdh.toml and policy.rego inside it
  initdata digest FILE [--tee snp|tdx|cca]
                             hex digest of FILE's exact bytes, with its own algorithm; with --tee, as
                             kata binds it on that bare-metal TEE (cut or zero-padded at the end): SNP
                             HOSTDATA 32 bytes, TDX MRCONFIGID 48, CCA realm personalization value 64
  initdata pcr8 FILE [--truncate]
                             expected PCR8 in hex: sha256(32 zero bytes || sha256(FILE))
  initdata encode FILE       gzip, then base64 (the annotation and INITDATA form)
  initdata annotate POD.yaml --initdata FILE [--annotation kata|spec] [--out FILE]
      Adds kata's ${KATA_INITDATA_ANNOTATION} annotation, the one kata and the
      peer-pods cloud-api-adaptor read, to every workload in POD.yaml (--annotation spec: the
      provider-neutral ${SPEC_INITDATA_ANNOTATION}, which neither reads); an existing one of either
      name is replaced.
  initdata configmap --initdata FILE [--provider azure|aws|gcp|libvirt|alibabacloud|ibmcloud] [--root-volume-size GiB]
                     [--instance-size SIZE] [--instance-sizes SIZE,...] [--spec-instance-size] [--namespace NS]
      ConfigMap peer-pods-cm with the keys the peer-pods cloud-api-adaptor reads for the provider
      (default azure): CLOUD_PROVIDER, INITDATA, the root volume size (ROOT_VOLUME_SIZE; libvirt
      LIBVIRT_ROOT_DISK_SIZE, alibabacloud SYSTEM_DISK_SIZE) and the default and allowed sizes (azure
      AZURE_INSTANCE_SIZE and AZURE_INSTANCE_SIZES, aws PODVM_INSTANCE_TYPE and PODVM_INSTANCE_TYPES, gcp
      GCP_MACHINE_TYPE and GCP_INSTANCE_TYPES, alibabacloud PODVM_INSTANCE_TYPE, ibmcloud
      IBMCLOUD_PODVM_INSTANCE_PROFILE_NAME and IBMCLOUD_PODVM_INSTANCE_PROFILE_LIST).
      --spec-instance-size also writes the provider-neutral CLOUD_INSTANCE_SIZE, which the adaptor
      does not read.
`;

/**
 * The report field kata writes the initdata digest into on a bare-metal TEE (kata-types'
 * `adjust_digest`): SNP HOSTDATA, TDX MRCONFIGID, CCA realm personalization value.
 */
export const TEE_INITDATA_FIELD_BYTES = { snp: 32, tdx: 48, cca: 64 } as const;

/** Reads and parses an initdata file: its exact bytes and the parsed document. */
function readInitData(io: CliIO, path: string) {
  const bytes = io.readBytes(path, MAX_INITDATA_BYTES);
  try {
    return { bytes, doc: parseInitData(bytes) };
  } catch (e) {
    throw new InitDataInputError(`${path}: ${(e as Error).message}`, { cause: e });
  }
}

function oneFile(args: ParsedArgs, command: string): string {
  const [file, ...extra] = args.positional;
  if (file === undefined || extra.length > 0) throw new UsageError(`${command} takes one initdata file`);
  return file;
}

function flag(args: ParsedArgs, name: string, command: string): string {
  const v = args.flags.get(name);
  if (v === undefined) throw new UsageError(`${command} needs --${name}`);
  return v;
}

function warn(io: CliIO, warnings: readonly string[]): void {
  for (const w of warnings) io.err(`initdata: warning: ${w}\n`);
}

function build(args: ParsedArgs, io: CliIO): number {
  if (args.positional.length > 0) throw new UsageError('build takes no positional arguments');
  const algorithm = args.flags.get('algorithm') ?? 'sha256';
  if (!isHashAlgorithm(algorithm)) throw new UsageError('--algorithm must be sha256, sha384 or sha512');
  const policyFile = args.flags.get('policy');
  const aaFile = flag(args, 'aa', 'build');
  const cdhFile = flag(args, 'cdh', 'build');
  const built = buildInitData(
    {
      aa: io.readFile(aaFile, MAX_INPUT_BYTES),
      cdh: io.readFile(cdhFile, MAX_INPUT_BYTES),
      ...(policyFile !== undefined && { policy: io.readFile(policyFile, MAX_INPUT_BYTES) }),
    },
    { algorithm: algorithm as HashAlgorithm },
  );
  warn(io, built.warnings);
  const out = args.flags.get('out');
  if (out !== undefined) io.writeFile(out, built.toml);
  else io.out(built.toml);
  return 0;
}

function check(args: ParsedArgs, io: CliIO): number {
  const file = oneFile(args, 'check');
  const { doc } = readInitData(io, file);
  const warnings: string[] = [];
  const aa = doc.data['aa.toml'];
  const cdh = doc.data['cdh.toml'];
  const policy = doc.data['policy.rego'];
  // kata takes initdata with any of the three; one with only policy.rego sets the agent policy alone.
  if (aa === undefined && cdh === undefined && policy === undefined) {
    throw new InitDataInputError(`${file}: data has none of aa.toml, cdh.toml, policy.rego`);
  }
  if (aa !== undefined) warnings.push(...validateAaToml(aa).warnings);
  if (cdh !== undefined) warnings.push(...validateCdhToml(cdh).warnings);
  if (policy !== undefined) warnings.push(...validateAgentPolicy(policy).warnings);
  if (aa === undefined || cdh === undefined) {
    const missing = [aa === undefined ? 'aa.toml' : '', cdh === undefined ? 'cdh.toml' : ''].filter(Boolean);
    warnings.push(
      `data has no ${missing.join(' or ')}: the guest gets the no-KBS defaults (no attestation, every resource request fails)`,
    );
  }
  for (const k of Object.keys(doc.data)) {
    if (!['aa.toml', 'cdh.toml', 'policy.rego'].includes(k)) {
      warnings.push(`data.${k} is not one of aa.toml, cdh.toml, policy.rego; the guest ignores it`);
    }
  }
  if (doc.algorithm !== 'sha256')
    warnings.push(`algorithm ${doc.algorithm}: PCR8 binding on vTPM platforms needs sha256`);
  warn(io, warnings);
  io.out(`${file}: ok\n`);
  return 0;
}

async function run(cmd: string, args: ParsedArgs, io: CliIO): Promise<number> {
  switch (cmd) {
    case 'build':
      return build(args, io);
    case 'check':
      return check(args, io);
    case 'digest': {
      const { bytes, doc } = readInitData(io, oneFile(args, 'digest'));
      const digest = initDataDigest(bytes, doc.algorithm);
      const tee = args.flags.get('tee');
      if (tee === undefined) {
        io.out(`${digest.toString('hex')}\n`);
        return 0;
      }
      const size = Object.hasOwn(TEE_INITDATA_FIELD_BYTES, tee)
        ? TEE_INITDATA_FIELD_BYTES[tee as keyof typeof TEE_INITDATA_FIELD_BYTES]
        : undefined;
      if (size === undefined) {
        throw new UsageError(
          `--tee ${JSON.stringify(tee.slice(0, 32))}: use snp, tdx or cca (vTPM TEEs bind initdata in PCR8: initdata pcr8)`,
        );
      }
      io.out(`${initDataReportField(digest, size).toString('hex')}\n`);
      return 0;
    }
    case 'pcr8': {
      const file = oneFile(args, 'pcr8');
      const { bytes, doc } = readInitData(io, file);
      const truncate = args.switches.has('truncate');
      if (doc.algorithm !== 'sha256' && !truncate) {
        throw new InitDataInputError(
          `${file}: algorithm ${doc.algorithm}; PCR8 is defined for sha256 initdata (--truncate gives what a peer-pod guest extends: the first 32 bytes of the digest)`,
        );
      }
      io.out(
        `${pcr8FromInitDataDigest(initDataDigest(bytes, doc.algorithm), { truncate }).toString('hex')}\n`,
      );
      return 0;
    }
    case 'encode': {
      const { bytes } = readInitData(io, oneFile(args, 'encode'));
      io.out(`${encodeInitDataAnnotation(bytes)}\n`);
      return 0;
    }
    case 'annotate': {
      const [pod, ...extra] = args.positional;
      if (pod === undefined || extra.length > 0)
        throw new UsageError('annotate takes one workload YAML file');
      const choice = args.flags.get('annotation');
      const annotation = choice === undefined ? DEFAULT_INITDATA_ANNOTATION : initDataAnnotationName(choice);
      if (annotation === undefined) {
        throw new UsageError(
          `--annotation ${JSON.stringify(choice?.slice(0, 64))}: use kata (${KATA_INITDATA_ANNOTATION}) or spec (${SPEC_INITDATA_ANNOTATION})`,
        );
      }
      const { bytes } = readInitData(io, flag(args, 'initdata', 'annotate'));
      const r = annotateWorkloads(
        io.readFile(pod, MAX_INPUT_BYTES),
        encodeInitDataAnnotation(bytes),
        pod,
        annotation,
      );
      for (const w of r.replaced) io.err(`initdata: ${w}: replaced the existing initdata annotation\n`);
      const out = args.flags.get('out');
      if (out !== undefined) io.writeFile(out, r.yaml);
      else io.out(r.yaml);
      return 0;
    }
    case 'configmap': {
      if (args.positional.length > 0) throw new UsageError('configmap takes no positional arguments');
      const initdataFile = flag(args, 'initdata', 'configmap');
      const provider = args.flags.get('provider') ?? DEFAULT_PEER_PODS_PROVIDER;
      if (!isPeerPodsProvider(provider)) {
        throw new UsageError(
          `--provider ${JSON.stringify(provider.slice(0, 64))}: use one of ${PEER_PODS_PROVIDERS.join(', ')}`,
        );
      }
      const sizeText = args.flags.get('root-volume-size');
      if (sizeText !== undefined && !/^\d{1,5}$/.test(sizeText)) {
        throw new UsageError('--root-volume-size is a whole number of GiB');
      }
      const instanceSize = args.flags.get('instance-size');
      const sizesText = args.flags.get('instance-sizes');
      const instanceSizes = sizesText?.split(',').map((s) => s.trim());
      if (instanceSizes?.some((s) => s === '')) {
        throw new UsageError('--instance-sizes is a comma-separated list of sizes');
      }
      const { bytes } = readInitData(io, initdataFile);
      const namespace = args.flags.get('namespace');
      const { configMap, size } = peerPodsConfigMap({
        encodedInitData: encodeInitDataAnnotation(bytes),
        provider,
        ...(sizeText !== undefined && { rootVolumeSizeGiB: Number(sizeText) }),
        ...(instanceSize !== undefined && { instanceSize }),
        ...(instanceSizes !== undefined && { instanceSizes }),
        ...(args.switches.has('spec-instance-size') && { specInstanceSize: true }),
        ...(namespace !== undefined && { namespace }),
      });
      io.out(stringifyYamlDocuments([configMap]));
      if (size !== undefined) {
        io.err(
          `initdata: ${size.name} is an ${size.tee === 'snp' ? 'AMD SEV-SNP' : 'Intel TDX'} size (not every region offers every size)\n`,
        );
      }
      io.err('initdata: restart the cloud-api-adaptor daemonset after applying\n');
      return 0;
    }
    default:
      throw new UsageError(`unknown command ${JSON.stringify(cmd)}`);
  }
}

const INITDATA_COMMANDS = ['build', 'check', 'digest', 'pcr8', 'encode', 'annotate', 'configmap'];

/** Runs initdata; returns the exit code (0 ok, 1 failure, 2 usage). Never exits the process. */
export function initdataMain(argv: readonly string[], io: CliIO = nodeIO): Promise<number> {
  return runDeployTool('initdata', INITDATA_USAGE, INITDATA_COMMANDS, argv, io, async (cmd, rest) => {
    const args = parseArgs(
      rest,
      [
        'aa',
        'cdh',
        'policy',
        'algorithm',
        'out',
        'initdata',
        'root-volume-size',
        'instance-size',
        'instance-sizes',
        'provider',
        'namespace',
        'annotation',
        'tee',
      ],
      ['truncate', 'spec-instance-size'],
    );
    if (answeredHelp(`initdata ${cmd}`, INITDATA_USAGE, args, io)) return 0;
    return await run(cmd, args, io);
  });
}
