import type { Browser } from 'playwright-core';
import { hasBinary } from './servers.js';

/** Debian's Chromium: the browser tests drive (no browser download can happen here). */
export const CHROMIUM_PATH = '/usr/bin/chromium';

/**
 * A headless Debian Chromium driven by playwright-core. Without the background-networking flags Chromium
 * keeps trying hosts this machine cannot reach; `--no-sandbox` because tests run as root. `args`: more
 * switches (a fake microphone: `fakeMicrophone`).
 */
export async function launchChromium(opts: { args?: string[] } = {}): Promise<Browser> {
  if (!hasBinary('chromium')) {
    throw new Error(
      'chromium is not installed: install the Debian package with `apt-get install -y chromium`',
    );
  }
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      ...(opts.args ?? []),
    ],
  });
}

/**
 * Chromium's switches for a page that talks: the microphone granted without asking, fed from `wavPath` (a
 * 16-bit PCM WAV, played in a loop: pad it with silence), and audio that plays without a user's gesture.
 */
export const fakeMicrophone = (wavPath: string): string[] => [
  '--use-fake-ui-for-media-stream',
  '--use-fake-device-for-media-stream',
  `--use-file-for-fake-audio-capture=${wavPath}`,
  '--autoplay-policy=no-user-gesture-required',
];
