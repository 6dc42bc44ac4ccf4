"""The guarded workflows: serve, stop, power (cycle/on/off), recover, cluster power."""
