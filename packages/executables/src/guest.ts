// The guest multi-call executable baked into the pod-VM image: one Node runtime for all guest components.
import { run } from './dispatch.js';

run(
  'broker-guest',
  {
    'attestation-agent': async () => (await import('@broker/attestation-agent')).main,
    'confidential-data-hub': async () => (await import('@broker/data-hub')).main,
    'api-server-rest': async () => (await import('@broker/api-server-rest')).main,
    'agent-policy-gate': async () => (await import('@broker/agent-policy')).main,
    'sandbox-agent': async () => (await import('@broker/sandbox-agent')).main,
    'sealed-secret-init': async () => (await import('@broker/sealed-secret')).mainInit,
    'process-user-data': async () => (await import('@broker/provisioner')).processUserDataMain,
  },
  // The daemons that may share one process (the units ask: `broker-guest --together
  // attestation-agent ... --and confidential-data-hub ... --and sealed-secret-init ... --and
  // agent-policy-gate serve ...`); api-server-rest stays alone in the pod's network namespace.
  {
    'attestation-agent': async () => {
      const { main } = await import('@broker/attestation-agent');
      return (argv, { signal, ready }) => main(argv, { signal, onListening: ready });
    },
    'confidential-data-hub': async () => {
      const { main } = await import('@broker/data-hub');
      return (argv, { signal, ready }) => main(argv, { stop: signal, onListening: ready });
    },
    'agent-policy-gate': async () => {
      const { main } = await import('@broker/agent-policy');
      return (argv, { signal, ready }) => main(argv, { signal, onListening: () => ready() });
    },
  },
  // One-shot commands that may run between them: unsealing /sealed once the hub serves and before
  // the gate lets the host create containers.
  {
    'sealed-secret-init': async () => (await import('@broker/sealed-secret')).mainInit,
  },
);
