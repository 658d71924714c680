// trustee's three-service shape (attestation service + RVPS over gRPC) driven by an independent client:
// Debian's python3-grpcio with stubs generated at test time from trustee's protos by Debian's protoc and
// grpc_python_plugin, the EAR token checked with python3-cryptography (test/helpers/trustee_grpc_client.py).
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  openAttestationService,
  parseAsConfig,
  startAsGrpcServer,
  startAsRestServer,
} from '@broker/attestation-service';
import { createLogger } from '@broker/cli';
import { createRvps, loadRvpsConfig, openRvpsStorage, startRvpsServer } from '@broker/rvps-core';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from './helpers/process.js';

const run = promisify(execFile);
const PROTOS = join(ROOT, 'packages', 'trustee-protos', 'protos');
const CLIENT = join(ROOT, 'test', 'helpers', 'trustee_grpc_client.py');

// Affirms executables only when the evidence's SVN is among the RVPS's `svn` values.
const SVN_POLICY = `package policy
import rego.v1

default executables := 33

executables := 2 if {
  input.sample.svn in query_reference_value("svn")
}

trust_claims := {"executables": executables}
`;

const silent = createLogger({
  name: 'interop',
  env: { RUST_LOG: 'off' },
  format: 'json',
  destination: { write() {} },
});

describe('trustee gRPC interop (python3-grpcio)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'grpc-interop-'));
  const closers: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('registers and queries through the RVPS, then evaluates sample evidence through the AS (gRPC and REST) into tokens Python verifies', async () => {
    // RVPS from a trustee-style rvps.json (LocalJson), the AS with trustee's GrpcRemote RVPS setting.
    const rvpsConfig = join(dir, 'rvps.json');
    writeFileSync(
      rvpsConfig,
      JSON.stringify({
        storage: { storage_type: 'LocalJson', backends: { local_json: { file_dir_path: join(dir, 'rv') } } },
      }),
    );
    const storage = await openRvpsStorage(loadRvpsConfig(rvpsConfig));
    closers.push(() => storage.close());
    const rvps = await startRvpsServer({ rvps: createRvps(storage), address: '127.0.0.1:0' });
    closers.push(() => rvps.close());
    const as = await openAttestationService(
      parseAsConfig({
        storage_backend: { storage_type: 'LocalFs', backends: { local_fs: { dir_path: join(dir, 'as') } } },
        rvps_config: { type: 'GrpcRemote', address: `127.0.0.1:${rvps.port}` },
        attestation_token_broker: { duration_min: 5, issuer_name: 'interop-as' },
      }),
      silent,
    );
    closers.push(() => as.close());
    const asServer = await startAsGrpcServer({ service: as.service, rvps: as.rvps, address: '127.0.0.1:0' });
    closers.push(() => asServer.close());
    const restServer = await startAsRestServer(as, '127.0.0.1:0');
    closers.push(() => restServer.close());
    const policy = join(dir, 'svn.rego');
    writeFileSync(policy, SVN_POLICY);

    const { stdout } = await run('/usr/bin/python3', [
      CLIENT,
      PROTOS,
      `127.0.0.1:${rvps.port}`,
      `127.0.0.1:${asServer.port}`,
      policy,
      `http://127.0.0.1:${restServer.port}`,
    ]);
    const seen = JSON.parse(stdout);
    expect(seen.query).toBe('["3"]');
    expect(seen.unknown_has_field).toBe(false);
    expect(seen.bad_version.code).toBe('ABORTED');
    expect(seen.bad_version.details).toMatch(/^Register reference value: /);
    expect(seen.token).toEqual({
      iss: 'interop-as',
      status: 'affirming',
      executables: 2,
      policy: 'svn',
      runtime_data_claims: {
        nonce: 'python-nonce',
        'tee-pubkey': { kty: 'EC', crv: 'P-256', x: 'a', y: 'b' },
      },
    });
    expect(seen.mismatch).toEqual({ code: 'ABORTED', details: 'Attestation evaluation failed: ' });
    // The same service through trustee's restful-as routes, from Python's urllib.
    expect(seen.rest).toEqual({
      executables: 2,
      jwks_has_signer: true,
      tpm: { status: 500, body: 'An internal error occured: ' },
    });
  });
});
