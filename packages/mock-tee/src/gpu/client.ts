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
