// The stand-in executables the simulated GPU installs (`bin/nvidia-smi`, `bin/nvattest`): each
// forwards its arguments to the device over its Unix socket and prints the answer, exiting with
// the answer's code, so the attester runs them exactly as it runs NVIDIA's tools. They are plain
// CommonJS for the Node binary named in their first line.

/** The script for `tool`, talking to `socketPath`, run by `nodePath`. */
export function toolScript(tool: string, socketPath: string, nodePath: string): string {
  return `#!${nodePath}
// Stand-in for ${tool}, written by @broker/mock-tee's simulated GPU: asks the device at
// ${socketPath} and prints its answer.
'use strict';
const net = require('node:net');
const chunks = [];
const socket = net.createConnection(${JSON.stringify(socketPath)});
socket.on('connect', () => {
  socket.end(JSON.stringify({ tool: ${JSON.stringify(tool)}, argv: process.argv.slice(2) }) + '\\n');
});
socket.on('data', (c) => chunks.push(c));
socket.on('end', () => {
  let answer;
  try {
    answer = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    process.stderr.write('${tool}: the simulated GPU gave no answer\\n');
    process.exitCode = 70;
    return;
  }
  process.stdout.write(answer.stdout || '');
  process.stderr.write(answer.stderr || '');
  process.exitCode = answer.code;
});
socket.on('error', (e) => {
  process.stderr.write('${tool}: the simulated GPU is not running (' + e.message + ')\\n');
  process.exitCode = 9;
});
`;
}

/** The hidden `mock-tee` command the single executable's stand-ins run: `gpu-tool TOOL SOCKET ARGS…`. */
export const GPU_TOOL_COMMAND = 'gpu-tool';

/**
 * The stand-in for `tool` when this process is a single executable (which cannot run scripts):
 * a shell script that runs the executable's own `mock-tee gpu-tool`.
 */
export function toolWrapper(tool: string, socketPath: string, executable: string): string {
  const q = (v: string) => `'${v.replaceAll("'", `'\\''`)}'`;
  return `#!/bin/sh
# Stand-in for ${tool}, written by @broker/mock-tee's simulated GPU.
exec ${q(executable)} mock-tee ${GPU_TOOL_COMMAND} ${q(tool)} ${q(socketPath)} "$@"
`;
}

const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

/** `gpu-tool TOOL SOCKET ARGS…`: asks the device as the script stand-ins do; resolves with the exit code. */
export async function runGpuTool(
  argv: readonly string[],
  io: { out(text: string): void; err(text: string): void },
): Promise<number> {
  const [tool, socketPath, ...args] = argv;
  if (tool === undefined || socketPath === undefined) {
    io.err(`usage: mock-tee ${GPU_TOOL_COMMAND} TOOL SOCKET [ARGS...]\n`);
    return 2;
  }
  const { createConnection } = await import('node:net');
  return new Promise<number>((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const socket = createConnection(socketPath);
    socket.on('connect', () => socket.end(`${JSON.stringify({ tool, argv: args })}\n`));
    socket.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_ANSWER_BYTES) socket.destroy(new Error('answer too large'));
      else chunks.push(c);
    });
    socket.on('end', () => {
      try {
        const answer = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          stdout?: string;
          stderr?: string;
          code: number;
        };
        io.out(answer.stdout ?? '');
        io.err(answer.stderr ?? '');
        resolve(answer.code);
      } catch {
        io.err(`${tool}: the simulated GPU gave no answer\n`);
        resolve(70);
      }
    });
    socket.on('error', (e) => {
      io.err(`${tool}: the simulated GPU is not running (${e.message})\n`);
      resolve(9);
    });
  });
}
