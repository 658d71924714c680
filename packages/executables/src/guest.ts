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
    'encrypted-disk': async () => (await import('@broker/data-hub')).encryptedDiskMain,
    'process-user-data': async () => (await import('@broker/provisioner')).processUserDataMain,
  },
  // The daemons that may share one process (the units ask: `broker-guest --together
  // attestation-agent ... --and confidential-data-hub ... --and sealed-secret-init ... --and
  // encrypted-disk ... --and agent-policy-gate serve ...`); api-server-rest stays alone in the pod's network namespace.
  {
    'attestation-agent': async () => {
      const { main } = await import('@broker/attestation-agent');
      return (argv, { signal, ready }) => main(argv, { signal, onListening: ready });
    },
    'confidential-data-hub': async () => {
      const { main } = await import('@broker/data-hub');
      return (argv, { signal, ready }) => main(argv, { stop: signal, onListening: ready });
    },
    // A one-shot whose failure must stop the chain: the disk opened, it "serves" until the stop (the
    // gate after it starts only then); not opened, it ends and the others stop with it.
    'encrypted-disk': async () => {
      const { encryptedDiskMain } = await import('@broker/data-hub');
      return async (argv, { signal, ready }) => {
        const code = await encryptedDiskMain(argv);
        if (code !== 0) return code;
        ready();
        if (!signal.aborted)
          await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        return 0;
      };
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
