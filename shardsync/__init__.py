"""shardsync: a Kubernetes DNS controller that runs as N active replicas, each syncing its own DNS zones."""

__version__ = "0.1.0"
