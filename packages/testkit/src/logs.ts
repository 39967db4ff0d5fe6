import { Writable } from 'node:stream';

/** A log destination that pushes each line written to it onto `lines`: what tests assert log output with. */
export function lineSink(lines: string[]): Writable {
  return new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      cb();
    },
  });
}
