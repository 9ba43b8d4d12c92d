"""Which zones this replica reconciles, in three modes behind one port (`port.py`): `sole.py` (one replica
alone, or `--once`), `active_passive.py` (`--sharding=off`: only the elected coordinator writes) and
`sharded.py` (every replica writes its share of the assignment; its bookkeeping is the pure `shard_state.py`).
The modes drive the worker through the narrow `ZoneWorker` port and render /shards with `shards_view.py`;
the protocol rules they follow live in shardsync.sharding, which knows nothing of them."""
