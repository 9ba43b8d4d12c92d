"""`shardsync shards`: the /shards view of a deployment as tables or JSON, from a replica or the cluster."""
