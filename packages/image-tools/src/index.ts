export { IMAGE_TOOLS_VERSION, type ImageCliIo, imagePolicyMain, imagePullMain } from './cli.js';
export { ImageToolsError, type ImageToolsErrorCode } from './errors.js';
