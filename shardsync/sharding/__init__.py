"""The sharding protocol library (design §2): pure rules (ring, membership, election, assignment, handoff,
clock, timings, states), the member side (member_loop, assignment_watch, departure) and the coordinator
side (coordinator_loop), each loop placed by one `site.Site`. It imports neither the worker, nor the
flags (`config`), nor the ownership modes that use it (shardsync.ownership)."""
