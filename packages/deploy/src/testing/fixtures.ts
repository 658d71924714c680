// Shared test inputs: a BrokerConfig and the TLS Secrets it names, made with `brokerctl certs`' generator.
import { generateCertificates, tlsSecrets } from '../certs.js';
import { routeHost } from '../names.js';
import { collectSecrets, type SourceSecret } from '../source-secrets.js';

export const NAMESPACE = 'trustee-ns';
export const CLUSTER_DOMAIN = 'apps.example.test';
export const HOST = routeHost(NAMESPACE, CLUSTER_DOMAIN);

export function brokerConfigDoc(
  spec: Record<string, unknown> = {},
  name = 'broker',
): Record<string, unknown> {
  return {
    apiVersion: 'broker.confidentialcontainers.org/v1alpha1',
    kind: 'BrokerConfig',
    metadata: { name, namespace: NAMESPACE },
    spec: {
      profileType: 'Restricted',
      kbsServiceType: 'ClusterIP',
      httpsSpec: { tlsSecretName: 'kbs-https-tls' },
      attestationTokenVerificationSpec: { tlsSecretName: 'kbs-token-tls' },
      kbsSecretResources: ['attestation-status', 'kbsres1'],
      ...spec,
    },
  };
}

export const certNames = {
  namespace: NAMESPACE,
  routeHost: HOST,
  httpsSecretName: 'kbs-https-tls',
  tokenSecretName: 'kbs-token-tls',
  organization: 'Example Org',
};

let cached:
  | Promise<{
      docs: unknown[];
      secrets: Map<string, SourceSecret>;
      certs: Awaited<ReturnType<typeof generateCertificates>>;
    }>
  | undefined;

/** One set of generated certificates per test file (RSA key generation is slow). */
export function sourceSecrets() {
  cached ??= generateCertificates(certNames).then((certs) => {
    const docs = tlsSecrets(certNames, certs) as unknown[];
    return { docs, secrets: collectSecrets(docs, 'test').secrets, certs };
  });
  return cached;
}
