export {
  ConfigfsTsmResponder,
  type ConfigfsTsmResponderOptions,
  type TsmProviderCallback,
  type TsmRequest,
  type TsmResponderErrorHandler,
  type TsmResponse,
} from './responder.js';
