// The egress policy lives in @vab/egress: the webhooks service delivers through the same check.
export { EgressPolicy, internalRange, parseAllowList, type AllowEntry, type UrlVerdict } from '@vab/egress';
