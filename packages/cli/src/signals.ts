/**
 * Resolves with the signal's name when the process is asked to stop (SIGTERM or SIGINT), and then
 * stops listening, so a service's main can `await` it between starting and closing its listeners.
 */
export function untilStopSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const stop = (signal: NodeJS.Signals) => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      resolve(signal);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
}
