import { describe, expect, it } from 'vitest';
import { parseAsConfig } from './config.js';

describe('AS config', () => {
  it("reads trustee's docker-compose as-config.json", () => {
    const c = parseAsConfig({
      storage_backend: {
        storage_type: 'LocalFs',
        backends: { local_fs: { dir_path: '/var/lib/attestation-service/storage' } },
      },
      rvps_config: { type: 'GrpcRemote', address: 'http://rvps:50003' },
      attestation_token_broker: {
        duration_min: 5,
        signer: {
          key_path: '/opt/confidential-containers/kbs/user-keys/token.key',
          cert_path: '/opt/confidential-containers/kbs/user-keys/token-cert-chain.pem',
        },
      },
      verifier_config: { nvidia_verifier: { type: 'Remote' } },
    });
    expect(c.storage).toEqual({ storageType: 'LocalFs', localFsDir: '/var/lib/attestation-service/storage' });
    expect(c.rvps).toEqual({ type: 'GrpcRemote', address: 'http://rvps:50003' });
    expect(c.service.tokenBroker.durationMin).toBe(5);
  });
});
