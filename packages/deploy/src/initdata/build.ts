// `initdata build`: the initdata TOML (algorithm, version 0.1.0, [data] with aa.toml, cdh.toml and
// policy.rego as multi-line strings), checked by parsing it back.
import { type HashAlgorithm, INITDATA_VERSION, isHashAlgorithm, parseInitData } from '@broker/protocol';
import { DeployError, InitDataInputError } from '../errors.js';
import { tomlKey, tomlMultiline, tomlString } from '../toml-text.js';
import { validateAaToml, validateAgentPolicy, validateCdhToml } from './validate.js';

export interface InitDataFiles {
  readonly aa: string;
  readonly cdh: string;
  readonly policy?: string;
}

export interface BuiltInitData {
  readonly toml: string;
  readonly warnings: string[];
}

export function buildInitData(
  files: InitDataFiles,
  options: { algorithm?: HashAlgorithm; now?: Date } = {},
): BuiltInitData {
  const algorithm = options.algorithm ?? 'sha256';
  if (!isHashAlgorithm(algorithm)) throw new InitDataInputError(`unsupported algorithm ${String(algorithm)}`);
  const aa = validateAaToml(files.aa, options.now);
  const cdh = validateCdhToml(files.cdh, options.now);
  const warnings = [...aa.warnings, ...cdh.warnings];
  if (aa.kbsUrl !== undefined && cdh.kbsUrl !== undefined && aa.kbsUrl.href !== cdh.kbsUrl.href) {
    warnings.push(`aa.toml and cdh.toml name different services (${aa.kbsUrl.href} and ${cdh.kbsUrl.href})`);
  }
  if (files.policy !== undefined) warnings.push(...validateAgentPolicy(files.policy).warnings);
  if (algorithm !== 'sha256') {
    warnings.push(`algorithm ${algorithm}: vTPM platforms bind initdata through PCR8, which needs sha256`);
  }

  const data: [string, string][] = [
    ['aa.toml', files.aa],
    ['cdh.toml', files.cdh],
  ];
  if (files.policy !== undefined) data.push(['policy.rego', files.policy]);
  const lines = [
    `algorithm = ${tomlString(algorithm)}`,
    `version = ${tomlString(INITDATA_VERSION)}`,
    '',
    '[data]',
  ];
  for (const [k, v] of data) lines.push(`${tomlKey(k)} = ${tomlMultiline(v)}`);
  const toml = `${lines.join('\n')}\n`;

  // What the guest will read must be exactly the files given.
  const parsed = parseInitData(toml);
  for (const [k, v] of data) {
    if (parsed.data[k] !== v)
      throw new DeployError(`internal: ${k} does not read back unchanged from the initdata TOML`);
  }
  return { toml, warnings };
}
