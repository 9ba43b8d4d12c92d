"""The bench suite: real processes against the fake provider, measuring the scaling curve and its costs."""
