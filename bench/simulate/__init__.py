"""`python -m bench.simulate`: the sharding protocol at internet scale, simulated on a fake clock.

The job: run the pure protocol modules of shardsync.sharding (membership's `LivenessTracker`, election's
`Election`, publisher's `Publisher`, assignment's `Assignment` with the real slot table of `slots` and the
overrides of `balance`,
handoff's `handoff` and `may_acquire`) for 10, 100 and 1,000 replicas over 10k, 100k and 1M zones, through a
join, a graceful leave, a crash and a rolling restart, and report what a real cluster cannot show cheaply:
balance, zones moved per event against the ideal, time to full ownership, lease writes/s, watch events/s
each replica receives, and the size of the assignment ConfigMap. Deterministic for a seed (only
`wall_seconds` varies).

The model (modules: params, api, zones, engine, view, coordinator, replica, cluster, scenarios, runner,
table):
- Each replica does what MemberLoop, PeerView, ShardedOwnership, Candidate and CoordinatorLoop do
  (replica.py, view.py and coordinator.py say exactly what): renews its member Lease every renew interval
  from its last write; follows the coordinator Lease, the coordinator's member Lease and the Leases of the
  peers rule 4 names for its pending zones (every member Lease while it leads or must hear from everyone);
  on a newer generation releases what it lost, acknowledges in one Lease write, and acquires each gained
  zone once `may_acquire` allows; takes the coordinator Lease when it is free; and, while elected, feeds
  its statuses to a `Publisher` and writes its proposals. A graceful leave drains (Lease marked draining,
  wait for a generation without it, at most the drain timeout, release, delete the Lease); a crash stops
  everything (no release, the Lease stays until observers see it lapse); a rolling restart restarts every
  pod, highest ordinal first, each once the previous is Ready: release, Lease marked restarting,
  coordinator Lease given back, a new process `restart_downtime` later, Ready within a readiness period.
- The API server (api.py) stores the Leases and the ConfigMap; no latency, no lost or reordered watch
  events, no conflicts: a write is seen by every watcher at the instant it is made.
- Zones are names (`zone-000123.example`); every replica's owner computation is the same function of the
  same assignment, so it is computed once per published generation (zones.py) and generations are
  diffed with `Assignment.moved`.
- Watch events and requests are counted per replica and second, not delivered one by one: a write of the
  coordinator Lease or the ConfigMap is one event for every running replica; a write of a member Lease one
  for each replica following it (api.py). Requests: every Lease and ConfigMap write, a list and a watch
  for each watch started, a GET for each Lease read; not the watches a real client restarts every minute.

Shortcuts, each exact for what is reported (the modules' docstrings argue it): a replica's tracker is fed
lazily, each Lease with the time it was written; rule 4 is re-checked, and the coordinator re-evaluates,
only when an input can have changed the verdict (the real loops wake on every Lease event, to the same
verdict); pending zones with the same previous owner share one `may_acquire` verdict; a candidate makes
no round while a running holder renews (it has nothing to decide: shardsync's makes none either, it only
watches) and rounds once when the Lease is free on its clock; the warm-up of a size is simulated once and
every event runs in a child process forked from it. Pods of the warm-up start on a 100 ms grid.

Not modelled: API server latency and throughput limits, watch delays and relists, network partitions,
clock drift, provider writes and their latency (a zone is "run" from its acquisition on; releasing is
instant, so a real release that waits for an in-flight write takes longer), CPU time of the replicas.

The JSON (`bench/results/simulate.json`): `schema`, `kind` ("simulate"), `seed`, `started`, `finished`,
`duration_seconds`, `machine` (as bench's), `timing` (the lease/renew/settle/grace values and everything
derived from them), `matrix` (`replicas`, `zones`, `events`), and `rows`, one per (replicas, zones,
event), each with:
- `replicas`, `zones`, `event`, `victim` (the joiner, the leaver, the crashed replica; null for a roll);
- `generation_before`, `generation_after`, `generations_published` (during the event);
- `balance_max_over_mean`: zones of the busiest member / mean zones per member, final generation (at most
  1.05, or ceil(mean)/mean where the zones do not divide that evenly: sharding/balance.py);
- `zones_moved` (owner changes summed over the generations published during the event), `ideal_moved`
  (zones / the larger of N before and after; null for a roll), `moved_ratio`, `moved_only_as_needed`
  (a join moves zones only to the joiner, a leave or crash only from the victim, a roll none);
- `seconds_to_publish`: from the event (a crash comes just after the victim's renewal, the longest case)
  to the first new generation;
- `seconds_to_full_ownership`: from the event until every zone runs at exactly one replica under the
  final generation (a roll: the longest over its restarts, each from SIGTERM); `longest_unowned_seconds`:
  the longest a zone ran nowhere (a restart's parked zones count);
- `lease_writes_per_second` (member and coordinator Leases, cluster-wide, over the steady window before
  the event), `lease_writes_per_second_peak` (busiest second during the event);
- `watch_events_per_second_per_member` (a replica that does not lead, steady mean over them),
  `watch_events_per_second_coordinator` (the coordinator, steady), `watch_events_per_second_per_replica`
  (steady, all replicas' mean), `watch_events_per_second_per_member_peak` and `..._coordinator_peak`
  (the busiest second during the event of a replica that was not the coordinator at its start or end, and
  of those that were); `watch_deliveries_per_second` and `watch_deliveries_per_second_peak`: all replicas
  together; `api_requests_per_second` (all replicas, steady), `api_requests_per_second_per_member` and
  `api_requests_per_second_coordinator` (steady);
- `configmap_writes` (during the event), `assignment_bytes`: `Assignment.to_configmap_data()` as UTF-8;
- `overlapping_zones`: acquisitions of a zone another replica still ran (must be 0);
- `stale_view_waits`, `stale_view_wait_max_seconds`: pending zones whose blocker had expired on the
  replica's clock while its member view was still older than that (it waits for its next renewal);
- `restarts`, `roll_seconds`, `restart_seconds_to_full_ownership_mean` (a roll), `simulated_seconds`,
  `simulation_events`, `wall_seconds` (the warm-up included, as if the row ran alone).
"""
