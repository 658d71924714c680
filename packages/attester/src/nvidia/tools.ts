// Runs NVIDIA's command-line tools for the `nvidia` attester: Node has no NVML binding without a
// native addon, so the driver is asked through `nvidia-smi` and the attestation SDK through its CLI
// `nvattest`. A tool is found at the path its variable names, else on the PATH of the environment
// given; it runs with a deadline and a bound on what it may print.
import { spawn } from 'node:child_process';
import { isAbsolute } from 'node:path';
import { AttesterError, type AttesterErrorCode } from '../attester.js';

/** Our addition: absolute paths of the tools, instead of a PATH look-up (the mock TEE's stand-ins). */
export const BROKER_NVIDIA_SMI = 'BROKER_NVIDIA_SMI';
export const BROKER_NVATTEST = 'BROKER_NVATTEST';

export type NvidiaTool = 'nvidia-smi' | 'nvattest';
const TOOL_ENV: Readonly<Record<NvidiaTool, string>> = {
  'nvidia-smi': BROKER_NVIDIA_SMI,
  nvattest: BROKER_NVATTEST,
};

const MAX_STDERR = 4096;

/** The tool is not installed (or its variable names no executable). */
export class NvidiaToolMissing extends AttesterError {
  override readonly code: AttesterErrorCode = 'NVIDIA_TOOL_MISSING';
  override readonly name: string = 'NvidiaToolMissing';
}

export interface ToolRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  /** Its first non-empty line, cut to 512 characters. */
  readonly stderrLine: string;
}

export interface RunToolOptions {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly timeoutMs: number;
  readonly maxOutputBytes: number;
}

/** The command for `tool`: its variable's absolute path, else the bare name for a PATH look-up. */
export function toolCommand(tool: NvidiaTool, env: Readonly<Record<string, string | undefined>>): string {
  const set = env[TOOL_ENV[tool]];
  if (set !== undefined && set.trim() !== '') {
    if (!isAbsolute(set)) throw new AttesterError(`${TOOL_ENV[tool]} must be an absolute path, got ${set}`);
    return set;
  }
  return tool;
}

/** Runs `tool args`, resolving with what it printed; a missing tool is `NvidiaToolMissing`. */
export async function runTool(
  tool: NvidiaTool,
  args: readonly string[],
  options: RunToolOptions,
): Promise<ToolRun> {
  const command = toolCommand(tool, options.env);
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(options.env)) if (v !== undefined) env[k] = v;
  return new Promise<ToolRun>((resolve, reject) => {
    const child = spawn(command, [...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
    const out: Buffer[] = [];
    let outBytes = 0;
    let err = '';
    let failure: AttesterError | undefined;
    const timer = setTimeout(() => {
      failure = new AttesterError(`${tool} ${args[0] ?? ''} did not finish in ${options.timeoutMs} ms`);
      child.kill('SIGKILL');
    }, options.timeoutMs);
    child.stdout.on('data', (c: Buffer) => {
      outBytes += c.length;
      if (outBytes > options.maxOutputBytes) {
        failure ??= new AttesterError(`${tool} printed more than ${options.maxOutputBytes} bytes`);
        child.kill('SIGKILL');
        return;
      }
      out.push(c);
    });
    child.stderr.on('data', (c: Buffer) => {
      if (err.length < MAX_STDERR) err += c.toString('utf8');
    });
    child.on('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (e.code === 'ENOENT' || e.code === 'EACCES') {
        reject(new NvidiaToolMissing(`${tool} not found (${command}: ${e.code})`, { cause: e }));
      } else {
        reject(new AttesterError(`${tool} could not run: ${e.message}`, { cause: e }));
      }
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (failure !== undefined) {
        reject(failure);
        return;
      }
      const line = err.split('\n').find((l) => l.trim() !== '') ?? '';
      resolve({ code, signal, stdout: Buffer.concat(out).toString('utf8'), stderrLine: line.slice(0, 512) });
    });
  });
}
