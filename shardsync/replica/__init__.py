"""One replica, `shardsync run`, wired from its flags: `command` reads the flags, builds the provider and
runs the replica to its exit; `config` turns flags and environment into `Settings` (`config_checks` checks
single values); `wiring` builds every part from `Settings` and runs them as one task group; `server`
serves /metrics, /healthz, /readyz and /shards; `allocator` and `collector` tune malloc and the garbage
collector for a long-running replica. The only package that reads `Settings`."""
