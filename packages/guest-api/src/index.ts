export * from './attestation-agent.js';
export * from './data-hub.js';
