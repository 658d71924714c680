// The demo's flow A helper (scripts/demo.sh bundles it with esbuild and runs it on Node 24):
//   image-tool push REFERENCE PATH=TEXT...        build a one-layer image and push it (plain http)
//   image-tool pull [--cdh-socket ADDR] IMAGE BUNDLE
//                                                 PullImage through the CDH's ttrpc socket, as kata's agent
//                                                 asks for a container image in the CVM
// Prints the manifest digest; on failure the error message goes to stderr and the exit status is 1
// (2 for a usage error).
import { DataHubClient } from '@broker/guest-api';
import { publishImage } from './images.js';

const USAGE =
  'usage: image-tool push REFERENCE PATH=TEXT...\n       image-tool pull [--cdh-socket unix:///PATH] IMAGE BUNDLE\n';

async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === 'push' && rest.length >= 2) {
    const files: Record<string, string> = {};
    for (const spec of rest.slice(1)) {
      const eq = spec.indexOf('=');
      if (eq <= 0) {
        process.stderr.write(`image-tool: file ${JSON.stringify(spec)} is not PATH=TEXT\n${USAGE}`);
        return 2;
      }
      files[spec.slice(0, eq)] = spec.slice(eq + 1);
    }
    process.stdout.write(`${await publishImage(rest[0]!, files)}\n`);
    return 0;
  }
  if (command === 'pull') {
    const args = [...rest];
    // Without --cdh-socket: the CDH's default socket, as in a CVM.
    const socket = args[0] === '--cdh-socket' ? args.splice(0, 2)[1] : undefined;
    if (args.length === 2 && (rest[0] !== '--cdh-socket' || (socket !== undefined && socket !== ''))) {
      const client = await DataHubClient.connect(socket, { timeoutMs: 120_000 });
      try {
        process.stdout.write(`${await client.pullImage(args[0]!, args[1]!)}\n`);
        return 0;
      } finally {
        client.close();
      }
    }
  }
  process.stderr.write(USAGE);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 1;
  },
);
