"""The bench's scenarios, one module each; every `run(ctx)` returns the figures of its JSON key."""
