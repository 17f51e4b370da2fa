"""A module that forgot its register(app) function."""

REGISTER = "not a function"
