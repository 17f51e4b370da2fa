"""A producer service: it enqueues jobs for the example worker through generated clients only."""
