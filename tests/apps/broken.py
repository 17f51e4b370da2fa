"""An app module whose import fails (a missing setting, say)."""

raise RuntimeError("SETTINGS_MODULE is not set")
