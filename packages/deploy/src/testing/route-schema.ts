// JSON schema of route.openshift.io/v1 Route, written from OpenShift's Route API (route/v1 types and its
// generated CRD): every object closed to unknown fields, so a misspelt field fails validation.
const NAME = { type: 'string', minLength: 1 };
const DNS_SUBDOMAIN =
  '^([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9\\-]{0,61}[a-zA-Z0-9])(\\.([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9\\-]{0,61}[a-zA-Z0-9]))*$';

const TARGET = {
  type: 'object',
  additionalProperties: false,
  required: ['kind', 'name'],
  properties: {
    kind: { type: 'string', enum: ['Service', ''] },
    name: NAME,
    weight: { type: 'integer', minimum: 0, maximum: 256 },
  },
};

export const ROUTE_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['apiVersion', 'kind', 'metadata', 'spec'],
  properties: {
    apiVersion: { const: 'route.openshift.io/v1' },
    kind: { const: 'Route' },
    metadata: {
      type: 'object',
      additionalProperties: false,
      required: ['name'],
      properties: {
        name: NAME,
        namespace: NAME,
        labels: { type: 'object', additionalProperties: { type: 'string' } },
        annotations: { type: 'object', additionalProperties: { type: 'string' } },
      },
    },
    spec: {
      type: 'object',
      additionalProperties: false,
      required: ['to'],
      properties: {
        host: { type: 'string', maxLength: 253, pattern: DNS_SUBDOMAIN },
        subdomain: { type: 'string', maxLength: 253, pattern: DNS_SUBDOMAIN },
        path: { type: 'string', pattern: '^/' },
        to: TARGET,
        alternateBackends: { type: 'array', maxItems: 3, items: TARGET },
        port: {
          type: 'object',
          additionalProperties: false,
          required: ['targetPort'],
          properties: {
            targetPort: {
              anyOf: [
                { type: 'integer', minimum: 1, maximum: 65535 },
                { type: 'string', minLength: 1 },
              ],
            },
          },
        },
        tls: {
          type: 'object',
          additionalProperties: false,
          required: ['termination'],
          properties: {
            termination: { type: 'string', enum: ['edge', 'reencrypt', 'passthrough'] },
            certificate: { type: 'string' },
            key: { type: 'string' },
            caCertificate: { type: 'string' },
            destinationCACertificate: { type: 'string' },
            insecureEdgeTerminationPolicy: { type: 'string', enum: ['Allow', 'None', 'Redirect', ''] },
            externalCertificate: {
              type: 'object',
              additionalProperties: false,
              properties: { name: { type: 'string' } },
            },
          },
          // Passthrough carries no certificates and cannot allow plain HTTP.
          anyOf: [
            { properties: { termination: { not: { const: 'passthrough' } } } },
            {
              properties: {
                certificate: { maxLength: 0 },
                key: { maxLength: 0 },
                caCertificate: { maxLength: 0 },
                destinationCACertificate: { maxLength: 0 },
                insecureEdgeTerminationPolicy: { not: { const: 'Allow' } },
              },
            },
          ],
        },
        wildcardPolicy: { type: 'string', enum: ['None', 'Subdomain', ''] },
      },
    },
    status: { type: 'object' },
  },
};
