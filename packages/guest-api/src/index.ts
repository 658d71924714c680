export * from './aa-kbc-params.js';
export * from './attestation-agent.js';
export * from './data-hub.js';
export * from './errors.js';
