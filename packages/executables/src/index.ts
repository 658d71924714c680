export {
  type CommandMain,
  dispatch,
  run,
  runTogether,
  type SharedMain,
  splitTogether,
  TOGETHER_SEPARATOR,
} from './dispatch.js';
