// `kbs-plugin-example`: the example external plugin as a command. trustee's test server reads its settings
// from PLUGIN_* environment variables; those are honoured too, so trustee's plugin-e2e.mk can run it.
import { readFileSync } from 'node:fs';
import {
  type CommandIo,
  choice,
  createLogger,
  LOG_FORMAT_HELP,
  LOG_FORMAT_OPTION,
  LOG_FORMATS,
  type LogFormat,
  processIo,
  runCommand,
  untilStopSignal,
} from '@broker/cli';
import { KbsConfigError } from '../errors.js';
import { KBS_VERSION } from '../metrics.js';
import { startExamplePlugin } from './example-plugin.js';

export const DEFAULT_EXAMPLE_PLUGIN_ADDRESS = '127.0.0.1:50051';

const HELP = `Usage: kbs-plugin-example [--listen HOST:PORT] [--tls-cert FILE --tls-key FILE] [--store] [--encrypt-get]

An external KBS plugin (kbs.plugin.v1.KbsPlugin over gRPC) for \`[[plugins]] name = "external"\`, as
trustee's test server: POST is admin-gated, GET needs an attestation token. Without --store both echo the
request; with it POST keeps the body under its path and GET returns it. Stops on SIGTERM or SIGINT.

Options:
  -l, --listen <ADDR>   Listen address [env PLUGIN_LISTEN_ADDR; default: ${DEFAULT_EXAMPLE_PLUGIN_ADDRESS}]
      --tls-cert <FILE> PEM certificate chain: serve TLS [env PLUGIN_TLS_CERT]
      --tls-key <FILE>  PEM private key of --tls-cert [env PLUGIN_TLS_KEY]
      --store           Store POSTed bodies, return them on GET [env PLUGIN_STORE_DATA=true]
      --encrypt-get     Ask the KBS to JWE-encrypt GET replies [env PLUGIN_ENCRYPT_GET=true]
${LOG_FORMAT_HELP}
  -h, --help            Print help
  -V, --version         Print version
`;

export function kbsPluginExampleMain(
  argv: string[],
  io: CommandIo = processIo,
  stop: () => Promise<unknown> = untilStopSignal,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  return runCommand(
    {
      name: 'kbs-plugin-example',
      version: KBS_VERSION,
      help: HELP,
      options: {
        listen: { type: 'string', short: 'l' },
        'tls-cert': { type: 'string' },
        'tls-key': { type: 'string' },
        store: { type: 'boolean' },
        'encrypt-get': { type: 'boolean' },
        ...LOG_FORMAT_OPTION,
      },
    },
    argv,
    async ({ values }) => {
      const format = choice<LogFormat>('log-format', values['log-format'], LOG_FORMATS);
      const logger = createLogger({ name: 'kbs-plugin-example', ...(format !== undefined && { format }) });
      const certPath = values['tls-cert'] ?? env.PLUGIN_TLS_CERT;
      const keyPath = values['tls-key'] ?? env.PLUGIN_TLS_KEY;
      if ((certPath === undefined) !== (keyPath === undefined)) {
        throw new KbsConfigError('--tls-cert and --tls-key go together');
      }
      const address = values.listen ?? env.PLUGIN_LISTEN_ADDR ?? DEFAULT_EXAMPLE_PLUGIN_ADDRESS;
      const running = await startExamplePlugin({
        address,
        ...(certPath !== undefined &&
          keyPath !== undefined && {
            tls: { certChain: readFileSync(certPath), privateKey: readFileSync(keyPath) },
          }),
        store: values.store === true || env.PLUGIN_STORE_DATA === 'true',
        encryptGet: values['encrypt-get'] === true || env.PLUGIN_ENCRYPT_GET === 'true',
        logger,
      });
      logger.info(
        { address, port: running.port, tls: certPath !== undefined },
        'kbs-plugin-example listening',
      );
      const signal = await stop();
      logger.info({ signal }, 'kbs-plugin-example stopping');
      await running.close();
      return 0;
    },
    io,
  );
}
