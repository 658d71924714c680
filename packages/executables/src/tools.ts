// The service-and-tools multi-call executable: the KBS and the operator's tools.
import { run } from './dispatch.js';

run('broker-tools', {
  kbs: async () => (await import('@broker/kbs')).main,
  'kbs-storage': async () => (await import('@broker/kbs')).kbsStorageMain,
  'kbs-client': async () => (await import('@broker/kbs-client')).main,
  'kbs-verify': async () => (await import('@broker/verifier')).kbsVerifyMain,
  rego: async () => (await import('@broker/rego')).main,
  secret: async () => (await import('@broker/sealed-secret')).main,
  brokerctl: async () => (await import('@broker/deploy')).brokerctlMain,
  initdata: async () => (await import('@broker/deploy')).initdataMain,
  'mock-tee': async () => (await import('@broker/mock-tee')).mockTeeMain,
  'image-policy': async () => (await import('@broker/image-tools')).imagePolicyMain,
  'image-pull': async () => (await import('@broker/image-tools')).imagePullMain,
  'reference-values': async () => (await import('@broker/reference-values')).referenceValuesMain,
  'attestation-service': async () => (await import('@broker/attestation-service')).attestationServiceMain,
  'grpc-as': async () => (await import('@broker/attestation-service')).grpcAsMain,
  'restful-as': async () => (await import('@broker/attestation-service')).restfulAsMain,
  rvps: async () => (await import('@broker/rvps')).rvpsMain,
  'rvps-tool': async () => (await import('@broker/rvps')).rvpsToolMain,
  'kbs-plugin-example': async () => (await import('@broker/kbs')).kbsPluginExampleMain,
});
