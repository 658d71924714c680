// The initdata a pod VM provisions: from user data (base64 of gzip(TOML), CAA's /run/peerpod/initdata),
// or, when the pod has none, a fixed default with the spec's permissive settings ("no image
// verification, no service connection, exec and logs allowed"), so PCR8 is defined either way.
import {
  decodeInitDataAnnotation,
  type HashAlgorithm,
  InitDataError,
  initDataDigest,
  MAX_INITDATA_BYTES,
  parseInitData,
} from '@broker/protocol';
import { ProvisionError } from './errors.js';

/** Every request kata's agent answers (agent.proto), allowed: the spec's "any API call is allowed". */
export const AGENT_REQUESTS: readonly string[] = Object.freeze([
  'AddARPNeighborsRequest',
  'AddSwapPathRequest',
  'AddSwapRequest',
  'CloseStdinRequest',
  'CopyFileRequest',
  'CreateContainerRequest',
  'CreateSandboxRequest',
  'DestroySandboxRequest',
  'ExecProcessRequest',
  'GetDiagnosticDataRequest',
  'GetIPTablesRequest',
  'GetMetricsRequest',
  'GetOOMEventRequest',
  'GuestDetailsRequest',
  'ListInterfacesRequest',
  'ListRoutesRequest',
  'MemAgentCompactConfig',
  'MemAgentMemcgConfig',
  'MemHotplugByProbeRequest',
  'OnlineCPUMemRequest',
  'PauseContainerRequest',
  'PullImageRequest',
  'ReadStreamRequest',
  'RemoveContainerRequest',
  'RemoveStaleVirtiofsShareMountsRequest',
  'ReseedRandomDevRequest',
  'ResizeVolumeRequest',
  'ResumeContainerRequest',
  'SetGuestDateTimeRequest',
  'SetIPTablesRequest',
  'SetPolicyRequest',
  'SignalProcessRequest',
  'StartContainerRequest',
  'StartTracingRequest',
  'StatsContainerRequest',
  'StopTracingRequest',
  'TtyWinResizeRequest',
  'UpdateContainerRequest',
  'UpdateEphemeralMountsRequest',
  'UpdateInterfaceRequest',
  'UpdateRoutesRequest',
  'VolumeStatsRequest',
  'WaitProcessRequest',
  'WriteStreamRequest',
]);

export const ALLOW_ALL_POLICY = `package agent_policy

# Default agent policy of a pod without initdata: every request is allowed (exec and logs included).
${AGENT_REQUESTS.map((r) => `default ${r} := true`).join('\n')}
`;

/** No KBS: the AA has no token configuration. */
export const NO_KBS_AA_TOML = `# No initdata was given to this pod: no key broker service is configured.
`;

/** No KBS and no image policy: the hub starts, and every resource request fails with "no KBS". */
export const NO_KBS_CDH_TOML = `# No initdata was given to this pod: no key broker service, no image signature policy.
socket = "unix:///run/confidential-containers/cdh.sock"
credentials = []

[kbc]
name = "cc_kbc"
url = ""
`;

function tomlLiteral(text: string): string {
  // A multi-line literal string keeps the text byte for byte; it cannot hold ''' itself.
  if (text.includes("'''"))
    throw new ProvisionError('INITDATA_INVALID', "default initdata text contains '''");
  return `'''\n${text}'''`;
}

/**
 * The initdata provisioned when the pod has none. Its bytes are fixed, so its PCR8 is a constant the
 * operator can list as a reference value (`process-user-data default-initdata > default.toml`, then
 * the reference-values tool).
 */
export const DEFAULT_INITDATA_TOML = `algorithm = "sha256"
version = "0.1.0"

[data]
"aa.toml" = ${tomlLiteral(NO_KBS_AA_TOML)}
"cdh.toml" = ${tomlLiteral(NO_KBS_CDH_TOML)}
"policy.rego" = ${tomlLiteral(ALLOW_ALL_POLICY)}
`;

/** The [data] keys written out, to /run/peerpod/<key> (CAA's list). Others are reported and skipped. */
export const INITDATA_FILES: readonly string[] = Object.freeze(['aa.toml', 'cdh.toml', 'policy.rego']);

export interface DecodedInitData {
  /** The exact TOML bytes; the digest is over them. */
  readonly toml: Buffer;
  readonly algorithm: HashAlgorithm;
  readonly digest: Buffer;
  /** Allow-listed files to write, by name. */
  readonly files: ReadonlyMap<string, string>;
  /** [data] keys that were not written. */
  readonly skipped: readonly string[];
  readonly isDefault: boolean;
}

function fromToml(toml: Buffer, isDefault: boolean): DecodedInitData {
  let doc: ReturnType<typeof parseInitData>;
  try {
    doc = parseInitData(toml);
  } catch (e) {
    throw new ProvisionError('INITDATA_INVALID', (e as Error).message, { cause: e });
  }
  const files = new Map<string, string>();
  const skipped: string[] = [];
  for (const [key, value] of Object.entries(doc.data)) {
    if (INITDATA_FILES.includes(key)) files.set(key, value);
    else skipped.push(key);
  }
  return {
    toml,
    algorithm: doc.algorithm,
    digest: initDataDigest(toml, doc.algorithm),
    files,
    skipped,
    isDefault,
  };
}

/** Decodes the user-data form (standard base64 of gzip(TOML)), with the protocol's size limits. */
export function decodeUserDataInitData(text: string): DecodedInitData {
  let toml: Buffer;
  try {
    toml = decodeInitDataAnnotation(text.trim(), MAX_INITDATA_BYTES);
  } catch (e) {
    if (e instanceof InitDataError) throw new ProvisionError('INITDATA_INVALID', e.message, { cause: e });
    throw e;
  }
  return fromToml(toml, false);
}

export function defaultInitData(): DecodedInitData {
  return fromToml(Buffer.from(DEFAULT_INITDATA_TOML, 'utf8'), true);
}
