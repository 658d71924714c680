// `brokerctl`: render a BrokerConfig into Kubernetes objects, print the CRDs, make certificates, and print
// the steps that add a resource Secret.
import { addSecretPlan } from './add-secret.js';
import { type BrokerConfig, parseBrokerConfig } from './broker-config.js';
import {
  type CertificateNames,
  certManagerObjects,
  DEFAULT_HTTPS_SECRET,
  DEFAULT_ORGANIZATION,
  DEFAULT_TOKEN_SECRET,
  generateCertificates,
  tlsSecrets,
} from './certs.js';
import {
  answeredHelp,
  type CliIO,
  MAX_INPUT_BYTES,
  nodeIO,
  type ParsedArgs,
  parseArgs,
  runDeployTool,
} from './cli-io.js';
import { renderCrds } from './crds.js';
import { InputError, UsageError } from './errors.js';
import { isRecord } from './fields.js';
import { isCrdGroup, routeHost } from './names.js';
import { ATTESTATION_POLICY } from './policies.js';
import { renderBrokerConfig } from './render.js';
import { collectSecrets, type SourceSecret } from './source-secrets.js';
import { parseTrusteeConfig, TRUSTEE_CONFIG_KIND } from './trustee-config.js';
import { parseYamlDocuments, stringifyYamlDocuments } from './yaml-io.js';

export const BROKERCTL_USAGE = `Usage:
  brokerctl render BROKERCONFIG.yaml --cluster-domain D [--crd-group G] [--secrets FILE]... [--image IMG]
                  [--namespace NS] [--monitoring]
      Every object the BrokerConfig generates, as multi-document YAML. The TLS Secrets it names are read
      from Secret documents in BROKERCONFIG.yaml or in --secrets files (e.g. \`brokerctl certs\` output).
      A trustee-operator TrusteeConfig is read as the BrokerConfig it amounts to (--namespace when it
      names none; default trustee-operator-system). --monitoring adds a ServiceMonitor, a PrometheusRule
      and a Grafana dashboard ConfigMap (the Prometheus Operator's CRDs must be installed).
  brokerctl crds [--crd-group G]
      CustomResourceDefinitions of BrokerConfig and KbsConfig.
  brokerctl cert-manager (BROKERCONFIG.yaml --cluster-domain D | --route-host H [--namespace NS])
                         [--https-secret N] [--token-secret N] [--organization O]
      Issuer kbs-issuer and Certificates kbs-https and kbs-token.
  brokerctl certs (BROKERCONFIG.yaml --cluster-domain D | --route-host H [--namespace NS])
                  [--https-secret N] [--token-secret N] [--organization O] [--out DIR]
      The same keys and certificates made directly; prints the kubernetes.io/tls Secrets, and with --out
      also writes https.key, https.crt, token.key, token.crt and secrets.yaml into DIR.
  brokerctl add-secret NAME --config C --namespace NS [--deployment D] [--json]
      The JSON patch that appends NAME to kbsSecretResources, the kubectl commands and the restart step.
  brokerctl attestation-policy
      The attestation policy render installs as default_cpu (broker's five-PCR policy, the KBS's
      broker_default_cpu), e.g. for a KBS's [mounted_files] attestation_policies folder.
`;

function readDocs(io: CliIO, path: string): unknown[] {
  return parseYamlDocuments(io.readFile(path, MAX_INPUT_BYTES), path);
}

const CONFIG_KINDS = ['BrokerConfig', TRUSTEE_CONFIG_KIND];

/**
 * The one BrokerConfig of a file (or trustee-operator's TrusteeConfig, read as one), plus any Secret
 * documents beside it. A TrusteeConfig's warnings (pruned fields, the namespace taken) go to stderr.
 */
function readBrokerConfig(
  io: CliIO,
  path: string,
  crdGroup: string | undefined,
  namespace?: string,
): { cfg: BrokerConfig; secrets: Map<string, SourceSecret> } {
  const { secrets, others } = collectSecrets(readDocs(io, path), path);
  const isConfig = (d: unknown) => isRecord(d) && CONFIG_KINDS.includes(d.kind as string);
  const configs = others.filter(isConfig);
  const rest = others.filter((d) => !isConfig(d));
  if (rest.length > 0) {
    const kinds = rest.map((d) => (isRecord(d) && typeof d.kind === 'string' ? d.kind : typeof d));
    throw new InputError(
      `${path}: only BrokerConfig (or TrusteeConfig) and Secret documents are read, found ${kinds.join(', ')}`,
    );
  }
  if (configs.length !== 1) {
    throw new InputError(
      `${path}: expected one BrokerConfig or TrusteeConfig document, found ${configs.length}`,
    );
  }
  const doc = configs[0] as Record<string, unknown>;
  if (doc.kind === TRUSTEE_CONFIG_KIND) {
    const { config, warnings } = parseTrusteeConfig(doc, {
      ...(crdGroup !== undefined && { crdGroup }),
      ...(namespace !== undefined && { namespace }),
    });
    for (const w of warnings) io.err(`brokerctl: warning: ${w}\n`);
    return { cfg: config, secrets };
  }
  return { cfg: parseBrokerConfig(doc, crdGroup === undefined ? {} : { crdGroup }), secrets };
}

function render(args: ParsedArgs, io: CliIO): number {
  const [file, ...extra] = args.positional;
  if (file === undefined || extra.length > 0) throw new UsageError('render takes one BrokerConfig file');
  const clusterDomain = args.flags.get('cluster-domain');
  if (clusterDomain === undefined) {
    throw new UsageError(
      'render needs --cluster-domain (the route host is kbs-route-<namespace>.<cluster_domain>)',
    );
  }
  const { cfg, secrets } = readBrokerConfig(
    io,
    file,
    args.flags.get('crd-group'),
    args.flags.get('namespace'),
  );
  for (const extraFile of args.lists.get('secrets') ?? []) {
    const more = collectSecrets(readDocs(io, extraFile), extraFile);
    if (more.others.length > 0)
      throw new InputError(`${extraFile}: --secrets files hold only Secret documents`);
    for (const [name, s] of more.secrets) {
      if (secrets.has(name)) throw new InputError(`${extraFile}: Secret ${name} is given twice`);
      secrets.set(name, s);
    }
  }
  for (const s of secrets.values()) {
    if (s.namespace !== undefined && s.namespace !== cfg.namespace) {
      throw new InputError(
        `Secret ${s.name} is in namespace ${s.namespace}, the BrokerConfig in ${cfg.namespace}`,
      );
    }
  }
  const image = args.flags.get('image');
  const out = renderBrokerConfig(cfg, {
    clusterDomain,
    secrets,
    ...(image !== undefined && { image }),
    monitoring: args.switches.has('monitoring'),
  });
  io.out(stringifyYamlDocuments(out.objects));
  return 0;
}

function certificateNames(args: ParsedArgs, io: CliIO, command: string): CertificateNames {
  const [file, ...extra] = args.positional;
  if (extra.length > 0) throw new UsageError(`${command} takes at most one BrokerConfig file`);
  const organization = args.flags.get('organization') ?? DEFAULT_ORGANIZATION;
  if (file !== undefined) {
    const { cfg } = readBrokerConfig(io, file, args.flags.get('crd-group'));
    const clusterDomain = args.flags.get('cluster-domain');
    const host =
      args.flags.get('route-host') ??
      (clusterDomain === undefined ? undefined : routeHost(cfg.namespace, clusterDomain));
    if (host === undefined) throw new UsageError(`${command} needs --cluster-domain or --route-host`);
    return {
      namespace: cfg.namespace,
      routeHost: host,
      httpsSecretName: args.flags.get('https-secret') ?? cfg.httpsTlsSecretName ?? DEFAULT_HTTPS_SECRET,
      tokenSecretName: args.flags.get('token-secret') ?? cfg.tokenTlsSecretName ?? DEFAULT_TOKEN_SECRET,
      organization,
    };
  }
  const namespace = args.flags.get('namespace');
  const host = args.flags.get('route-host');
  if (host === undefined) throw new UsageError(`${command} needs a BrokerConfig file or --route-host`);
  return {
    ...(namespace !== undefined && { namespace }),
    routeHost: host,
    httpsSecretName: args.flags.get('https-secret') ?? DEFAULT_HTTPS_SECRET,
    tokenSecretName: args.flags.get('token-secret') ?? DEFAULT_TOKEN_SECRET,
    organization,
  };
}

async function certs(args: ParsedArgs, io: CliIO): Promise<number> {
  const names = certificateNames(args, io, 'certs');
  const generated = await generateCertificates(names);
  const yaml = stringifyYamlDocuments(tlsSecrets(names, generated));
  const dir = args.flags.get('out');
  if (dir !== undefined) {
    io.mkdir(dir);
    // Keys are written owner-only; certificates are public.
    io.writeFile(`${dir}/https.key`, generated.https.keyPem, 0o600);
    io.writeFile(`${dir}/https.crt`, generated.https.certPem, 0o644);
    io.writeFile(`${dir}/token.key`, generated.token.keyPem, 0o600);
    io.writeFile(`${dir}/token.crt`, generated.token.certPem, 0o644);
    io.writeFile(`${dir}/secrets.yaml`, yaml, 0o600);
    io.err(`wrote ${dir}/https.key, https.crt, token.key, token.crt, secrets.yaml\n`);
  }
  io.out(yaml);
  return 0;
}

function addSecret(args: ParsedArgs, io: CliIO): number {
  const [name, ...extra] = args.positional;
  if (name === undefined || extra.length > 0) throw new UsageError('add-secret takes one Secret name');
  const config = args.flags.get('config');
  const namespace = args.flags.get('namespace');
  if (config === undefined || namespace === undefined)
    throw new UsageError('add-secret needs --config and --namespace');
  const deployment = args.flags.get('deployment');
  const plan = addSecretPlan(name, { config, namespace, ...(deployment !== undefined && { deployment }) });
  if (args.switches.has('json')) {
    io.out(`${JSON.stringify(plan.kbsConfigPatch)}\n`);
    return 0;
  }
  const [patchKbs, patchDeploy, restart] = plan.commands;
  io.out(
    [
      `# JSON patch of KbsConfig ${config}-kbs-config:`,
      JSON.stringify(plan.kbsConfigPatch),
      '# 1. record it in the KbsConfig:',
      patchKbs,
      '# 2. mount the Secret as the repository folder default/<secret>/ of the KBS:',
      patchDeploy,
      '# 3. restart the KBS so that it serves the new resource:',
      restart,
      `# (or add ${name} to spec.kbsSecretResources of the BrokerConfig and apply \`brokerctl render\` again)`,
      '',
    ].join('\n'),
  );
  return 0;
}

const VALUED = [
  'cluster-domain',
  'crd-group',
  'secrets',
  'image',
  'namespace',
  'route-host',
  'https-secret',
  'token-secret',
  'organization',
  'out',
  'config',
  'deployment',
];

const BROKERCTL_COMMANDS = ['render', 'crds', 'cert-manager', 'certs', 'add-secret', 'attestation-policy'];

/** Runs brokerctl; returns the exit code (0 ok, 1 failure, 2 usage). Never exits the process. */
export function brokerctlMain(argv: readonly string[], io: CliIO = nodeIO): Promise<number> {
  return runDeployTool('brokerctl', BROKERCTL_USAGE, BROKERCTL_COMMANDS, argv, io, async (cmd, rest) => {
    const args = parseArgs(rest, VALUED, ['json', 'monitoring']);
    if (answeredHelp(`brokerctl ${cmd}`, BROKERCTL_USAGE, args, io)) return 0;
    switch (cmd) {
      case 'render':
        return render(args, io);
      case 'crds': {
        if (args.positional.length > 0) throw new UsageError('crds takes no arguments');
        const group = args.flags.get('crd-group');
        if (group !== undefined && !isCrdGroup(group))
          throw new UsageError(`--crd-group ${JSON.stringify(group)} is not a DNS name with a dot`);
        io.out(stringifyYamlDocuments(renderCrds(group)));
        return 0;
      }
      case 'cert-manager':
        io.out(stringifyYamlDocuments(certManagerObjects(certificateNames(args, io, 'cert-manager'))));
        return 0;
      case 'certs':
        return await certs(args, io);
      case 'add-secret':
        return addSecret(args, io);
      default:
        if (args.positional.length > 0) throw new UsageError('attestation-policy takes no arguments');
        io.out(ATTESTATION_POLICY);
        return 0;
    }
  });
}
