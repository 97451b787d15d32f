"""Sample-data generators for the demo, the tests and the benchmark (not in the job's zip)."""
