import { describe, expect, it } from 'vitest';
import { createTickets, type UsedTickets } from './tickets.js';

// The ticket's own rules; single use across gateways (the JetStream bucket) is tested against a real
// nats-server in tests/integration (proxy, nats-permissions, browser).
const memory = (): UsedTickets => {
  const used = new Set<string>();
  return { markUsed: async (id) => !used.has(id) && Boolean(used.add(id)) };
};

describe('tickets', () => {
  it('open exactly their path, once', async () => {
    const tickets = createTickets({ apiTokens: ['a', 'b'], ttlMs: 30_000, used: memory() });
    const { ticket } = tickets.mint('/api/agents/1/events');
    expect(await tickets.redeem(ticket, '/api/agents/2/events')).toBe(false);
    expect(await tickets.redeem(ticket, '/api/agents/1/events')).toBeTruthy();
    expect(await tickets.redeem(ticket, '/api/agents/1/events')).toBe(false);
  });

  it("made for a page's origin: refused from another (not used up), opened from that one", async () => {
    const tickets = createTickets({ apiTokens: ['a'], ttlMs: 30_000, used: memory() });
    const path = '/live/desk/calls/c1/audio';
    const { ticket } = tickets.mint(path, 'agent-1', 'https://Shop.example.com');
    const from = (origin: string | undefined) => (bound: string | undefined) => bound === origin;
    await expect(tickets.redeem(ticket, path, from('https://evil.example'))).rejects.toMatchObject({
      code: 'UNAUTHORIZED',
    });
    await expect(tickets.redeem(ticket, path, from(undefined))).rejects.toMatchObject({
      code: 'UNAUTHORIZED',
    });
    expect(await tickets.redeem(ticket, path, from('https://shop.example.com'))).toEqual({
      caller: 'agent-1',
    });
    expect(await tickets.redeem(ticket, path, from('https://shop.example.com'))).toBe(false);
  });

  it("open a recording (a test session's or a call's) for every seek, an event stream once", async () => {
    const tickets = createTickets({ apiTokens: ['a'], ttlMs: 30_000, used: memory() });
    for (const path of ['/api/agents/1/test-sessions/s/recording', '/api/agents/1/calls/c/recording']) {
      const { ticket } = tickets.mint(path);
      expect(await tickets.redeem(ticket, path)).toBeTruthy();
      expect(await tickets.redeem(ticket, path), path).toBeTruthy();
    }
    const events = '/api/agents/1/calls/c/events';
    const { ticket } = tickets.mint(events);
    expect(await tickets.redeem(ticket, events)).toBeTruthy();
    expect(await tickets.redeem(ticket, events)).toBe(false);
  });

  it('expire after their lifetime', async () => {
    let now = 1_000_000;
    const tickets = createTickets({ apiTokens: ['a'], ttlMs: 30_000, used: memory(), now: () => now });
    const grant = tickets.mint('/x');
    expect(grant.expiresAt).toBe(1_030_000);
    now = 1_030_000;
    expect(await tickets.redeem(grant.ticket, '/x')).toBe(false);
  });

  it('are accepted by every gateway with the same tokens (in any order), and by no other', async () => {
    const used = memory();
    const minted = createTickets({ apiTokens: ['a', 'b'], ttlMs: 30_000, used }).mint('/x').ticket;
    const other = createTickets({ apiTokens: ['c'], ttlMs: 30_000, used: memory() });
    expect(await other.redeem(minted, '/x')).toBe(false);
    const same = createTickets({ apiTokens: ['b', 'a'], ttlMs: 30_000, used });
    expect(await same.redeem(minted, '/x')).toBeTruthy();
  });

  it('cannot be altered: another path or a later expiry breaks the signature', async () => {
    const tickets = createTickets({ apiTokens: ['a'], ttlMs: 30_000, used: memory() });
    const [version, body, mac] = tickets.mint('/x').ticket.split('.');
    const payload = JSON.parse(Buffer.from(body!, 'base64url').toString()) as Record<string, unknown>;
    for (const change of [{ p: '/y' }, { e: Date.now() + 3_600_000 }]) {
      const forged = Buffer.from(JSON.stringify({ ...payload, ...change })).toString('base64url');
      expect(await tickets.redeem(`${version}.${forged}.${mac}`, String(change.p ?? '/x'))).toBe(false);
    }
    expect(await tickets.redeem('v1.not-a-ticket', '/x')).toBe(false);
    expect(await tickets.redeem('', '/x')).toBe(false);
  });
});
