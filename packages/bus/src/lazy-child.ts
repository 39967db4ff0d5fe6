import type { Bindings, Logger } from 'pino';

/**
 * `log.child(bindings)` made only when something is logged. A child per request (the gateway's `req.log`,
 * a handler's `ctx.log`) costs a redaction pass and a serialization of its bindings even when the request
 * logs nothing, which most reads don't.
 */
export function lazyChild(log: Logger, bindings: Bindings): Logger {
  let child: Logger | undefined;
  const made = () => (child ??= log.child(bindings));
  return new Proxy(log, {
    // Properties read from the parent until a method is called (Fastify checks the methods exist).
    get(target, prop) {
      const owner = child ?? target;
      const value: unknown = Reflect.get(owner, prop, owner);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const c = made();
        return (Reflect.get(c, prop, c) as (...a: unknown[]) => unknown).apply(c, args);
      };
    },
    set(_target, prop, value) {
      return Reflect.set(made(), prop, value);
    },
  });
}
