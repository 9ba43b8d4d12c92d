"""DNS providers: where records are read from and written to (fake, rfc2136, webhook)."""
