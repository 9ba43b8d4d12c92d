"""Active/active sharding: member leases, coordinator election, the hash ring, assignment and handoff."""
