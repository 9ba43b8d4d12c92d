"""The embedded default: an API server for development and tests, and the multi-replica launcher."""
