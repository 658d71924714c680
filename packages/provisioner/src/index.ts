export { PROCESS_USER_DATA_USAGE, type ProcessUserDataIo, processUserDataMain } from './cli.js';
export { ProvisionError, type ProvisionErrorCode } from './errors.js';
export {
  AGENT_REQUESTS,
  ALLOW_ALL_POLICY,
  DEFAULT_INITDATA_TOML,
  type DecodedInitData,
  decodeUserDataInitData,
  defaultInitData,
  INITDATA_FILES,
  NO_KBS_AA_TOML,
  NO_KBS_CDH_TOML,
} from './initdata.js';
export {
  bufferReader,
  looksLikeIso,
  MAX_DIRECTORY_BYTES,
  type ReadAt,
  readIsoRootFile,
  withFileReader,
} from './iso9660.js';
export { bindInitDataToPcr8, INITDATA_PCR, type Pcr8Outcome, type Pcr8Result } from './pcr8.js';
export {
  INITDATA_DIR,
  PEERPOD_DIR,
  type ProvisionOptions,
  type ProvisionResult,
  provisionFiles,
} from './provision.js';
export {
  AZURE_USER_DATA_PATH,
  DEFAULT_CIDATA_DEVICE,
  DEFAULT_CIDATA_DIR,
  type DefaultSourceOptions,
  defaultSource,
  type FetchOptions,
  fetchUserData,
  type UserDataSource,
} from './sources.js';
export {
  type AcceptedFiles,
  ALLOWED_WRITE_FILES,
  acceptWriteFiles,
  type CloudConfig,
  INITDATA_USER_DATA_PATH,
  MAX_USER_DATA_BYTES,
  parseCloudConfig,
  type WriteFile,
} from './user-data.js';
