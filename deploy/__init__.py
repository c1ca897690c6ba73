"""Scale-out recipes for the ik-layer service on existing engines (Ray Serve, Kubernetes)."""
