"""The example app's task modules; each has register(app)."""
