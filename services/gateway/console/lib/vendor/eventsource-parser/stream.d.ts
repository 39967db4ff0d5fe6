// eventsource-parser's stream module, as the gateway serves it here (services/gateway/src/console.ts serves
// the package's own dist/ at this path): its types, for the checker only (never served).
export * from 'eventsource-parser/stream';
