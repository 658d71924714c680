export { RVPS_VERSION, rvpsMain, rvpsToolMain } from './cli.js';
