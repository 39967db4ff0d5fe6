// NATS JetStream key-value, for the few cross-instance facts the edge keeps (the gateway's used tickets).
export { Kvm, type KV } from '@nats-io/kv';
export { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
