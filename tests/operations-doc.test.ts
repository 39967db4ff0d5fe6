import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig as agentsConfig } from '@vab/agents';
import { loadConfig as gatewayConfig } from '@vab/gateway';
import { loadConfig as playgroundConfig } from '@vab/playground';
import { loadConfig as sessionsConfig } from '@vab/sessions';
import { loadConfig as telephonyConfig } from '@vab/telephony';
import { loadConfig as webhooksConfig } from '@vab/webhooks';
import { BaseEnv, MetricsEnv, RedisEnv } from '@vab/service-kit';

/**
 * The README sends operators to docs/operations.md for "configuration of each service (environment variables,
 * defaults)": every variable a service's config.ts reads is named there, and a default the list states is the
 * one the code applies (six test-run settings were once read but listed only in api.md).
 */
const root = join(import.meta.dirname, '..');
const doc = readFileSync(join(root, 'docs', 'operations.md'), 'utf8');

/** Required settings, so that loading a configuration from nothing else gives the defaults. */
const REQUIRED = { TWILIO_AUTH_TOKEN: 'x', WEBHOOK_SECRETS_KEY: 'a'.repeat(64) };
const LOADERS: Record<string, (env: NodeJS.ProcessEnv) => object> = {
  agents: agentsConfig,
  gateway: gatewayConfig,
  playground: playgroundConfig,
  sessions: sessionsConfig,
  telephony: telephonyConfig,
  webhooks: webhooksConfig,
};
/** Names a config.ts reads only to refuse them (a misspelling, a renamed setting): not settings. */
const NOT_SETTINGS = new Set(['API_TOKEN', 'TEST_CASE_ATTEMPTS']);

/** The variables a service's config.ts reads: its own shape's keys and the service kit's it spreads. */
function variablesOf(service: string): string[] {
  const source = readFileSync(join(root, 'services', service, 'src', 'config.ts'), 'utf8');
  const own = [...source.matchAll(/^\s{2,6}([A-Z][A-Z0-9_]+):/gm)].map((m) => m[1]!);
  return [
    ...own,
    ...Object.keys(BaseEnv.shape),
    ...(source.includes('...RedisEnv') ? Object.keys(RedisEnv) : []),
    ...(source.includes('...MetricsEnv') ? Object.keys(MetricsEnv) : []),
  ].filter((v) => !NOT_SETTINGS.has(v));
}

/** Each list item of the document as one line: `- \`A\`, \`B\` (svc; default \`1\`, \`2\`): …`. */
const items = doc
  .split('\n')
  .reduce<string[]>((acc, line) => {
    if (line.startsWith('- ')) acc.push(line);
    else if (/^\s+\S/.test(line) && acc.length > 0) acc[acc.length - 1] += ` ${line.trim()}`;
    else acc.push('');
    return acc;
  }, [])
  .filter(Boolean);

/**
 * The defaults the document states, as `<service>:VAR` when the item names its services (`VAR` (sessions;
 * default `1`)) and as `VAR` too: positionally for `A`, `B` (…; default `a`, `b`). A default of `npm start`'s, or
 * a placeholder (`<repo>/.env`), is not a service's.
 */
function statedDefaults(): Map<string, string> {
  const stated = new Map<string, string>();
  for (const item of items) {
    for (const m of item.matchAll(/((?:`[A-Z][A-Z0-9_]+`(?:,\s*)?)+)\s*\(([^)]*?\bdefault\b[^)]*)\)/g)) {
      const names = [...m[1]!.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((x) => x[1]!);
      const services = /^([a-z, ]+);/.exec(m[2]!)?.[1]!.split(/,\s*/) ?? [];
      if (services.includes('npm start')) continue;
      const given = /\bdefault:?\s*((?:`[^`]*`(?:,\s*)?)+)/.exec(m[2]!);
      if (!given) continue;
      const values = [...given[1]!.matchAll(/`([^`]*)`/g)].map((x) => x[1]!);
      names.forEach((name, i) => {
        const value = values[i] ?? values[0]!;
        if (value.includes('<')) return;
        for (const service of services) stated.set(`${service}:${name}`, value);
        if (!stated.has(name)) stated.set(name, value);
      });
    }
  }
  return stated;
}

describe('docs/operations.md', () => {
  it('names every variable a service reads', () => {
    const missing = Object.keys(LOADERS).flatMap((service) =>
      variablesOf(service)
        .filter((v) => !doc.includes(`\`${v}\``))
        .map((v) => `${service}: ${v}`),
    );
    expect(missing).toEqual([]);
  });

  it('states the defaults the services apply', () => {
    const stated = statedDefaults();
    const wrong: string[] = [];
    let checked = 0;
    for (const [service, load] of Object.entries(LOADERS)) {
      const config = load({ ...REQUIRED }) as Record<string, unknown>;
      for (const name of variablesOf(service)) {
        const value = config[name];
        const said = stated.get(`${service}:${name}`) ?? stated.get(name);
        if (said === undefined || (typeof value !== 'number' && typeof value !== 'string')) continue;
        checked++;
        // `1048576` or `1,048,576`
        if (said !== String(value) && said.replace(/,/g, '') !== String(value))
          wrong.push(`${service}: ${name} says ${said}, is ${value}`);
      }
    }
    expect(wrong).toEqual([]);
    // the reading above finds the list's defaults at all (a reworded list would otherwise check nothing)
    expect(checked).toBeGreaterThan(100);
  });
});
