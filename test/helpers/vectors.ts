// The end-to-end tests find upstream test vectors with the packages' locator.
export { vector } from '@broker/cli/testing';
