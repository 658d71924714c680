/**
 * The four images and what makes each a drop-in for trustee's: the command names at trustee's paths
 * (`/usr/local/bin/kbs`, `grpc-as`, `rvps`), trustee's default commands, ports and data folders.
 */
import { ImageBuildError } from './errors.js';

export interface ImageDefinition {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  /** The image's default command (trustee's, where trustee's image has one). */
  readonly cmd: readonly string[];
  readonly ports: readonly number[];
  /** Commands that must exist at /usr/local/bin for the image to do its job. */
  readonly requires: readonly string[];
  /** Folders created writable for the image's user (where a volume or emptyDir is mounted). */
  readonly dataDirs: readonly string[];
}

/** The folder every command name links from. */
export const BIN_DIR = '/usr/local/bin';
/** The multi-call executable every image carries. */
export const EXECUTABLE = 'broker-tools';

export const IMAGES: readonly ImageDefinition[] = [
  {
    name: 'kbs',
    title: 'broker key broker service',
    description:
      "The KBS with its built-in attestation service and RVPS; a drop-in for trustee's key-broker-service image",
    // trustee's kustomize base runs this command line; trustee-operator and compose name their own.
    cmd: [`${BIN_DIR}/kbs`, '--config-file', '/etc/kbs/kbs-config.toml'],
    ports: [8080],
    requires: ['kbs'],
    dataDirs: [
      // trustee's compose config stores under /opt/confidential-containers/kbs (resources in its
      // `repository` folder, policies in `kbs`), which a volume covers only in part.
      '/opt/confidential-containers/kbs',
      '/opt/confidential-containers/kbs/repository',
      '/opt/confidential-containers/kbs/nebula-ca',
      '/opt/confidential-containers/attestation-service',
      '/opt/confidential-containers/storage',
    ],
  },
  {
    name: 'attestation-service',
    title: 'broker attestation service',
    description:
      "trustee's grpc-as and restful-as on broker's attestation service; a drop-in for coco-as-grpc",
    cmd: ['grpc-as', '--socket', '0.0.0.0:50004'],
    ports: [50004],
    requires: ['grpc-as', 'restful-as'],
    // The second: trustee's compose as-config.json keeps policies there, in the container's own file system.
    dataDirs: ['/opt/confidential-containers/attestation-service', '/var/lib/attestation-service/storage'],
  },
  {
    name: 'rvps',
    title: 'broker reference value provider service',
    description: "trustee's rvps on broker's reference value provider; a drop-in for trustee's rvps image",
    cmd: ['rvps'],
    ports: [50003],
    requires: ['rvps'],
    dataDirs: ['/opt/confidential-containers/attestation-service/reference_values'],
  },
  {
    name: 'tools',
    title: 'broker operator tools',
    description:
      'The operator commands: secret (sealed secrets), kbs-client, initdata, brokerctl, reference-values and the rest',
    cmd: ['secret', '--help'],
    ports: [],
    requires: ['secret', 'kbs-client', 'initdata', 'brokerctl', 'reference-values'],
    dataDirs: [],
  },
];

export function imageNamed(name: string): ImageDefinition {
  const image = IMAGES.find((i) => i.name === name);
  if (image === undefined)
    throw new ImageBuildError(
      'UNKNOWN_IMAGE',
      `unknown image ${name}: one of ${IMAGES.map((i) => i.name).join(', ')}`,
    );
  return image;
}
