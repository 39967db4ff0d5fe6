// The stub lives in the testkit (shared with the benchmarks); this path stays for the tests that import it.
export * from '@vab/testkit';
