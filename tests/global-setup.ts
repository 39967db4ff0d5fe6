import { dockerAnswers, hasBinary } from '@vab/testkit';

/**
 * Fails the run at once, with the command that fixes it, when neither a Docker engine nor the server
 * binaries are there. Each test stack then starts its own servers (tests/helpers/stack.ts).
 */
export default async function setup(): Promise<void> {
  // voice tests speak real audio, made at test time
  const speech = [
    ['espeak-ng', 'espeak-ng'],
    ['sox', 'sox'],
  ].filter(([b]) => !hasBinary(b!));
  if (speech.length > 0) {
    const pkgs = speech.map(([, p]) => p).join(' ');
    throw new Error(`tests need ${pkgs}: apt-get install -y ${pkgs}`);
  }
  if (process.env.NATS_URL && process.env.REDIS_URL) return;
  if (await dockerAnswers()) return;
  const missing = ['nats-server', 'redis-server'].filter((b) => !hasBinary(b));
  if (missing.length > 0) {
    throw new Error(
      `tests need ${missing.join(' and ')}: apt-get install -y ${missing.join(' ')} (or a Docker engine)`,
    );
  }
}
