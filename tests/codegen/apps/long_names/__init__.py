"""Long task, parameter, field and type names: the output must still be formatter-stable."""
