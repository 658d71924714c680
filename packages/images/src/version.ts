// The images' version and repository prefix, on their own so that tools naming the images (`brokerctl
// render`'s default KBS image) import two strings, not the image builder.

/** The tag every image gets. */
export const IMAGES_VERSION = '0.1.0';
/** Where `brokerctl render` and the tests expect the images by default. */
export const DEFAULT_REPOSITORY_PREFIX = 'localhost/broker';
