// `attestation-service`: trustee's grpc-as command line (`-c` config, `-s` socket).
import { readFileSync, statSync } from 'node:fs';
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
  UsageError,
  untilStopSignal,
} from '@broker/cli';
import { DEFAULT_AS_SOCKET, loadAsConfig, parseAsConfig } from './config.js';
import { startAsGrpcServer } from './grpc.js';
import { startAsRestServer } from './rest.js';
import { openAttestationService } from './service.js';

export const AS_VERSION = '0.1.0';

const HELP = `Usage: attestation-service [-c FILE] [-s HOST:PORT] [--rest HOST:PORT]

trustee's attestation service (grpc-as) on the KBS's built-in one: attestation.AttestationService
(AttestationEvaluate, SetAttestationPolicy, GetAttestationChallenge) and, on the same port, the RVPS
service (reference.ReferenceValueProviderService); with --rest also trustee's restful-as routes
(POST /attestation, POST /challenge, POST and GET /policy, GET /.well-known/jwks.json, GET /healthz).
Stops on SIGTERM or SIGINT.

Options:
  -c, --config-file <FILE>  trustee's AS configuration JSON [default: built-in defaults]
  -s, --socket <ADDRESS>    gRPC listen address, HTTP/2 [default: ${DEFAULT_AS_SOCKET}]
      --rest <ADDRESS>      REST listen address, HTTP/1.1 (off unless given)
  -t, --https-pubkey-cert <FILE>  PEM certificate chain: both listeners serve TLS (needs -k)
  -k, --https-prikey <FILE>       PEM private key of that certificate (needs -t)
${LOG_FORMAT_HELP}
  -h, --help                Print help
  -V, --version             Print version
`;

const MAX_PEM_BYTES = 1024 * 1024;

function readPem(path: string): Buffer {
  if (statSync(path).size > MAX_PEM_BYTES) throw new Error(`${path} is larger than ${MAX_PEM_BYTES} bytes`);
  return readFileSync(path);
}

export function attestationServiceMain(
  argv: string[],
  io: CommandIo = processIo,
  stop: () => Promise<unknown> = untilStopSignal,
): Promise<number> {
  return runCommand(
    {
      name: 'attestation-service',
      version: AS_VERSION,
      help: HELP,
      options: {
        'config-file': { type: 'string', short: 'c' },
        socket: { type: 'string', short: 's' },
        rest: { type: 'string' },
        'https-pubkey-cert': { type: 'string', short: 't' },
        'https-prikey': { type: 'string', short: 'k' },
        ...LOG_FORMAT_OPTION,
      },
    },
    argv,
    async ({ values }) => {
      const certPath = values['https-pubkey-cert'];
      const keyPath = values['https-prikey'];
      if ((certPath === undefined) !== (keyPath === undefined)) {
        // trustee's grpc-as refuses one without the other (its restful-as silently serves plain HTTP).
        throw new UsageError('HTTPS public key cert and private key must be provided to enable HTTPS.');
      }
      const tls =
        certPath === undefined || keyPath === undefined
          ? undefined
          : { certChain: readPem(certPath), privateKey: readPem(keyPath) };
      const format = choice<LogFormat>('log-format', values['log-format'], LOG_FORMATS);
      const logger = createLogger({ name: 'attestation-service', ...(format !== undefined && { format }) });
      const path = values['config-file'];
      const settings = path === undefined ? parseAsConfig({}) : loadAsConfig(path);
      for (const w of settings.warnings) logger.warn(w);
      const opened = await openAttestationService(settings, logger);
      try {
        const address = values.socket ?? DEFAULT_AS_SOCKET;
        const server = await startAsGrpcServer({
          service: opened.service,
          rvps: opened.rvps,
          address,
          logger,
          ...(tls !== undefined && { tls }),
        });
        logger.info(
          { address, port: server.port, rvps: settings.rvps.type },
          'attestation service listening',
        );
        const rest =
          values.rest === undefined ? undefined : await startAsRestServer(opened, values.rest, logger, tls);
        if (rest !== undefined)
          logger.info({ address: values.rest, port: rest.port }, 'REST attestation service listening');
        const signal = await stop();
        logger.info({ signal }, 'attestation service stopping');
        await rest?.close();
        await server.close();
      } finally {
        await opened.close();
      }
      return 0;
    },
    io,
  );
}
