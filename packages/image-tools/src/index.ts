export { IMAGE_TOOLS_VERSION, type ImageCliIo, imagePolicyMain, imagePullMain } from './cli.js';
