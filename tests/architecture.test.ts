import { connect } from '@nats-io/transport-node';
import * as contracts from '@vab/contracts';
import { buildGateway, routes } from '@vab/gateway';
import { startLocalNats } from '@vab/testkit';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import ts from 'typescript';
import { beforeAll, describe, expect, it } from 'vitest';

/**
 * docs/architecture.md held to the code and to the NATS users (deploy/nats-users.conf): every path it names
 * exists, every subject, stream and bucket it names is declared, every declared one is named, who it says
 * subscribes and publishes is what NATS lets them, the gateway's own routes are all there, every playground
 * module is on the map, a glossary word is defined once, and no identifier takes a word the glossary rejects.
 * The last block proves these checks catch each claim the page once made falsely (issue 49).
 */

const ROOT = join(import.meta.dirname, '..');
const read = (p: string) => readFileSync(join(ROOT, p), 'utf8');
const DOC = read('docs/architecture.md');

// ---------------------------------------------------------------------------------------------- the facts

interface NatsUser {
  pubAllow: string[];
  pubDeny: string[];
  subAllow: string[];
}

interface Facts {
  /** Subjects the contracts declare, one `*` per token made per session. */
  declared: string[];
  users: Record<string, NatsUser>;
  streams: string[];
  buckets: string[];
  /** Subjects the gateway's route table sends. */
  routeSubjects: Set<string>;
  /** The gateway's routes that are not in its route table: `METHOD url`. */
  ownRoutes: string[];
  /** Non-test source files of the playground, from the repository root. */
  playgroundFiles: string[];
  /** Files that make an `AgentSession`. */
  agentSessionMakers: string[];
  /** Identifiers of our code, each with a file that has it. */
  identifiers: Map<string, string>;
}

/** `deploy/nats-users.conf`: each user's publish allow and deny, and subscribe allow. */
function natsUsers(text: string): Record<string, NatsUser> {
  const clean = text.replace(/#.*$/gm, '');
  const users: Record<string, NatsUser> = {};
  const blocks = clean.split(/\buser:\s*/).slice(1);
  const block = (s: string, key: string): string => {
    const at = s.search(new RegExp(`\\b${key}:\\s*\\{`));
    if (at < 0) return '';
    let depth = 0;
    for (let i = s.indexOf('{', at); i < s.length; i++) {
      if (s[i] === '{') depth++;
      if (s[i] === '}' && --depth === 0) return s.slice(at, i);
    }
    return '';
  };
  const list = (s: string, key: string) => {
    const m = new RegExp(`\\b${key}:\\s*\\[([^\\]]*)\\]`).exec(s);
    return m ? [...m[1]!.matchAll(/"([^"]+)"/g)].map((q) => q[1]!) : [];
  };
  for (const b of blocks) {
    const name = /^(\w+)/.exec(b)![1]!;
    const pub = block(b, 'publish');
    users[name] = {
      pubAllow: list(pub, 'allow'),
      pubDeny: list(pub, 'deny'),
      subAllow: list(block(b, 'subscribe'), 'allow'),
    };
  }
  return users;
}

/** JetStream streams and buckets a permission names: `[kind, name]`. */
function resourcesOf(entry: string): ['stream' | 'bucket', string][] {
  const out: ['stream' | 'bucket', string][] = [];
  const js =
    /^\$JS\.API\.(?:STREAM\.[A-Z]+(?:\.GET)?|DIRECT\.GET|CONSUMER\.[A-Z]+(?:\.[A-Z]+)?)\.([^.>]+)/.exec(
      entry,
    );
  const name = js?.[1];
  if (name) out.push(/^(KV|OBJ)_/.test(name) ? ['bucket', name.replace(/^(KV|OBJ)_/, '')] : ['stream', name]);
  const store = /^\$(?:KV|O)\.([^.>]+)/.exec(entry);
  if (store) out.push(['bucket', store[1]!]);
  // the events stream captures what is published on `events.>`
  if (entry === `${contracts.EVENTS_SUBJECT_PREFIX}.>`) out.push(['stream', contracts.EVENTS_STREAM]);
  return out;
}

/** What the contracts declare: `Subjects`, the subjects made per session (`…Subject`), the `…_SUBJECT`s. */
function declaredSubjects(): string[] {
  const out = new Set<string>(Object.values(contracts.Subjects));
  for (const [name, value] of Object.entries(contracts)) {
    if (typeof value === 'function' && /Subject$/.test(name)) {
      const fn = value as (...args: string[]) => string;
      // the builders refuse a wildcard (a client's text never becomes one): a token stands in, then `*`
      out.add(fn(...Array.from({ length: fn.length }, () => 'ARG')).replaceAll('ARG', '*'));
    } else if (typeof value === 'string' && /_SUBJECT$/.test(name)) out.add(value);
  }
  return [...out];
}

/**
 * A URL with its parameters unnamed: Fastify's tree shows `/:version|:a` where two routes name the same
 * parameter apart, so routes are compared by their shape.
 */
const params = (url: string) => url.replace(/:[\w|:]+/g, ':');

/** Every route a gateway serves, from Fastify's own tree (`printRoutes`), as `METHOD url`. */
function routesOf(tree: string): string[] {
  const out: string[] = [];
  const stack: string[] = [];
  for (const line of tree.split('\n')) {
    const m = /^((?:[│ ] {3})*)[├└]── (.*?) \(([^)]*)\)$/.exec(line);
    if (!m) continue;
    const depth = m[1]!.length / 4;
    stack.length = depth;
    stack.push(m[2]!);
    const url = stack.join('');
    for (const method of m[3]!.split(', ')) out.push(`${method} ${url}`);
  }
  return out;
}

async function gatewayOwnRoutes(): Promise<string[]> {
  const nats = await startLocalNats();
  const nc = await connect({ servers: nats.url });
  try {
    const app = await buildGateway({
      nc,
      log: pino({ level: 'silent' }),
      config: { BODY_LIMIT_BYTES: 1 << 20, REQUEST_TIMEOUT_MS: 5000, READY_TIMEOUT_MS: 1000 },
    });
    await app.ready();
    const table = new Set(routes.map((r) => `${r.method} ${params(r.url)}`));
    const all = routesOf(app.printRoutes({ commonPrefix: false }));
    await app.close();
    // HEAD comes with every GET, OPTIONS is CORS's preflight
    return all.filter((r) => !/^(HEAD|OPTIONS) /.test(r) && !table.has(params(r)));
  } finally {
    await nc.close();
    await nats.stop();
  }
}

function filesUnder(dir: string, test: (f: string) => boolean): string[] {
  const abs = join(ROOT, dir);
  if (!existsSync(abs)) return [];
  const out: string[] = [];
  for (const name of readdirSync(abs)) {
    if (name === 'node_modules' || name === 'dist') continue;
    const p = `${dir}/${name}`;
    if (statSync(join(ROOT, p)).isDirectory()) out.push(...filesUnder(p, test));
    else if (test(p)) out.push(p);
  }
  return out;
}

/** Our code: every source, test, script and benchmark (not what is generated into dist). */
function codeFiles(): string[] {
  const code = (f: string) => /\.(ts|js|mjs)$/.test(f) && !f.endsWith('.d.ts');
  const dirs = ['packages', 'services', 'tests', 'bench', 'scripts'];
  return [...dirs.flatMap((d) => filesUnder(d, code)), 'eslint.config.js', 'vitest.config.ts'];
}

/**
 * The names our code gives things: every identifier but a member of something named elsewhere
 * (`voice.SessionHost` is LiveKit's) and the name an import is renamed from.
 */
function identifiersOf(files: string[]): Map<string, string> {
  const names = new Map<string, string>();
  for (const file of files) {
    const source = ts.createSourceFile(file, read(file), ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node): void => {
      if (ts.isIdentifier(node)) {
        const p = node.parent;
        const foreign =
          (ts.isPropertyAccessExpression(p) && p.name === node) ||
          (ts.isQualifiedName(p) && p.right === node) ||
          (ts.isImportSpecifier(p) && p.propertyName === node);
        if (!foreign && !names.has(node.text)) names.set(node.text, file);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return names;
}

async function gatherFacts(): Promise<Facts> {
  const users = natsUsers(read('deploy/nats-users.conf'));
  const streams = new Set<string>([contracts.EVENTS_STREAM]);
  const buckets = new Set<string>([contracts.RECORDINGS_BUCKET]);
  for (const u of Object.values(users)) {
    for (const entry of [...u.pubAllow, ...u.subAllow]) {
      for (const [kind, name] of resourcesOf(entry)) (kind === 'stream' ? streams : buckets).add(name);
    }
  }
  const files = codeFiles();
  const playgroundFiles = files.filter(
    (f) => f.startsWith('services/playground/src/') && f.endsWith('.ts') && !f.endsWith('.test.ts'),
  );
  const agentSessionMakers = files.filter(
    (f) =>
      /^services\/[^/]+\/src\//.test(f) &&
      !f.endsWith('.test.ts') &&
      /new voice\.AgentSession\(|extends voice\.AgentSession\b/.test(read(f)),
  );
  return {
    declared: declaredSubjects(),
    users,
    streams: [...streams],
    buckets: [...buckets],
    routeSubjects: new Set(routes.map((r) => r.subject)),
    ownRoutes: await gatewayOwnRoutes(),
    playgroundFiles,
    agentSessionMakers,
    identifiers: identifiersOf(files),
  };
}

// ------------------------------------------------------------------------------------------- the checks

const tokensOf = (text: string) => [...text.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!);
/** `playground.owner.<sessionId>.<verb>` → `playground.owner.*.*`. */
const normal = (subject: string) => subject.replace(/<[^>]+>/g, '*');
const SUBJECT =
  /^(agents|sessions|playground|telephony|webhooks|voice|events|domain)(\.([\w-]+|\*|>|<\w+>))+$/;

/** NATS's wildcards, token by token: whether some subject matches both patterns. */
function overlap(a: string, b: string): boolean {
  const x = a.split('.');
  const y = b.split('.');
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if (x[i] === '>' || y[i] === '>') return x[i] !== undefined && y[i] !== undefined;
    if (x[i] === undefined || y[i] === undefined) return false;
    if (x[i] !== '*' && y[i] !== '*' && x[i] !== y[i]) return false;
  }
  return true;
}

/** Whether every subject `pattern` stands for is one `permission` allows. */
function covers(permission: string, pattern: string): boolean {
  const p = permission.split('.');
  const s = pattern.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return s.length > i;
    if (s[i] === undefined) return false;
    if (p[i] !== '*' && p[i] !== s[i]) return false;
  }
  return p.length === s.length;
}

function section(doc: string, heading: string): string {
  const at = doc.indexOf(`\n## ${heading}`);
  if (at < 0) return '';
  const next = doc.indexOf('\n## ', at + 1);
  return doc.slice(at, next < 0 ? undefined : next);
}

/** List items of a section, each with its continuation lines joined. */
function items(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('- ')) out.push(line.slice(2));
    else if (line.startsWith('  ') && out.length > 0 && line.trim()) out[out.length - 1] += ` ${line.trim()}`;
  }
  return out;
}

const PATH_EXT = /\.(ts|js|mjs|md|json|conf|ya?ml|html|css)$/;
const BASE = /^(services|packages)\/[\w-]+(\/src)?$/;

/**
 * Every backticked path, resolved from the repository root or from the last service or package directory the
 * page named (`services/playground/src`, then `egress/client.ts`): what does not exist, and what does.
 */
function paths(doc: string): { missing: string[]; found: Set<string> } {
  const missing: string[] = [];
  const found = new Set<string>();
  let base = '';
  for (const token of tokensOf(doc)) {
    if (/[\s<>*:{}…()@$]/.test(token) || token.startsWith('/')) continue;
    if (!token.includes('/') && !PATH_EXT.test(token)) continue;
    const clean = token.replace(/\/$/, '');
    const at = [clean, `${base}/${clean}`, `${base}/src/${clean}`].find((p) => existsSync(join(ROOT, p)));
    if (!at) {
      missing.push(base ? `${token} (in ${base})` : token);
      continue;
    }
    found.add(at);
    if (BASE.test(at) && statSync(join(ROOT, at)).isDirectory()) base = at;
  }
  return { missing, found };
}

/** The subject list: each item's subjects, who subscribes and who publishes. */
function subjectList(doc: string) {
  return items(section(doc, 'Subjects: who publishes, who subscribes')).flatMap((item) => {
    const m = /^(.*?): subscribes ([^;]+); publishes ([^;]+);/.exec(item);
    if (!m) return [];
    const names = (s: string) => (s.trim() === '—' ? [] : s.split(',').map((n) => n.trim()));
    return [
      {
        subjects: tokensOf(m[1]!).map(normal),
        subscribers: names(m[2]!).sort(),
        publishers: names(m[3]!).sort(),
      },
    ];
  });
}

/** Claims the page once made that no structure above can tell from a true one (issue 49). */
const FALSE_CLAIMS = [
  /nothing else is shared/i,
  /no data of its own/i,
  /\bno subjects\b/i,
  /\b(test|regression) cases?\b[^.]{0,60}\bon the text transport/i,
  /judged when it comes back/i,
];

function problems(doc: string, facts: Facts): string[] {
  const out: string[] = [];
  const { missing, found } = paths(doc);
  out.push(...missing.map((p) => `names a path that does not exist: ${p}`));

  for (const f of facts.playgroundFiles) if (!found.has(f)) out.push(`does not name the playground's ${f}`);

  // subjects, both ways
  const docSubjects = tokensOf(doc)
    .filter((t) => SUBJECT.test(t))
    .map(normal);
  const natsSubjects = Object.values(facts.users)
    .flatMap((u) => [...u.pubAllow, ...u.subAllow])
    .filter((e) => SUBJECT.test(e));
  for (const s of docSubjects) {
    if (![...facts.declared, ...natsSubjects].some((d) => overlap(s, d)))
      out.push(`names an undeclared subject: ${s}`);
  }
  const listed = subjectList(doc);
  for (const d of facts.declared) {
    if (!listed.some((row) => row.subjects.includes(d)))
      out.push(`does not say who publishes and subscribes ${d}`);
  }

  // who subscribes and who publishes, as NATS lets them
  const permitted = (u: NatsUser, s: string) =>
    u.pubAllow.some((a) => covers(a, s)) && !u.pubDeny.some((d) => covers(d, s));
  for (const row of listed) {
    for (const s of row.subjects) {
      const subscribers = Object.entries(facts.users)
        .filter(([, u]) => u.subAllow.some((a) => !a.startsWith('_INBOX') && overlap(a, s)))
        .map(([n]) => n)
        .sort();
      if (subscribers.join() !== row.subscribers.join()) {
        out.push(
          `${s}: says ${row.subscribers.join(', ') || 'no one'} subscribes, NATS lets ${subscribers.join(', ') || 'no one'}`,
        );
      }
      for (const p of row.publishers) {
        const u = facts.users[p];
        if (!u || !permitted(u, s)) out.push(`${s}: says ${p} publishes, which NATS does not let it`);
      }
      for (const [name, u] of Object.entries(facts.users)) {
        const specific = u.pubAllow.some((a) => !a.includes('>') && SUBJECT.test(a) && covers(a, s));
        if (specific && !row.publishers.includes(name))
          out.push(`${s}: ${name} publishes it (NATS lets it), not said`);
      }
      if (facts.routeSubjects.has(s) && !row.publishers.includes('gateway')) {
        out.push(`${s}: the gateway's route table sends it, not said`);
      }
    }
  }

  // streams and buckets, both ways, and in the diagram
  const named = (kind: string) =>
    [...doc.matchAll(new RegExp(`\\b${kind} \`([^\`]+)\``, 'g'))].map((m) => m[1]!);
  for (const s of named('stream'))
    if (!facts.streams.includes(s)) out.push(`names an undeclared stream: ${s}`);
  for (const b of named('bucket'))
    if (!facts.buckets.includes(b)) out.push(`names an undeclared bucket: ${b}`);
  for (const s of facts.streams) if (!named('stream').includes(s)) out.push(`does not name the stream ${s}`);
  for (const b of facts.buckets) if (!named('bucket').includes(b)) out.push(`does not name the bucket ${b}`);
  const diagram = /```\n([\s\S]*?)```/.exec(doc)?.[1] ?? '';
  const mustDraw = ['JetStream', 'Object Store', 'KV', 'voice.<sessionId>.in', 'voice.<sessionId>.out'];
  for (const w of [...facts.streams, ...facts.buckets, ...mustDraw, ...Object.keys(facts.users)]) {
    if (!diagram.includes(w)) out.push(`the diagram does not show ${w}`);
  }

  // what each service keeps, writes or reads in JetStream is in its entry of "Who owns what"
  const owners = items(section(doc, 'Who owns what'));
  for (const [name, u] of Object.entries(facts.users)) {
    const entry = owners.find((i) => i.startsWith(`**${name}**`)) ?? '';
    const touched = new Set([...u.pubAllow, ...u.subAllow].flatMap((e) => resourcesOf(e).map(([, r]) => r)));
    for (const r of touched)
      if (!entry.includes(`\`${r}\``)) out.push(`"Who owns what" does not say ${name} uses ${r}`);
  }

  // the gateway's own routes
  const urls = tokensOf(doc)
    .map((t) => params(t.split(' ').at(-1)!))
    .filter((t) => t.startsWith('/'));
  // `/docs` names what Swagger UI serves under it, `/console` the console's files: an own route's prefix only
  const own = new Set(facts.ownRoutes.map((r) => params(r.split(' ')[1]!)));
  for (const r of facts.ownRoutes) {
    const url = params(r.split(' ')[1]!);
    if (!urls.some((u) => url === u || (own.has(u) && url.startsWith(`${u}/`))))
      out.push(`does not name the gateway's route ${r}`);
  }

  // where an AgentSession is made
  const made = doc.split('\n\n').find((p) => p.includes('`AgentSession`') && p.includes('made in')) ?? '';
  const makers = tokensOf(made)
    .filter((t) => PATH_EXT.test(t))
    .sort();
  if (makers.join() !== [...facts.agentSessionMakers].sort().join()) {
    out.push(
      `says AgentSession is made in ${makers.join(', ')}; it is made in ${facts.agentSessionMakers.join(', ')}`,
    );
  }

  // the glossary: each word defined once; its rejected identifiers unused
  const rows = section(doc, 'One word per idea')
    .split('\n')
    .filter((l) => l.startsWith('|') && !l.startsWith('| ---') && !l.startsWith('| idea'))
    .map((l) => l.split('|').map((c) => c.trim()));
  const defined = [
    ...rows.flatMap((cells) => [...cells[2]!.matchAll(/\*\*([^*]+)\*\*/g)].map((m) => m[1]!)),
    ...[...doc.matchAll(/^- \*\*([^*]+)\*\*:/gm)].map((m) => m[1]!),
  ];
  for (const w of new Set(defined)) {
    if (defined.filter((d) => d === w).length > 1) out.push(`defines "${w}" more than once`);
  }
  if (rows.length === 0) out.push('has no glossary table');
  for (const cells of rows) {
    for (const word of tokensOf(cells[3] ?? '').filter((t) => /^[A-Za-z_$][\w$]*$/.test(t))) {
      const file = facts.identifiers.get(word);
      if (file) out.push(`${file} names something ${word}, a word the glossary rejects`);
    }
  }

  for (const claim of FALSE_CLAIMS) if (claim.test(doc)) out.push(`claims what is false: ${claim}`);
  return out;
}

// -------------------------------------------------------------------------------------------- the tests

let facts: Facts;
beforeAll(async () => {
  facts = await gatherFacts();
}, 60_000);

describe('docs/architecture.md', () => {
  it('is true of the code and of the NATS users', () => {
    expect(problems(DOC, facts)).toEqual([]);
  });

  it('reads what it checks from the code: subjects, streams, buckets, routes, modules', () => {
    expect(facts.declared).toEqual(
      expect.arrayContaining(['agents.create', 'playground.owner.*.*', 'voice.*.in', 'events.*.*']),
    );
    expect(facts.streams).toEqual(expect.arrayContaining(['SESSION_EVENTS', 'DOMAIN_EVENTS']));
    expect([...facts.buckets].sort()).toEqual(
      expect.arrayContaining([
        'gateway-tickets',
        'live-deploys',
        'playground-callers',
        'recordings',
        'telephony-call-tokens',
      ]),
    );
    expect(facts.ownRoutes).toEqual(
      expect.arrayContaining([
        'GET /healthz',
        'GET /docs',
        'GET /console',
        'POST /api/tickets',
        'GET /api/agents/:id/test-sessions/:sessionId/recording',
        'GET /api/agents/:id/voice-sessions/:sessionId/audio',
      ]),
    );
    expect(facts.playgroundFiles).toContain('services/playground/src/sessions/hosted-sessions.ts');
    expect(facts.identifiers.get('HostedSessions')).toBeDefined();
  });
});

/** A change to the page: `from` replaced by `to` (it must be there), or `to` added at the end. */
const edit = (from: string | RegExp | null, to: string) => (doc: string) => {
  if (from === null) return `${doc}\n${to}\n`;
  const out = doc.replace(from, to);
  if (out === doc) throw new Error(`not in the page: ${String(from)}`);
  return out;
};
const without = (token: string) =>
  edit(new RegExp(`\`${token.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\``, 'g'), 'it');

const OLD_DIAGRAM = `\`\`\`
browser ──HTTP──▶ gateway ──NATS request──▶ agents      ──▶ Redis  (ag:…)
                   (Fastify)               sessions    ──▶ Redis  (ss:…)
                                           playground  ──▶ LiveKit RoomService (Twirp), model providers
\`\`\``;

/** Each claim issue 49 found false, as it was written (or as its omission), and a page that makes it. */
const CLAIMS: [string, (doc: string) => string][] = [
  [
    'nothing but request/reply is shared',
    edit(null, 'Four processes talk over NATS request/reply. Nothing else is shared.'),
  ],
  ['a diagram without JetStream, Object Store or KV', edit(/```\n[\s\S]*?```/, OLD_DIAGRAM)],
  ['the stream SESSION_EVENTS is not shared', without('SESSION_EVENTS')],
  ['no Object Store bucket recordings', without('recordings')],
  ['no KV bucket playground-callers', without('playground-callers')],
  ['no KV bucket gateway-tickets', without('gateway-tickets')],
  ['no plain pub/sub voice.<id>.in', edit(/^- `voice\.<sessionId>\.in`.*\n.*\n/m, '')],
  [
    'the gateway has no data of its own',
    edit(null, 'The gateway has no business logic and no data of its own.'),
  ],
  ['the gateway keeps no bucket', edit(/(\*\*gateway\*\*: )the KV bucket `gateway-tickets`/, '$1nothing')],
  ['the gateway has no subjects', edit(null, '- **gateway** keeps no subjects (it only sends requests).')],
  [
    'the gateway subscribes to nothing',
    edit(
      '`voice.<sessionId>.out`: subscribes gateway, telephony;',
      '`voice.<sessionId>.out`: subscribes telephony;',
    ),
  ],
  [
    'the gateway publishes no voice.*.in',
    edit(
      '`voice.<sessionId>.in`: subscribes playground; publishes gateway, telephony;',
      '`voice.<sessionId>.in`: subscribes playground; publishes telephony;',
    ),
  ],
  ["the edge's routes omit /docs", without('/docs')],
  ["the edge's routes omit /console", without('/console')],
  [
    "the edge's routes omit the recording route",
    without('GET /api/agents/:id/test-sessions/:sessionId/recording'),
  ],
  [
    "the edge's routes omit the audio WebSocket",
    without('GET /api/agents/:id/voice-sessions/:sessionId/audio'),
  ],
  [
    'test cases run on the text transport',
    edit(null, 'Regression test cases (on the text transport) run there.'),
  ],
  [
    '"voice session" defined two ways',
    edit(null, '- **voice session**: a hosted session over LiveKit: a room, a browser token, an agent.'),
  ],
  ['the runtime list omits conversations.ts', without('conversation/conversation-kit.ts')],
  ['the runtime list omits native-vad.ts', without('models/native-vad.ts')],
  ['the runtime list omits reply-tap.ts', without('conversation/reply-tap.ts')],
  [
    'AgentSession made in runner.ts and typed-session.ts',
    without('services/playground/src/voice/voice-pipeline.ts'),
  ],
  [
    'a test run judged when it comes back',
    edit(null, 'Each case is sent to the playground, judged when it comes back.'),
  ],
  ['a path that moved', edit('`models/readiness.ts`', '`readiness.ts`')],
];

describe('the checks', () => {
  it.each(CLAIMS)('catch a page that says %s', (_claim, make) => {
    expect(problems(make(DOC), facts)).not.toEqual([]);
  });

  it('catch a subject added without a word in the page', () => {
    const added = { ...facts, declared: [...facts.declared, 'playground.rooms.pause'] };
    expect(problems(DOC, added)).toEqual([
      'does not say who publishes and subscribes playground.rooms.pause',
    ]);
  });

  it('catch a service that subscribes where the page says it does not', () => {
    const users = structuredClone(facts.users);
    users.sessions!.subAllow.push('voice.*.in');
    expect(problems(DOC, { ...facts, users })).toEqual([
      'voice.*.in: says playground subscribes, NATS lets playground, sessions',
    ]);
  });

  it('catch a rejected word taken as a name', () => {
    const identifiers = new Map([...facts.identifiers, ['SessionHost', 'services/x.ts']]);
    expect(problems(DOC, { ...facts, identifiers })).toEqual([
      'services/x.ts names something SessionHost, a word the glossary rejects',
    ]);
  });
});
