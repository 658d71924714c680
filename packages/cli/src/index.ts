export {
  CommandExit,
  type CommandIo,
  type CommandSpec,
  choice,
  helpText,
  type OptionSpec,
  type OptionSpecs,
  type OptionValues,
  type ParsedCommand,
  parseCommand,
  processIo,
  reportUsageError,
  required,
  runCommand,
  UsageError,
} from './args.js';
export { ConfigError, isTable, Section, type SectionStyle } from './config-reader.js';
export {
  ActionableError,
  backtraceOf,
  CliError,
  type CliErrorCode,
  describeError,
  describeFailure,
  hintOf,
  isCertificateFailureCode,
  messageOf,
  wantsBacktrace,
  withHint,
} from './errors.js';
export { DirectoryError, makeDirectory, makeDirectorySync } from './fs.js';
export {
  type AccessRecord,
  accessRecord,
  applyConfiguredLevel,
  createLogger,
  formatLogLine,
  LOG_FORMAT_HELP,
  LOG_FORMAT_OPTION,
  LOG_FORMATS,
  type LogFormat,
  type Logger,
  type LoggerOptions,
  type LogLevel,
  LogLevelError,
  parseLogDirectives,
  resolveLogLevel,
} from './log.js';
export { type LogFlags, logFlags } from './log-flags.js';
export { untilStopSignal } from './signals.js';
export { BUILD_DESCRIPTION, versionLine } from './version.js';
