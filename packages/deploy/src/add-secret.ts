// `brokerctl add-secret NAME`: the steps that make one more Secret retrievable as a broker resource
// (spec: append to kbsSecretResources with a JSON patch, then restart the deployment).
import { BrokerConfigError } from './errors.js';
import { DEPLOYMENT_NAME, generatedNames, isDns1123Label, isDns1123Subdomain } from './names.js';
import { resourceVolumeSpec } from './render.js';

export type JsonPatch = { op: 'add'; path: string; value: unknown }[];

export interface AddSecretPlan {
  /** The spec's patch of the KbsConfig. */
  readonly kbsConfigPatch: JsonPatch;
  /** The Deployment patch that mounts the Secret as `default/<secret>/` (brokerctl renders the Deployment). */
  readonly deploymentPatch: JsonPatch;
  /** Shell commands, in order. */
  readonly commands: readonly string[];
}

function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

export function addSecretPlan(
  secret: string,
  options: { config: string; namespace: string; deployment?: string },
): AddSecretPlan {
  if (!isDns1123Subdomain(secret))
    throw new BrokerConfigError('add-secret NAME', `${JSON.stringify(secret)} is not a valid Secret name`);
  if (!isDns1123Label(options.config))
    throw new BrokerConfigError(
      '--config',
      `${JSON.stringify(options.config)} is not a valid BrokerConfig name`,
    );
  if (!isDns1123Label(options.namespace))
    throw new BrokerConfigError(
      '--namespace',
      `${JSON.stringify(options.namespace)} is not a valid namespace`,
    );
  const deployment = options.deployment ?? DEPLOYMENT_NAME;
  if (!isDns1123Subdomain(deployment))
    throw new BrokerConfigError('--deployment', `${JSON.stringify(deployment)} is not a valid name`);
  const kbsConfigPatch: JsonPatch = [{ op: 'add', path: '/spec/kbsSecretResources/-', value: secret }];
  const { volume, mount } = resourceVolumeSpec(secret);
  const deploymentPatch: JsonPatch = [
    { op: 'add', path: '/spec/template/spec/volumes/-', value: volume },
    { op: 'add', path: '/spec/template/spec/containers/0/volumeMounts/-', value: mount },
  ];
  const ns = shellQuote(options.namespace);
  const commands = [
    `kubectl patch kbsconfig ${generatedNames(options.config).kbsConfig} -n ${ns} --type=json -p ${shellQuote(JSON.stringify(kbsConfigPatch))}`,
    `kubectl patch deployment ${deployment} -n ${ns} --type=json -p ${shellQuote(JSON.stringify(deploymentPatch))}`,
    `kubectl rollout restart deployment/${deployment} -n ${ns}`,
  ];
  return { kbsConfigPatch, deploymentPatch, commands };
}
