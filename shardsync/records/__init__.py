"""DNS records and the rules about them, pure (no I/O) and shared by every layer — external-dns's
endpoint/, plan/ and registry/ packages: the `Endpoint` and `Changes` values with the name rules and the
zone index (`endpoint`), the domain filter (`domain_filter`), the desired state indexed by zone
(`desired`), the planner (`plan`) and the ownership registries (`registry` with its TXT names,
`txt_names`; `noop_registry`)."""
