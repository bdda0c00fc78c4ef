"""Developer measurement commands: step and kernel benchmarks, profiles and baselines."""
