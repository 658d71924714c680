/** Runs skopeo / umoci in tests. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { requireTool } from '../registry/local-registry.js';

const run = promisify(execFile);

export interface ToolResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a tool, resolving with its status and output whatever the status. */
export async function runTool(
  tool: string,
  args: readonly string[],
  env?: NodeJS.ProcessEnv,
): Promise<ToolResult> {
  try {
    const { stdout, stderr } = await run(requireTool(tool), [...args], {
      env: { ...process.env, ...env },
      maxBuffer: 16 * 1024 * 1024,
    });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const x = e as { code?: number | string; stdout?: string; stderr?: string };
    if (typeof x.code !== 'number') throw e;
    return { code: x.code, stdout: x.stdout ?? '', stderr: x.stderr ?? '' };
  }
}
