import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { hasBinary } from './servers.js';
import { concat, silence, speak } from './speech.js';

/** Debian's Chromium: the browser tests drive (no browser download can happen here). */
export const CHROMIUM_PATH = '/usr/bin/chromium';

/**
 * A headless Debian Chromium driven by playwright-core. Without the background-networking flags Chromium
 * keeps trying hosts this machine cannot reach; `--no-sandbox` because tests run as root. `args`: more
 * switches (a fake microphone: `launchChromiumWithMicrophone`).
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
 * A Chromium whose page talks as a caller: the microphone granted without asking, fed from `caller` (16-bit
 * mono PCM at `rate`, written to a WAV in a temporary folder, removed when the browser closes), and audio that
 * plays without a user's gesture. Chromium loops the file from each capture's start: pad it with silence.
 */
export async function launchChromiumWithMicrophone(caller: Int16Array, rate: number): Promise<Browser> {
  const dir = mkdtempSync(join(tmpdir(), 'vab-microphone-'));
  const wavPath = join(dir, 'caller.wav');
  writeFileSync(wavPath, wavOf(caller, rate));
  try {
    const browser = await launchChromium({
      args: [
        '--use-fake-ui-for-media-stream',
        '--use-fake-device-for-media-stream',
        `--use-file-for-fake-audio-capture=${wavPath}`,
        '--autoplay-policy=no-user-gesture-required',
      ],
    });
    browser.on('disconnected', () => rmSync(dir, { recursive: true, force: true }));
    return browser;
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** The rate a page's caller is fed to Chromium's microphone at. */
const CALLER_RATE = 48000;
/** Before a page's caller speaks: the agent's greeting plays out first (Chromium starts the file at each capture). */
export const CALLER_LEAD_MS = 4500;

/**
 * A Chromium whose page talks as a caller that waits `CALLER_LEAD_MS`, then says `turns` in order (a string spoken
 * by espeak-ng, a number that many ms of silence), then is silent for 90 s: Chromium loops the file, and a test is
 * done before the loop.
 */
export function launchChromiumCaller(...turns: (string | number)[]): Promise<Browser> {
  const caller = concat(
    silence(CALLER_LEAD_MS, CALLER_RATE),
    ...turns.map((t) => (typeof t === 'string' ? speak(t, CALLER_RATE) : silence(t, CALLER_RATE))),
    silence(90_000, CALLER_RATE),
  );
  return launchChromiumWithMicrophone(caller, CALLER_RATE);
}

/** A 16-bit mono PCM WAV (what Chromium's fake capture reads). */
function wavOf(pcm: Int16Array, rate: number): Buffer {
  const data = Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength);
  const head = Buffer.alloc(44);
  head.write('RIFF', 0);
  head.writeUInt32LE(36 + data.length, 4);
  head.write('WAVEfmt ', 8);
  head.writeUInt32LE(16, 16);
  head.writeUInt16LE(1, 20);
  head.writeUInt16LE(1, 22);
  head.writeUInt32LE(rate, 24);
  head.writeUInt32LE(rate * 2, 28);
  head.writeUInt16LE(2, 32);
  head.writeUInt16LE(16, 34);
  head.write('data', 36);
  head.writeUInt32LE(data.length, 40);
  return Buffer.concat([head, data]);
}
