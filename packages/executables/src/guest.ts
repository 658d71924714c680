// The guest multi-call executable baked into the pod-VM image: one Node runtime for all guest components.
import { run } from './dispatch.js';

run('broker-guest', {
  'attestation-agent': async () => (await import('@broker/attestation-agent')).main,
  'confidential-data-hub': async () => (await import('@broker/data-hub')).main,
  'api-server-rest': async () => (await import('@broker/api-server-rest')).main,
  'agent-policy-gate': async () => (await import('@broker/agent-policy')).main,
  'sealed-secret-init': async () => (await import('@broker/sealed-secret')).mainInit,
  'process-user-data': async () => (await import('@broker/provisioner')).processUserDataMain,
});
