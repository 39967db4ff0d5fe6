// The egress client lives in @vab/egress: the webhooks service delivers through the same check.
export {
  createEgressFetch,
  createHostCheck,
  EgressRefused,
  EgressResponseTooLarge,
  MAX_EVENT_BYTES,
  overBoundMessage,
  type EgressClientOptions,
  type EgressFetch,
  type HostCheck,
  type Resolver,
} from '@vab/egress';
