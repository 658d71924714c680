import { vector } from '@broker/cli/testing';
import { loadRvpsConfig, parseRvpsConfig } from '@broker/rvps-core';
import { describe, expect, it } from 'vitest';
import { loadAsConfig, parseAsConfig } from './config.js';

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

  it("reads trustee's shipped AS configuration files unchanged", () => {
    const compose = loadAsConfig(vector('trustee/configs/kbs/config/docker-compose/as-config.json'));
    expect(compose.rvps).toEqual({ type: 'GrpcRemote', address: 'http://rvps:50003' });
    expect(compose.storage).toEqual({
      storageType: 'LocalFs',
      localFsDir: '/var/lib/attestation-service/storage',
    });
    expect(compose.service.tokenBroker.signer?.keyPath).toBe(
      '/opt/confidential-containers/kbs/user-keys/token.key',
    );
    const k8s = loadAsConfig(vector('trustee/configs/kbs/config/kubernetes/base/as-config.json'));
    expect(k8s.storage.storageType).toBe('Memory');
    expect(k8s.warnings).toEqual(['work_dir is not an attestation service setting; ignored']);
    const image = loadAsConfig(vector('trustee/configs/attestation-service/config.json'));
    expect(image.rvps).toEqual({ type: 'BuiltIn' });
    expect(image.warnings).toContain(
      'rvps_config.storage_type is not used: the built-in RVPS keeps reference values in storage_backend (Memory)',
    );
  });

  it("runs trustee's docker-compose rvps.json on Memory, as trustee does (its keys are not rvps settings)", () => {
    const c = loadRvpsConfig(vector('trustee/configs/kbs/config/docker-compose/rvps.json'));
    expect(c.storageType).toBe('Memory');
    expect(c.warnings).toHaveLength(2);
  });

  it("reads the Helm chart's as-config.json and rvps.json shapes (every backend table present, LocalFs chosen)", () => {
    const backends = {
      local_fs: { dir_path: '/opt/confidential-containers/attestation-service' },
      local_json: { file_dir_path: '/opt/confidential-containers/storage/local_json' },
      postgres: {},
      redis: {},
    };
    const as = parseAsConfig({
      storage_backend: { storage_type: 'LocalFs', backends },
      rvps_config: { type: 'GrpcRemote', address: 'http://trustee-rvps:50003' },
      attestation_token_broker: { duration_min: 5 },
      verifier_config: {},
    });
    expect(as.storage).toEqual({
      storageType: 'LocalFs',
      localFsDir: '/opt/confidential-containers/attestation-service',
      localJsonDir: '/opt/confidential-containers/storage/local_json',
      postgres: { db: 'postgres', username: 'postgres', port: 5432, host: 'localhost' },
    });
    expect(as.rvps).toEqual({ type: 'GrpcRemote', address: 'http://trustee-rvps:50003' });
    const rvps = parseRvpsConfig({
      storage: {
        storage_type: 'LocalFs',
        backends: {
          ...backends,
          local_fs: { dir_path: '/opt/confidential-containers/attestation-service/reference_values' },
        },
      },
      extractors: { swid_extractor: {} },
    });
    expect(rvps.storageType).toBe('LocalFs');
    expect(rvps.localFsDir).toBe('/opt/confidential-containers/attestation-service/reference_values');
  });
});
