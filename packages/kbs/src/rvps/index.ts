export { referenceValueMessages } from './document.js';
export { RvpsError, type RvpsErrorCode } from './errors.js';
export {
  checkReferenceValueName,
  extractReferenceValues,
  MAX_REFERENCE_VALUE_DEPTH,
  MAX_REFERENCE_VALUE_NAME_LENGTH,
  MAX_REFERENCE_VALUES_PER_MESSAGE,
  MAX_RVPS_MESSAGE_LENGTH,
  type ProvenanceType,
  parseRvpsMessage,
  RVPS_MESSAGE_VERSION,
  type RvpsMessage,
  type RvpsMessageInput,
} from './message.js';
export {
  addMonthsUtc,
  MONTHS_BEFORE_EXPIRATION,
  REFERENCE_VALUE_VERSION,
  type ReferenceValue,
} from './reference-value.js';
export { createRvps, type Rvps, type RvpsOptions } from './rvps.js';
