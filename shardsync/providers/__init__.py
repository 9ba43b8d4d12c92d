"""DNS providers: where records are read from and written to (aws, azure, cloudflare, fake, google, pdns,
rfc2136, webhook; table.py lists them), and what they share beside them (base.py, the interface)."""
