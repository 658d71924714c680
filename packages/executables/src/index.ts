export { type CommandMain, dispatch, run } from './dispatch.js';
