"""Kubernetes sources: watch cluster objects, keep a cache, and turn objects into desired endpoints."""
