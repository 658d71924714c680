// The service-and-tools multi-call executable: kbs, kbs-client, rego.
import { run } from './dispatch.js';

run('broker-tools', {
  kbs: async () => (await import('@broker/kbs')).main,
  'kbs-client': async () => (await import('@broker/kbs-client')).main,
  rego: async () => (await import('@broker/rego')).main,
});
