"""The rhythm of every long-running loop, shared by every layer: when to retry (`backoff`), how fast to call
(`token_bucket`), when to wake (`notify`) and how often to log a failure that repeats (`log_digest`)."""
