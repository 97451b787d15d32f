"""Reading inputs, catalog tables, and writing a wing's output (lock, staging, commit)."""
