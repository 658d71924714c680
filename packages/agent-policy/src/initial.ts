/**
 * Where the gate's first policy comes from, in the agent's order of precedence:
 * 1. initdata's `policy.rego` (the TOML the agent writes to `/run/confidential-containers/initdata/`);
 * 2. the default policy file (`/etc/kata-opa/default-policy.rego`, kata's `policy_file`);
 * 3. the built-in default policy (the spec's table).
 * A source that exists but cannot be read or parsed is an error: the gate must not start without the
 * policy it was given (the agent aborts in that case).
 */

import { readFile, stat } from 'node:fs/promises';
import { parseInitData } from '@broker/protocol';
import { DEFAULT_POLICY_REGO } from './default-policy.js';
import { AgentPolicyError, type AgentPolicyErrorCode } from './errors.js';
import { POLICY_MAX_FILE_BYTES, SET_POLICY_SOURCE_NAME } from './policy.js';

export const DEFAULT_INITDATA_TOML_PATH = '/run/confidential-containers/initdata/initdata.toml';
export const DEFAULT_POLICY_FILE = '/etc/kata-opa/default-policy.rego';
/** The initdata `[data]` key holding the agent policy. */
export const INITDATA_POLICY_KEY = 'policy.rego';

export type PolicyOrigin = 'initdata' | 'file' | 'builtin';

export interface InitialPolicy {
  readonly origin: PolicyOrigin;
  /** The policy text. */
  readonly text: string;
  /** Source name for `print` lines: `agent_policy` (as kata's set_policy) or the file path. */
  readonly name: string;
  /** The file it was read from (initdata TOML or policy file). */
  readonly path?: string;
}

/** A policy source exists but cannot be used. */
export class InitialPolicyError extends AgentPolicyError {
  override readonly code: AgentPolicyErrorCode = 'INITIAL_POLICY_UNUSABLE';
  override readonly name: string = 'InitialPolicyError';
}

export interface InitialPolicyOptions {
  /** Initdata TOML path; `null` skips initdata. Default `DEFAULT_INITDATA_TOML_PATH`. */
  readonly initdataPath?: string | null;
  /** Default policy file; `null` skips it. Default `DEFAULT_POLICY_FILE`. */
  readonly policyFile?: string | null;
}

function isMissing(e: unknown): boolean {
  return (e as NodeJS.ErrnoException).code === 'ENOENT';
}

async function readBounded(path: string, max: number, what: string): Promise<Buffer | undefined> {
  try {
    const st = await stat(path);
    if (!st.isFile()) throw new InitialPolicyError(`${what} ${path} is not a regular file`);
    if (st.size > max) throw new InitialPolicyError(`${what} ${path} is larger than ${max} bytes`);
    const bytes = await readFile(path);
    if (bytes.length > max) throw new InitialPolicyError(`${what} ${path} is larger than ${max} bytes`);
    return bytes;
  } catch (e) {
    if (e instanceof InitialPolicyError) throw e;
    if (isMissing(e)) return undefined;
    throw new InitialPolicyError(`cannot read ${what} ${path}: ${(e as Error).message}`, { cause: e });
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The policy of an initdata document, or undefined when it has no `policy.rego`. */
export function policyFromInitData(toml: Uint8Array | string): string | undefined {
  const initData = parseInitData(toml, POLICY_MAX_FILE_BYTES);
  return Object.hasOwn(initData.data, INITDATA_POLICY_KEY) ? initData.data[INITDATA_POLICY_KEY] : undefined;
}

/** Finds the first policy source that exists; see the module comment for the order. */
export async function resolveInitialPolicy(options: InitialPolicyOptions = {}): Promise<InitialPolicy> {
  const initdataPath = options.initdataPath === undefined ? DEFAULT_INITDATA_TOML_PATH : options.initdataPath;
  const policyFile = options.policyFile === undefined ? DEFAULT_POLICY_FILE : options.policyFile;

  if (initdataPath !== null) {
    const bytes = await readBounded(initdataPath, POLICY_MAX_FILE_BYTES, 'initdata');
    if (bytes !== undefined) {
      let text: string | undefined;
      try {
        text = policyFromInitData(bytes);
      } catch (e) {
        throw new InitialPolicyError(`initdata ${initdataPath}: ${(e as Error).message}`, { cause: e });
      }
      if (text !== undefined)
        return { origin: 'initdata', text, name: SET_POLICY_SOURCE_NAME, path: initdataPath };
    }
  }

  if (policyFile !== null) {
    const bytes = await readBounded(policyFile, POLICY_MAX_FILE_BYTES, 'policy file');
    if (bytes !== undefined) {
      let text: string;
      try {
        text = utf8.decode(bytes);
      } catch {
        throw new InitialPolicyError(`policy file ${policyFile} is not valid UTF-8`);
      }
      return { origin: 'file', text, name: policyFile, path: policyFile };
    }
  }

  return { origin: 'builtin', text: DEFAULT_POLICY_REGO, name: SET_POLICY_SOURCE_NAME };
}
